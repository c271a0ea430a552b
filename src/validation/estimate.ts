/**
 * Estimator (since 1.1): the `estimate` request's result.
 */
import { Checks } from './checks';

const { str, nonNeg, bytes, literal, nullable, array, object } = Checks;

const estimateBytes = [
  'param_count',
  'n_gpus',
  'zero_stage',
  'parameters',
  'gradients',
  'optimizer_state',
  'master_weights',
  'activations',
  'total',
  'cpu_offloaded'
];

export const estimate = object({
  ...Object.fromEntries(estimateBytes.map(key => [key, bytes])),
  precision: str,
  optimizer: str,
  offload: array(str),
  batch_size: nullable(bytes),
  seq_len: nullable(bytes),
  activation_source: literal('measured', 'none'),
  activation_per_sample: nullable(nonNeg),
  model: nullable(str),
  notes: array(str)
});

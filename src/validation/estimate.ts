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

/** Since 1.1: what a model's setup measures as (`Estimate.measured`). */
const measuredSetup = object({
  param_dtype: nullable(str),
  precision: nullable(str),
  optimizer: nullable(str),
  optimizer_variable: nullable(str),
  optimizer_class: nullable(str),
  optimizer_state_bytes_per_param: nullable(nonNeg)
});

export const estimate = object(
  {
    ...Object.fromEntries(estimateBytes.map(key => [key, bytes])),
    precision: str,
    optimizer: str,
    offload: array(str),
    batch_size: nullable(bytes),
    seq_len: nullable(bytes),
    activation_source: literal('measured', 'none'),
    activation_per_sample: nullable(nonNeg),
    model: nullable(str),
    notes: array(str),
    activation_dtype: nullable(str),
    activation_scale: nullable(nonNeg),
    measured: nullable(measuredSetup)
  },
  ['activation_dtype', 'activation_scale', 'measured']
);

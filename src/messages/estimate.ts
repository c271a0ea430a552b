/**
 * Estimator (since 1.1): the `estimate` request's params and result (docs/protocol.md, "Estimator").
 */
/** Since 1.1: the `estimate` request's answer, bytes per GPU (docs/protocol.md). */
export interface IEstimate {
  param_count: number;
  precision: string;
  optimizer: string;
  zero_stage: number;
  n_gpus: number;
  offload: string[];
  batch_size: number | null;
  seq_len: number | null;
  parameters: number;
  gradients: number;
  optimizer_state: number;
  master_weights: number;
  activations: number;
  total: number;
  /** Bytes of this GPU's share moved to host memory by `offload`. */
  cpu_offloaded: number;
  activation_source: 'measured' | 'none';
  activation_per_sample: number | null;
  model: string | null;
  notes: string[];
}

/** Since 1.1: the `estimate` request's params: `model` (a name) or `params` (a count). */
export interface IEstimateParams {
  model?: string;
  params?: number;
  optimizer?: string;
  precision?: string;
  batch_size?: number | null;
  seq_len?: number | null;
  zero_stage?: number;
  n_gpus?: number;
  offload?: string | null;
}

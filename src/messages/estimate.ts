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
  /** Since 1.1: the dtype the activations were measured at (null: not known / none). */
  activation_dtype?: string | null;
  /** Since 1.1: the factor applied to the measured activations for this precision. */
  activation_scale?: number | null;
  /** Since 1.1: what the model's setup measures as (null for a bare count). */
  measured?: IMeasuredSetup | null;
}

/** Since 1.1: a model's measured setup: the estimate's defaults for it. */
export interface IMeasuredSetup {
  /** The dtype most parameters are stored in ("float32"). */
  param_dtype: string | null;
  /** The precision that implies ("32-true", "bf16-mixed", "bf16-true"...). */
  precision: string | null;
  /** The optimizer over the model's parameters, as an estimator name; null: unknown kind. */
  optimizer: string | null;
  optimizer_variable: string | null;
  optimizer_class: string | null;
  /** Bytes of its state per parameter; null before its first step. */
  optimizer_state_bytes_per_param: number | null;
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

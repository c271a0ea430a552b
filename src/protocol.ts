/**
 * vramscope comm protocol v1 — the TypeScript mirror of docs/protocol.md and
 * python_bridge/vramscope/protocol.py. Shapes only; validation lives in `validate.ts`.
 */

import type { IEstimate, IEstimateParams } from './messages/estimate';
import type { IAdvice, IBatchSearch } from './messages/optimize';
import type { IProcessesMessage } from './messages/processes';

export * from './messages/estimate';
export * from './messages/optimize';
export * from './messages/processes';

export const PROTOCOL_VERSION = '1.1.0';
export const COMM_TARGET = 'vramscope';

export type Channel = 'stream' | 'control';
export type DeviceId = string;

export interface IDeviceInfo {
  id: DeviceId;
  kind: 'cpu' | 'cuda' | 'mps';
  name: string;
  total_bytes: number | null;
  used_bytes: number;
  reserved_bytes: number | null;
  initialized: boolean;
  source: string;
}

export interface IDeviceDelta {
  before_bytes: number;
  after_bytes: number;
  delta_bytes: number;
  peak_delta_bytes: number;
  /** Since 1.1, CPU only: the peak was counted op by op ('exact') or sampled. */
  peak_source?: 'exact' | 'sampled';
}

export interface ICellRecord {
  cell_id: string | null;
  execution_count: number | null;
  start_time: number;
  duration: number;
  ok: boolean;
  error_type: string | null;
  oom: boolean;
  code_head: string;
  devices: { [id: DeviceId]: IDeviceDelta };
  /** Since 1.1 (optional): the peaks of the child processes that reported during the cell. */
  processes?: { [key: string]: IProcessPeak };
}

/** Since 1.1: a child process's peaks during one cell (`CellRecord.processes`). */
export interface IProcessPeak {
  role: string;
  peak_rss: number;
  peak_uss: number;
  peak_device: { [id: DeviceId]: number };
}

export interface ISampleValues {
  used: number;
  reserved?: number;
  peak?: number;
  device_used?: number;
  device_total?: number;
}

export interface ISample {
  t: number;
  d: { [id: DeviceId]: ISampleValues };
  /**
   * Since 1.1, optional: devices the kernel did not read at this tick (the CPU on a
   * fragmented heap, whose readings it spaces out): not in `d`, yet present; their lines go
   * on from the last reading. A device missing from `d` and not listed here has no reading.
   */
  unread?: DeviceId[];
}

export interface ISettings {
  sample_hz: number;
  cuda_peak_policy: 'reset' | 'preserve';
  insight: boolean;
  insight_budget_ms: number;
  history_limit: number;
  /** Since 1.1 (a 1.0 kernel has none). */
  cpu_peak?: 'sampled' | 'exact';
}

export interface ILayerInfo {
  path: string;
  type: string;
  saved_bytes: number;
  peak_saved_bytes: number;
  output_shape: number[] | null;
  param_bytes: number;
  grad_bytes: number;
  /** Since 1.1: `saved_bytes` split by the saved tensors' dtype (absent when 0). */
  saved_by_dtype?: { [dtype: string]: number };
  /** Since 1.1: `peak_saved_bytes` split by dtype (absent when 0). */
  peak_saved_by_dtype?: { [dtype: string]: number };
  /** Since 1.1: the module's forward starts a checkpointed region (non-reentrant). */
  checkpointed?: boolean;
}

export interface IBreakdown {
  total_bytes: number;
  parameters: number;
  gradients: number;
  optimizer_state: number;
  activations: number;
  other: number;
  reserved_free?: number;
  outside_pytorch?: number;
  /**
   * Since 1.1: the part of `other` that is tensors of the user's namespace no category
   * claims (belonging to no model); the rest of `other` is the runtime, allocator and Python.
   */
  other_tensors?: number;
  /**
   * Since 1.1: the runtime baseline: on cpu the part of `other` (after `other_tensors`) that
   * `import torch` added; on CUDA the part of `outside_pytorch` measured after CUDA's first
   * init (the context).
   */
  runtime_bytes?: number;
  /** Since 1.1: why `runtime_bytes` was not measured (torch imported before vramscope). */
  runtime_note?: string;
}

export interface IHolder {
  name: string;
  kind: string;
  bytes: number;
  explanation: string;
  fix: string;
}

/** One `torch.nn.Module` in the kernel's namespace (the insight model picker). */
export interface IModelInfo {
  /** Namespace name. */
  name: string;
  /** Class name, e.g. "Sequential". */
  type: string;
  /** Parameter bytes (each storage once). */
  param_bytes: number;
}

export interface IInsight {
  model: string | null;
  /** The namespace's models, largest first (`[]` when there is none). */
  models: IModelInfo[];
  layers: ILayerInfo[];
  breakdown: { [id: DeviceId]: IBreakdown };
  holders: IHolder[];
  scan_ms: number;
  skipped: string | null;
  /** Since 1.1: the forward the per-layer saved figures were measured on. */
  activations_measured?: IActivationsMeasured;
  /**
   * Since 1.1: the holders scan stopped at its time budget; it continues in the kernel's
   * next idle moment and a later insight completes the list (`skipped` set: it gave up).
   */
  partial?: boolean;
  /**
   * Since 1.1: the layers are those of the previous `insight` message (a continued holders
   * scan changed only the holders); `layers` is then empty and the front end keeps its own.
   */
  layers_unchanged?: boolean;
}

/**
 * Since 1.1: activation tracking measures the first forward of each model in a cell and
 * again when its inputs' shapes or dtype, the autocast policy or the grad/train mode change,
 * or when the previous measured call's graph is still alive (`graph_kept`).
 */
export interface IActivationsMeasured {
  cell_id: string | null;
  execution_count: number | null;
  /** 1-based index of the model call (a root module's forward) within its cell. */
  forward_index: number;
  reason: 'first' | 'shapes' | 'dtype' | 'mode' | 'graph_kept';
}

export interface IKernelInfo {
  pid: number;
  python: string;
  torch_version: string | null;
  cuda_available: boolean;
  mps_available: boolean;
}

export type ErrorCode =
  | 'protocol_mismatch'
  | 'invalid_message'
  | 'unknown_type'
  | 'unknown_method'
  | 'invalid_params'
  | 'internal';

// ---- kernel -> front end -------------------------------------------------

export interface IHelloMessage {
  type: 'hello';
  protocol_version: string;
  bridge_version: string;
  session_id: string;
  kernel: IKernelInfo;
  devices: IDeviceInfo[];
  settings: ISettings;
  cells: ICellRecord[];
  warnings: string[];
  /** Since 1.1: vramscope's own memory in the kernel, in bytes (an estimate). */
  self_bytes?: number;
  /**
   * Since 1.1: the kernel's last model insight, so that a reloaded page shows it at once
   * (absent when none was computed yet).
   */
  insight?: IInsight;
}

export interface ICellMessage {
  type: 'cell';
  record: ICellRecord;
  devices: IDeviceInfo[];
  /** Since 1.1: as in `IHelloMessage`. */
  self_bytes?: number;
}

/**
 * Since 1.1: the records of several cells at once, in order (the quick cells of a Run All,
 * sent together when the kernel goes idle); `devices` is the state after the last one.
 */
export interface ICellsMessage {
  type: 'cells';
  records: ICellRecord[];
  devices: IDeviceInfo[];
  self_bytes?: number;
}

export interface ISamplesMessage {
  type: 'samples';
  samples: ISample[];
  dropped: number;
}

export interface IDevicesMessage {
  type: 'devices';
  devices: IDeviceInfo[];
  /** The bridge's current warnings; when present they replace those of `hello`. */
  warnings?: string[];
}

export interface IInsightMessage {
  type: 'insight';
  insight: IInsight;
}

export interface INoticeMessage {
  type: 'notice';
  level: 'info' | 'warning';
  message: string;
}

export interface IErrorMessage {
  type: 'error';
  code: ErrorCode;
  message: string;
  in_reply_to: string | null;
}

export interface IReplyMessage {
  type: 'reply';
  id: string;
  ok: true;
  result: unknown;
}

/** Since 1.1: after a cell, when an applied suggestion's outcome changed. */
export interface IAdviceMessage {
  type: 'advice';
  advice: IAdvice;
}

/** Since 1.1: progress of vramscope.find_batch_size (one per size tried, then the end). */
export interface IBatchSearchMessage {
  type: 'batch_search';
  search: IBatchSearch;
}

export type KernelMessage =
  | IHelloMessage
  | ICellMessage
  | ICellsMessage
  | ISamplesMessage
  | IDevicesMessage
  | IInsightMessage
  | INoticeMessage
  | IErrorMessage
  | IReplyMessage
  | IProcessesMessage
  | IAdviceMessage
  | IBatchSearchMessage;

/** Since 1.1: the report formats `export_report` renders. */
export type ExportFormat = 'json' | 'csv' | 'markdown' | 'html';

/** Since 1.1: one rendered report file (the answer to `export_report`). */
export interface IExportResult {
  format: ExportFormat;
  /** A plain file name: `<notebook stem>.vramscope.<json|csv|md|html>`. */
  filename: string;
  /** The whole file. */
  content: string;
  mime: string;
}

// ---- front end -> kernel (control channel) --------------------------------

/** Typed request map: params and result per method. */
export interface IRequestMap {
  get_report: {
    params: Record<string, never>;
    result: Record<string, unknown>;
  };
  get_devices: {
    params: Record<string, never>;
    result: { devices: IDeviceInfo[] };
  };
  set_settings: { params: Partial<ISettings>; result: { settings: ISettings } };
  get_insight: { params: { model?: string }; result: { insight: IInsight } };
  clear_history: { params: Record<string, never>; result: { cleared: number } };
  /** The kernel's kept samples newer than `since` (all when absent): backfills the timeline. */
  get_samples: { params: { since?: number }; result: { samples: ISample[] } };
  /** The front end tells the kernel it rejected one of its messages (kept for the report). */
  report_error: {
    params: { code: string; message: string };
    result: { kept: number };
  };
  /** Since 1.1: ranked suggestions for a model (null/absent: the watched or largest). */
  get_advice: {
    params: { model?: string | null };
    result: { advice: IAdvice };
  };
  /** Since 1.1: the session report rendered as one file, for the panel's Export menu. */
  export_report: {
    params: { format: ExportFormat; notebook?: string };
    result: IExportResult;
  };
  /** Since 1.1: training memory per GPU for a namespace model or a parameter count. */
  estimate: { params: IEstimateParams; result: { estimate: IEstimate } };
  /** Since 1.1: every known child process with its kept lane points. */
  get_processes: {
    params: Record<string, never>;
    result: IProcessesMessage;
  };
}

export type Method = keyof IRequestMap;

export interface IRequestMessage<M extends Method = Method> {
  type: 'request';
  id: string;
  method: M;
  params: IRequestMap[M]['params'];
}

/**
 * Validation of every kernel -> front end message against protocol v1 (docs/protocol.md).
 *
 * `validateKernelMessage(raw)` returns the typed message, or a string saying what is wrong
 * (with the path of the offending field). It never throws. Numbers must be finite, byte counts
 * integers (non-negative unless they are deltas); unknown extra fields are ignored.
 */
import {
  ErrorCode,
  IAdvice,
  ICellRecord,
  IDeviceInfo,
  IEstimate,
  IExportResult,
  IInsight,
  ISample,
  ISettings,
  KernelMessage
} from './protocol';

import { Check, Checks, describe, isObject } from './validation/checks';
import { estimate } from './validation/estimate';
import { advice, batchSearch } from './validation/optimize';
import { processes } from './validation/processes';

export { Check, Checks } from './validation/checks';

/** Validate one message received from the kernel. */
export function validateKernelMessage(raw: unknown): KernelMessage | string {
  try {
    if (!isObject(raw)) {
      return `message: expected an object, got ${describe(raw)}`;
    }
    const type = raw['type'];
    if (typeof type !== 'string') {
      return `message.type: expected a string, got ${describe(type)}`;
    }
    const check = Private.MESSAGES[type];
    if (!check) {
      return `message.type: unknown type ${JSON.stringify(type)}`;
    }
    const error = check(raw, type);
    return error ?? (raw as unknown as KernelMessage);
  } catch (e) {
    // Defensive: a getter or a cyclic structure must not break the caller.
    return `message: could not be validated (${String(e)})`;
  }
}

/** Type guard form of `validateKernelMessage`. */
export function isKernelMessage(raw: unknown): raw is KernelMessage {
  return typeof validateKernelMessage(raw) !== 'string';
}

/** Validate a `CellRecord` (e.g. one stored in cell metadata). */
export function validateCellRecord(raw: unknown): ICellRecord | string {
  return Private.cellRecord(raw, 'record') ?? (raw as ICellRecord);
}

/** Validate a `DeviceInfo`. */
export function validateDeviceInfo(raw: unknown): IDeviceInfo | string {
  return Private.deviceInfo(raw, 'device') ?? (raw as IDeviceInfo);
}

/** Validate full `Settings` (the result of `set_settings`). */
export function validateSettings(raw: unknown): ISettings | string {
  return Private.settings(raw, 'settings') ?? (raw as ISettings);
}

/** Validate a `Sample`. */
export function validateSample(raw: unknown): ISample | string {
  return Private.sample(raw, 'sample') ?? (raw as ISample);
}

/** Validate an `Insight`. */
export function validateInsight(raw: unknown): IInsight | string {
  return Private.insight(raw, 'insight') ?? (raw as IInsight);
}

/** Validate an `Advice` (since 1.1), e.g. the result of `get_advice`. */
export function validateAdvice(raw: unknown): IAdvice | string {
  return advice(raw, 'advice') ?? (raw as IAdvice);
}

/** Validate an `Estimate` (since 1.1), the result of `estimate`. */
export function validateEstimate(raw: unknown): IEstimate | string {
  return estimate(raw, 'estimate') ?? (raw as IEstimate);
}

/**
 * Validate the result of `export_report` (since 1.1): four strings, the `format` asked for,
 * and a plain file name (no folder, not hidden), so saving it cannot leave the notebook's folder.
 */
export function validateExportResult(
  raw: unknown,
  format: string
): IExportResult | string {
  const error = Checks.object({
    format: Checks.literal(format),
    filename: Checks.str,
    content: Checks.str,
    mime: Checks.str
  })(raw, 'result');
  if (error) {
    return error;
  }
  const name = (raw as IExportResult).filename;
  if (!name || /[/\\]/.test(name) || name.startsWith('.')) {
    return `result.filename: expected a plain file name, got ${JSON.stringify(name.slice(0, 80))}`;
  }
  return raw as IExportResult;
}

/** Checks a `CellRecord` without the `omit` fields (e.g. the copy kept in cell metadata). */
export function cellRecordCheck(omit: ReadonlyArray<string> = []): Check {
  const fields = { ...Private.cellRecordFields };
  for (const key of omit) {
    delete fields[key];
  }
  return Checks.object(fields, Private.cellRecordOptional);
}

namespace Private {
  const {
    str,
    bool,
    num,
    nonNeg,
    int,
    bytes,
    any,
    literal,
    nullable,
    array,
    record,
    object
  } = Checks;

  export const deviceInfo = object({
    id: str,
    kind: literal('cpu', 'cuda', 'mps'),
    name: str,
    total_bytes: nullable(bytes),
    used_bytes: bytes,
    reserved_bytes: nullable(bytes),
    initialized: bool,
    source: str
  });

  const deviceDelta = object(
    {
      before_bytes: bytes,
      after_bytes: bytes,
      delta_bytes: int,
      peak_delta_bytes: bytes,
      peak_source: literal('exact', 'sampled')
    },
    ['peak_source'] // since 1.1, CPU only
  );

  export const cellRecordFields: { [key: string]: Check } = {
    cell_id: nullable(str),
    execution_count: nullable(int),
    start_time: num,
    duration: nonNeg,
    ok: bool,
    error_type: nullable(str),
    oom: bool,
    code_head: str,
    devices: record(deviceDelta),
    processes: record(
      object({
        role: str,
        peak_rss: bytes,
        peak_uss: bytes,
        peak_device: record(bytes)
      })
    )
  };

  /** `processes` is since 1.1: 1.0 records have none. */
  export const cellRecordOptional = ['processes'];

  export const cellRecord = object(cellRecordFields, cellRecordOptional);

  const sampleValues = object(
    {
      used: bytes,
      reserved: bytes,
      peak: bytes,
      device_used: bytes,
      device_total: bytes
    },
    ['reserved', 'peak', 'device_used', 'device_total']
  );

  /** `unread` is since 1.1: the devices not read at this tick. */
  export const sample = object(
    { t: num, d: record(sampleValues), unread: array(str) },
    ['unread']
  );

  export const settings = object(
    {
      sample_hz: nonNeg,
      cuda_peak_policy: literal('reset', 'preserve'),
      insight: bool,
      insight_budget_ms: nonNeg,
      history_limit: bytes,
      cpu_peak: literal('sampled', 'exact')
    },
    ['cpu_peak']
  );

  const layerInfo = object(
    {
      path: str,
      type: str,
      saved_bytes: bytes,
      peak_saved_bytes: bytes,
      output_shape: nullable(array(int)),
      param_bytes: bytes,
      grad_bytes: bytes,
      saved_by_dtype: record(bytes),
      peak_saved_by_dtype: record(bytes),
      checkpointed: bool
    },
    ['saved_by_dtype', 'peak_saved_by_dtype', 'checkpointed']
  );

  // Breakdown parts are derived by subtraction on the kernel side: integers, sign not enforced.
  const breakdown = object(
    {
      total_bytes: bytes,
      parameters: int,
      gradients: int,
      optimizer_state: int,
      activations: int,
      other: int,
      reserved_free: int,
      outside_pytorch: int,
      other_tensors: bytes,
      runtime_bytes: bytes,
      runtime_note: str
    },
    [
      'reserved_free',
      'outside_pytorch',
      'other_tensors',
      'runtime_bytes',
      'runtime_note'
    ]
  );

  const holder = object({
    name: str,
    kind: str,
    bytes: bytes,
    explanation: str,
    fix: str
  });

  const modelInfo = object({ name: str, type: str, param_bytes: bytes });

  const activationsMeasured = object({
    cell_id: nullable(str),
    execution_count: nullable(int),
    forward_index: int,
    reason: literal('first', 'shapes', 'dtype', 'mode', 'graph_kept')
  });

  export const insight = object(
    {
      model: nullable(str),
      models: array(modelInfo),
      layers: array(layerInfo),
      breakdown: record(breakdown),
      holders: array(holder),
      scan_ms: nonNeg,
      skipped: nullable(str),
      activations_measured: activationsMeasured,
      partial: bool,
      layers_unchanged: bool
    },
    ['activations_measured', 'partial', 'layers_unchanged']
  );

  const kernelInfo = object({
    pid: int,
    python: str,
    torch_version: nullable(str),
    cuda_available: bool,
    mps_available: bool
  });

  const ERROR_CODES: ReadonlyArray<ErrorCode> = [
    'protocol_mismatch',
    'invalid_message',
    'unknown_type',
    'unknown_method',
    'invalid_params',
    'internal'
  ];

  export const MESSAGES: { [type: string]: Check } = {
    hello: object(
      {
        protocol_version: str,
        bridge_version: str,
        session_id: str,
        kernel: kernelInfo,
        devices: array(deviceInfo),
        settings,
        cells: array(cellRecord),
        warnings: array(str),
        self_bytes: bytes,
        insight
      },
      ['self_bytes', 'insight']
    ),
    cell: object(
      { record: cellRecord, devices: array(deviceInfo), self_bytes: bytes },
      ['self_bytes']
    ),
    cells: object(
      {
        records: array(cellRecord),
        devices: array(deviceInfo),
        self_bytes: bytes
      },
      ['self_bytes']
    ),
    samples: object({ samples: array(sample), dropped: bytes }),
    devices: object({ devices: array(deviceInfo), warnings: array(str) }, [
      'warnings'
    ]),
    insight: object({ insight }),
    notice: object({ level: literal('info', 'warning'), message: str }),
    error: object({
      code: literal(...ERROR_CODES),
      message: str,
      in_reply_to: nullable(str)
    }),
    reply: object({ id: str, ok: literal(true), result: any }),
    processes,
    advice: object({ advice }),
    batch_search: object({ search: batchSearch })
  };
}

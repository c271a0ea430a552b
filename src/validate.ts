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

/** Checks a value; returns an error string, or null when the value is valid. */
export type Check = (value: unknown, path: string) => string | null;

/** Validate one message received from the kernel. */
export function validateKernelMessage(raw: unknown): KernelMessage | string {
  try {
    if (!Private.isObject(raw)) {
      return `message: expected an object, got ${Private.describe(raw)}`;
    }
    const type = raw['type'];
    if (typeof type !== 'string') {
      return `message.type: expected a string, got ${Private.describe(type)}`;
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
  return Private.advice(raw, 'advice') ?? (raw as IAdvice);
}

/** Validate an `Estimate` (since 1.1), the result of `estimate`. */
export function validateEstimate(raw: unknown): IEstimate | string {
  return Private.estimate(raw, 'estimate') ?? (raw as IEstimate);
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

/** Small combinators the message checks are built from (exported for tests and reuse). */
export namespace Checks {
  export const str: Check = (v, p) =>
    typeof v === 'string'
      ? null
      : `${p}: expected a string, got ${Private.describe(v)}`;

  export const bool: Check = (v, p) =>
    typeof v === 'boolean'
      ? null
      : `${p}: expected a boolean, got ${Private.describe(v)}`;

  /** A finite number. */
  export const num: Check = (v, p) =>
    typeof v === 'number' && Number.isFinite(v)
      ? null
      : `${p}: expected a finite number, got ${Private.describe(v)}`;

  /** A finite number >= 0. */
  export const nonNeg: Check = (v, p) =>
    num(v, p) ?? ((v as number) >= 0 ? null : `${p}: expected >= 0, got ${v}`);

  /** An integer (may be negative: deltas). */
  export const int: Check = (v, p) =>
    typeof v === 'number' && Number.isInteger(v)
      ? null
      : `${p}: expected an integer, got ${Private.describe(v)}`;

  /** A byte count: a non-negative integer. */
  export const bytes: Check = (v, p) =>
    int(v, p) ??
    ((v as number) >= 0 ? null : `${p}: expected a byte count >= 0, got ${v}`);

  export const any: Check = () => null;

  export function literal(...values: ReadonlyArray<unknown>): Check {
    return (v, p) =>
      values.includes(v)
        ? null
        : `${p}: expected one of ${values.map(x => JSON.stringify(x)).join(', ')}, got ${Private.describe(v)}`;
  }

  export function nullable(check: Check): Check {
    return (v, p) => (v === null ? null : check(v, p));
  }

  export function array(item: Check): Check {
    return (v, p) => {
      if (!Array.isArray(v)) {
        return `${p}: expected an array, got ${Private.describe(v)}`;
      }
      for (let i = 0; i < v.length; i++) {
        const e = item(v[i], `${p}[${i}]`);
        if (e) {
          return e;
        }
      }
      return null;
    };
  }

  /** An object whose every value passes `item` (e.g. `{[id: DeviceId]: DeviceDelta}`). */
  export function record(item: Check): Check {
    return (v, p) => {
      if (!Private.isObject(v)) {
        return `${p}: expected an object, got ${Private.describe(v)}`;
      }
      for (const key of Object.keys(v)) {
        const e = item(v[key], `${p}.${key}`);
        if (e) {
          return e;
        }
      }
      return null;
    };
  }

  /**
   * An object with these fields; a field listed in `optional` may be absent (or undefined).
   * Extra fields are ignored.
   */
  export function object(
    fields: { [key: string]: Check },
    optional: ReadonlyArray<string> = []
  ): Check {
    return (v, p) => {
      if (!Private.isObject(v)) {
        return `${p}: expected an object, got ${Private.describe(v)}`;
      }
      for (const key of Object.keys(fields)) {
        if (!(key in v) || v[key] === undefined) {
          if (optional.includes(key)) {
            continue;
          }
          return `${p}.${key}: missing`;
        }
        const e = fields[key](v[key], `${p}.${key}`);
        if (e) {
          return e;
        }
      }
      return null;
    };
  }
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

  export function isObject(v: unknown): v is { [key: string]: unknown } {
    return typeof v === 'object' && v !== null && !Array.isArray(v);
  }

  export function describe(v: unknown): string {
    if (v === null) {
      return 'null';
    }
    if (Array.isArray(v)) {
      return 'an array';
    }
    if (typeof v === 'number') {
      return Number.isFinite(v) ? `the number ${v}` : String(v);
    }
    if (typeof v === 'string') {
      return `the string ${JSON.stringify(v.length > 40 ? v.slice(0, 40) + '…' : v)}`;
    }
    return typeof v;
  }

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

  const deviceDelta = object({
    before_bytes: bytes,
    after_bytes: bytes,
    delta_bytes: int,
    peak_delta_bytes: bytes
  });

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

  export const sample = object({ t: num, d: record(sampleValues) });

  export const settings = object({
    sample_hz: nonNeg,
    cuda_peak_policy: literal('reset', 'preserve'),
    insight: bool,
    insight_budget_ms: nonNeg,
    history_limit: bytes
  });

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
      checkpointed: bool
    },
    ['saved_by_dtype', 'checkpointed']
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
      other_tensors: bytes
    },
    ['reserved_free', 'outside_pytorch', 'other_tensors']
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
      partial: bool
    },
    ['activations_measured', 'partial']
  );

  // ---- Optimize (since 1.1) ----
  const fraction: Check = (v, p) =>
    num(v, p) ??
    ((v as number) >= 0 && (v as number) <= 1
      ? null
      : `${p}: expected a fraction in 0..1, got ${v}`);

  const cellRef = object({
    cell_id: nullable(str),
    execution_count: nullable(int)
  });

  const predicted = object({
    activation_bytes_before: nullable(bytes),
    activation_bytes_after: nullable(bytes),
    saving_bytes: bytes,
    step_peak_saving_bytes: nullable(bytes),
    saving_fraction: nullable(fraction)
  });

  const suggestion = object({
    id: str,
    technique: str,
    title: str,
    why: array(str),
    predicted,
    cost: object({ text: str, factor: nullable(nonNeg) }),
    kind: literal('enable', 'rewrite', 'template', 'free'),
    code: str,
    undo_code: nullable(str),
    target_cell: nullable(cellRef)
  });

  const mistake = object({
    id: str,
    title: str,
    why: str,
    fix_code: nullable(str),
    cell_id: nullable(str),
    execution_count: nullable(int)
  });

  const measured = object({
    activation_bytes: bytes,
    step_peak_bytes: bytes,
    duration_s: nonNeg,
    cell_id: nullable(str),
    execution_count: nullable(int)
  });

  const outcome = object({
    suggestion_id: str,
    technique: str,
    title: str,
    predicted,
    before: nullable(measured),
    after: nullable(measured),
    miss_fraction: nullable(nonNeg),
    missed: bool
  });

  const names = ['model', 'optimizer', 'loss_fn', 'data', 'batch'];

  export const advice = object({
    model: nullable(str),
    training_cell: nullable(cellRef),
    names: object(Object.fromEntries(names.map(n => [n, nullable(str)]))),
    suggestions: array(suggestion),
    mistakes: array(mistake),
    outcomes: array(outcome),
    notes: array(str),
    finder_code: nullable(str),
    compute_ms: nonNeg
  });

  const batchSearch = object({
    search_id: str,
    state: literal('running', 'done', 'failed'),
    device: str,
    budget_bytes: bytes,
    tried: array(
      object({
        batch_size: bytes,
        peak_bytes: nullable(bytes),
        fits: bool,
        oom: bool
      })
    ),
    batch_size: nullable(bytes),
    accumulation_steps: nullable(bytes),
    target_batch: nullable(bytes),
    message: nullable(str)
  });

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

  // ---- processes (since 1.1) ----
  const processDevice = object({
    allocated: bytes,
    reserved: bytes,
    peak: bytes
  });

  const processInfo = object({
    key: str,
    pid: int,
    ppid: int,
    host: str,
    remote: bool,
    role: str,
    kind: literal('worker', 'rank', 'child'),
    index: nullable(int),
    world: nullable(int),
    cell: nullable(int),
    started: num,
    last_seen: num,
    rss: bytes,
    uss: nullable(bytes),
    pss: nullable(bytes),
    peak_rss: bytes,
    peak_uss: bytes,
    devices: record(processDevice),
    peak_devices: record(bytes),
    dropped: bytes,
    ended: nullable(num),
    exit: nullable(str),
    exit_code: nullable(int),
    signal: nullable(int),
    oom: bool
  });

  const processPoint: Check = (v, p) =>
    Array.isArray(v) && v.length === 4
      ? (num(v[0], `${p}[0]`) ??
        bytes(v[1], `${p}[1]`) ??
        nullable(bytes)(v[2], `${p}[2]`) ??
        bytes(v[3], `${p}[3]`))
      : `${p}: expected [t, rss, uss, device], got ${describe(v)}`;

  const processFinding = object({
    kind: literal('copy_on_access'),
    cell: nullable(int),
    workers: array(str),
    num_workers: bytes,
    growth_bytes: bytes,
    projected_saving_bytes: bytes,
    dataset: object({
      name: nullable(str),
      type: str,
      containers: array(
        object({ name: str, type: str, length: bytes, bytes: bytes })
      )
    }),
    message: str,
    fixes: array(str)
  });

  export const processes = object({
    time: num,
    full: bool,
    processes: array(processInfo),
    samples: record(array(processPoint)),
    findings: array(processFinding),
    stats: object({
      received: bytes,
      dropped: bytes,
      refused: bytes,
      malformed: bytes
    }),
    remote: nullable(str)
  });

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

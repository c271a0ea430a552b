/**
 * The per-cell memory summary stored in cell metadata under `vramscope`, so a reopened
 * notebook shows the last values.
 */
import { ICellRecord, IDeviceDelta } from '../protocol';
import { cellRecordCheck } from '../validate';

/** Cell metadata key. */
export const METADATA_KEY = 'vramscope';

/** The longest `error_type` kept (docs/protocol.md, "Bounds"); longer ones end in `…`. */
export const MAX_ERROR_TYPE_CHARS = 200;

/** What is kept per cell: the record without `cell_id` (the cell knows it) and `code_head`. */
export type ICellMemoryMetadata = Omit<ICellRecord, 'cell_id' | 'code_head'>;

/** The metadata value for a record. */
export function metadataFromRecord(record: ICellRecord): ICellMemoryMetadata {
  const devices: { [id: string]: IDeviceDelta } = {};
  for (const [id, d] of Object.entries(record.devices)) {
    devices[id] = {
      before_bytes: d.before_bytes,
      after_bytes: d.after_bytes,
      delta_bytes: d.delta_bytes,
      peak_delta_bytes: d.peak_delta_bytes,
      // CPU: counted op by op or sampled (one of two words: bounded)
      ...(d.peak_source ? { peak_source: d.peak_source } : {})
    };
  }
  return {
    execution_count: record.execution_count,
    start_time: record.start_time,
    duration: record.duration,
    ok: record.ok,
    error_type: Private.capped(record.error_type),
    oom: record.oom,
    devices
  };
}

/** Read stored metadata; null when absent or malformed (e.g. edited by hand). */
export function readMetadata(value: unknown): ICellMemoryMetadata | null {
  if (Private.check(value, METADATA_KEY) !== null) {
    return null;
  }
  const stored = value as ICellMemoryMetadata;
  const errorType = Private.capped(stored.error_type);
  return errorType === stored.error_type
    ? stored
    : { ...stored, error_type: errorType };
}

namespace Private {
  export const check = cellRecordCheck(['cell_id', 'code_head']);

  /**
   * `name` cut to MAX_ERROR_TYPE_CHARS code points, as the kernel counts them (a stored or
   * hand-edited one may be longer).
   */
  export function capped(name: string | null): string | null {
    if (name === null || name.length <= MAX_ERROR_TYPE_CHARS) {
      return name;
    }
    const chars = Array.from(name);
    if (chars.length <= MAX_ERROR_TYPE_CHARS) {
      return name;
    }
    return chars.slice(0, MAX_ERROR_TYPE_CHARS - 1).join('') + '…';
  }
}

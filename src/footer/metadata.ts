/**
 * The per-cell memory summary stored in cell metadata under `vramscope`, so a reopened
 * notebook shows the last values.
 */
import { ICellRecord, IDeviceDelta } from '../protocol';
import { cellRecordCheck } from '../validate';

/** Cell metadata key. */
export const METADATA_KEY = 'vramscope';

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
      peak_delta_bytes: d.peak_delta_bytes
    };
  }
  return {
    execution_count: record.execution_count,
    start_time: record.start_time,
    duration: record.duration,
    ok: record.ok,
    error_type: record.error_type,
    oom: record.oom,
    devices
  };
}

/** Read stored metadata; null when absent or malformed (e.g. edited by hand). */
export function readMetadata(value: unknown): ICellMemoryMetadata | null {
  return Private.check(value, METADATA_KEY) === null
    ? (value as ICellMemoryMetadata)
    : null;
}

namespace Private {
  export const check = cellRecordCheck(['cell_id', 'code_head']);
}

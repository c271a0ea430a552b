/**
 * Issue 21: `error_type` in cell metadata is bounded (200 code points, docs/protocol.md
 * "Bounds"), when the front end stores a record and when it reads what a notebook carries
 * (a notebook written elsewhere, or edited by hand, may hold any length).
 */
import {
  MAX_ERROR_TYPE_CHARS,
  metadataFromRecord,
  readMetadata
} from '../../src/footer/metadata';
import { ICellRecord } from '../../src/protocol';

function record(errorType: string | null): ICellRecord {
  return {
    cell_id: 'c1',
    execution_count: 3,
    start_time: 1_795_000_000,
    duration: 0.25,
    ok: errorType === null,
    error_type: errorType,
    oom: false,
    code_head: 'boom()',
    devices: {
      cpu: {
        before_bytes: 1024,
        after_bytes: 2048,
        delta_bytes: 1024,
        peak_delta_bytes: 4096
      }
    }
  };
}

const HUGE = 'E'.repeat(100_000);
const CUT = 'E'.repeat(MAX_ERROR_TYPE_CHARS - 1) + '…';

describe('error_type in cell metadata', () => {
  it('is stored cut to 200 characters', () => {
    expect(MAX_ERROR_TYPE_CHARS).toBe(200);
    expect(metadataFromRecord(record(HUGE)).error_type).toBe(CUT);
    expect(metadataFromRecord(record('ValueError')).error_type).toBe(
      'ValueError'
    );
    const exact = 'F'.repeat(200);
    expect(metadataFromRecord(record(exact)).error_type).toBe(exact);
  });

  it('is read cut too, the rest of the stored value kept', () => {
    const stored = { ...metadataFromRecord(record(null)), error_type: HUGE };
    const read = readMetadata(JSON.parse(JSON.stringify(stored)))!;
    expect(read.error_type).toBe(CUT);
    expect(read.devices).toEqual(stored.devices);
    expect(read.execution_count).toBe(3);
  });

  it('counts code points as the kernel does (a non-BMP letter is one)', () => {
    const wide = '𝔈'.repeat(300); // 2 UTF-16 units each
    const cut = metadataFromRecord(record(wide)).error_type!;
    expect(Array.from(cut)).toHaveLength(200);
    expect(cut).toBe('𝔈'.repeat(199) + '…');
    const fits = '𝔈'.repeat(150); // 300 units, 150 code points: kept whole
    expect(metadataFromRecord(record(fits)).error_type).toBe(fits);
  });
});

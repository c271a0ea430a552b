/**
 * `CellHistory`: the cell records of one session, each with the epoch (kernel process) it ran
 * in, without duplicates (a record comes live and again in the next `hello`), oldest dropped
 * past a cap.
 */
import type { ICellRecord } from '../protocol';
import type { ICellEntry } from '../tokens';

/** The key that identifies one execution: cell_id + execution_count + start_time. */
export function cellKey(r: ICellRecord): string {
  return `${r.cell_id ?? ''}|${r.execution_count ?? ''}|${r.start_time}`;
}

export class CellHistory {
  constructor(maxCells: number) {
    this._maxCells = maxCells;
  }

  get entries(): ReadonlyArray<ICellEntry> {
    return this._cells;
  }

  /** Add a record unless already known; returns the new entry (null: known). */
  add(record: ICellRecord, epoch: number): ICellEntry | null {
    const key = cellKey(record);
    if (this._keys.has(key)) {
      return null;
    }
    this._keys.add(key);
    const entry: ICellEntry = { record, epoch };
    this._cells.push(entry);
    if (this._cells.length > this._maxCells) {
      const removed = this._cells.splice(
        0,
        this._cells.length - this._maxCells
      );
      for (const r of removed) {
        this._keys.delete(cellKey(r.record));
      }
    }
    return entry;
  }

  /** Order by epoch (restart order), then kernel start time (stable). */
  sort(): void {
    this._cells.sort(
      (a, b) => a.epoch - b.epoch || a.record.start_time - b.record.start_time
    );
  }

  clear(): void {
    this._cells = [];
    this._keys.clear();
  }

  private _maxCells: number;
  private _cells: ICellEntry[] = [];
  private _keys = new Set<string>();
}

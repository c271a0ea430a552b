/**
 * The figures of the panel's answer line, no DOM: each device's memory now and its peak over
 * the session (samples and cell records), and the busiest device, the one the line shows.
 */
import type { IDeviceInfo, ISample } from '../protocol';
import type { ICellEntry, IMemorySession, IRingBuffer } from '../tokens';

/** One device at a glance. */
export interface IGlance {
  id: string;
  kind: IDeviceInfo['kind'];
  /** In use now (the newest sample, else the device report). */
  now: number;
  /** The highest use seen this session (at least `now`). */
  peak: number;
  total: number | null;
}

/**
 * The device a newcomer cares about: the accelerator with the highest peak once one holds
 * memory, else the one with the highest peak (the CPU on a machine without one).
 */
export function busiest(glances: ReadonlyArray<IGlance>): IGlance | null {
  const byPeak = (a: IGlance, b: IGlance) =>
    b.peak - a.peak || a.id.localeCompare(b.id);
  const accelerators = glances
    .filter(g => g.kind !== 'cpu' && g.peak > 0)
    .sort(byPeak);
  if (accelerators.length) {
    return accelerators[0];
  }
  return [...glances].sort(byPeak)[0] ?? null;
}

/**
 * Peaks per device, kept up to date incrementally: each call reads only the samples and the
 * cells that came since the last one (a cleared history or a new session starts over).
 */
export class DevicePeaks {
  /** The glance of every device of `session` now. */
  read(session: IMemorySession): IGlance[] {
    if (session !== this._session || session.cells.length < this._cellsSeen) {
      this._reset(session); // another session, or its history was cleared
    }
    this._readSamples(session.samples);
    this._readCells(session.cells);
    const newest = session.samples.length
      ? session.samples.get(session.samples.length - 1)
      : undefined;
    return session.devices.map(device => {
      const now = newest?.d[device.id]?.used ?? device.used_bytes;
      const peak = Math.max(now, this._peaks.get(device.id) ?? 0);
      return {
        id: device.id,
        kind: device.kind,
        now,
        peak,
        total: device.total_bytes
      };
    });
  }

  private _reset(session: IMemorySession | null): void {
    this._session = session;
    this._peaks.clear();
    this._samplesSeen = 0;
    this._cellsSeen = 0;
  }

  private _raise(id: string, bytes: number | undefined): void {
    if (typeof bytes === 'number' && bytes > (this._peaks.get(id) ?? 0)) {
      this._peaks.set(id, bytes);
    }
  }

  private _readSamples(samples: IRingBuffer<ISample>): void {
    const n = Math.min(
      Math.max(0, samples.pushed - this._samplesSeen),
      samples.length
    );
    for (let i = samples.length - n; i < samples.length; i++) {
      const sample = samples.get(i);
      for (const id in sample.d) {
        const v = sample.d[id];
        this._raise(id, Math.max(v.used, v.peak ?? 0));
      }
    }
    this._samplesSeen = samples.pushed;
  }

  private _readCells(cells: ReadonlyArray<ICellEntry>): void {
    for (let i = this._cellsSeen; i < cells.length; i++) {
      const devices = cells[i].record.devices;
      for (const id in devices) {
        const d = devices[id];
        this._raise(id, d.before_bytes + Math.max(0, d.peak_delta_bytes));
      }
    }
    this._cellsSeen = cells.length;
  }

  private _session: IMemorySession | null = null;
  private _peaks = new Map<string, number>();
  private _samplesSeen = 0;
  private _cellsSeen = 0;
}

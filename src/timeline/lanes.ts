/**
 * The timeline's process lanes (issue 13): one small lane per child process or rank of the
 * notebook's kernel, under the plot and on its time axis; a cell's ended DataLoader workers
 * share one lane, as they share one row of the Processes section (./processes/fold.ts). This model mirrors the session's
 * processes model (src/processes/, shared with the Processes section) into min/max series per
 * lane, fed incrementally from each `processes` message, and builds the visible window of every
 * lane downsampled per lane, so the cost of an update does not grow with the history kept.
 * No DOM.
 */
import { IDisposable } from '@lumino/disposable';
import { ISignal, Signal } from '@lumino/signaling';

import {
  compareProcesses,
  LANE_LIMIT,
  type ISamplesApplied,
  type ProcessesModel
} from '../processes/model';
import { foldProcesses } from '../processes/fold';
import { acquireProcesses, releaseProcesses } from '../processes/shared';
import type { IProcessInfo, ProcessPoint } from '../protocol';
import type { IMemorySession } from '../tokens';
import { IPoints, MinMaxSeries } from './downsample';
import type { DeviceKind } from './series';

/**
 * Points kept per lane, as the Processes section keeps (5 minutes at 10 Hz, 25 at the default
 * 2 Hz); older ones are dropped in whole blocks. 64 lanes hold ~12 MiB.
 */
export const LANE_KEEP = LANE_LIMIT;

/** What a lane draws: USS with RSS muted (CPU), or the allocator's device bytes. */
export type LaneMeasure = 'host' | 'device';

/** One lane of the visible window. */
export interface ILane {
  /** The process key, or `ended-workers:<cell>` for a cell's ended workers folded. */
  key: string;
  /** "DataLoader worker 0", "rank 1", "child pid 1234", "6 ended workers of cell [3]". */
  role: string;
  /** How it ended once it did ("exit code 0"; a fold's "5 exit code 0, 1 killed"), else null. */
  exit: string | null;
  oom: boolean;
  /** The lane's line: USS where read (else RSS) for `host`, device bytes for `device`. */
  main: IPoints;
  /** RSS, drawn muted under USS (`host` only). */
  muted: IPoints | null;
  /** The line's newest value (NaN: none). */
  now: number;
  /** The largest value drawn in the window (0: none). */
  peak: number;
}

/** Every lane of the visible window, on one scale (lanes compare: a rank's imbalance shows). */
export interface ILanesFigure {
  measure: LaneMeasure;
  lanes: ILane[];
  /** The top of every lane's scale, bytes. */
  max: number;
}

export class ProcessLanes implements IDisposable {
  /** Emitted when a lane, a process or its state changed. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** Bumped at every change: a view redraws only when it moved. */
  get version(): number {
    return this._version;
  }

  /** Known processes (running and ended). */
  get count(): number {
    return this._model?.processes.length ?? 0;
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  /** Follow a session's processes (shared model); null stops. */
  setSession(session: IMemorySession | null): void {
    if (session === (this._model?.session ?? null)) {
      return;
    }
    this._release();
    this._series.clear();
    if (session) {
      const model = acquireProcesses(session);
      this._model = model;
      model.samplesApplied.connect(this._onSamples, this);
      model.changed.connect(this._onChanged, this);
      for (const proc of model.processes) {
        this._append(proc.key, model.lane(proc.key));
      }
    }
    this._onChanged();
  }

  /**
   * The lanes over `[t0, t1]` (kernel seconds); `kind` is the timeline's device: CPU lanes
   * show host memory, an accelerator's the processes' device bytes. Lanes `drawn[0]` to
   * `drawn[1]` (excluded; the ones in sight) get their points, downsampled to about `buckets`
   * min/max buckets; every lane gets its peak in the window (the shared scale) and its newest
   * value, from the series' block aggregates (no pass over the points).
   */
  build(
    t0: number,
    t1: number,
    buckets: number,
    kind: DeviceKind,
    drawn: [number, number] = [0, Infinity]
  ): ILanesFigure {
    const measure: LaneMeasure = kind === 'cpu' ? 'host' : 'device';
    const lanes: ILane[] = [];
    let max = 0;
    // a cell's ended workers fold into one lane, as into one row of the Processes section
    for (const row of foldProcesses(this._order)) {
      const members = row.processes
        .map(p => this._series.get(p.key))
        .filter((s): s is Private.LaneSeries => !!s);
      if (!members.length) {
        continue;
      }
      const draw = lanes.length >= drawn[0] && lanes.length < drawn[1];
      const lane = Private.lane(members, measure, draw, t0, t1, buckets);
      max = Math.max(max, lane.peak);
      lanes.push({
        key: row.key,
        role: row.role,
        exit: !row.ended
          ? null
          : row.processes.length > 1
            ? row.state // "5 exit code 0, 1 killed by SIGKILL"
            : (row.processes[0].exit ?? 'ended'),
        oom: row.oom,
        ...lane
      });
    }
    return { measure, lanes, max };
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    this._release();
    this._series.clear();
    Signal.clearData(this);
  }

  private _release(): void {
    const model = this._model;
    if (model) {
      model.samplesApplied.disconnect(this._onSamples, this);
      model.changed.disconnect(this._onChanged, this);
      releaseProcesses(model);
      this._model = null;
    }
  }

  private _onSamples(_: ProcessesModel, applied: ISamplesApplied): void {
    if (applied.full) {
      this._series.clear();
    }
    for (const [key, points] of Object.entries(applied.samples)) {
      this._append(key, points);
    }
  }

  private _onChanged(): void {
    // newest cell first, then ranks, workers, others by index: a lane keeps its place when
    // its process ends (the Processes section lists running ones first)
    this._order = [...(this._model?.processes ?? [])].sort(compareProcesses);
    const known = new Set<string>(this._order.map(p => p.key));
    for (const key of [...this._series.keys()]) {
      if (!known.has(key)) {
        this._series.delete(key);
      }
    }
    this._version++;
    this._changed.emit();
  }

  private _append(key: string, points: ReadonlyArray<ProcessPoint>): void {
    let series = this._series.get(key);
    if (!series) {
      series = new Private.LaneSeries();
      this._series.set(key, series);
    }
    series.append(points);
  }

  private _model: ProcessesModel | null = null;
  private _series = new Map<string, Private.LaneSeries>();
  private _order: IProcessInfo[] = [];
  private _version = 0;
  private _changed = new Signal<this, void>(this);
  private _disposed = false;
}

namespace Private {
  /** One process's lane: RSS, USS (where read) and device bytes over time. */
  export class LaneSeries {
    readonly rss = new MinMaxSeries(256);
    readonly uss = new MinMaxSeries(256);
    readonly dev = new MinMaxSeries(256);

    append(points: ReadonlyArray<ProcessPoint>): void {
      for (const [t, rss, uss, dev] of points) {
        if (!(t >= this._last)) {
          continue; // out of order: the series must stay sorted
        }
        this._last = t;
        this.rss.push(t, rss);
        this.dev.push(t, dev);
        if (uss !== null) {
          this.uss.push(t, uss); // read now and then: its own, sparser series
        }
      }
      for (const s of [this.rss, this.uss, this.dev]) {
        if (s.length > LANE_KEEP + 512) {
          s.dropToLength(LANE_KEEP);
        }
      }
    }

    /** The newest sample's time (-Infinity: none). */
    get last(): number {
      return this._last;
    }

    private _last = -Infinity;
  }

  /**
   * The drawn part of a lane over `[t0, t1]` from its processes' series (one, or a fold's):
   * each member's line downsampled (when `draw`), a fold's one after another with a gap
   * between them; the peak is the most any member held in the window, `now` the newest
   * member's last value.
   */
  export function lane(
    members: LaneSeries[],
    measure: LaneMeasure,
    draw: boolean,
    t0: number,
    t1: number,
    buckets: number
  ): Pick<ILane, 'main' | 'muted' | 'now' | 'peak'> {
    const mains: IPoints[] = [];
    const muteds: IPoints[] = [];
    let peak = 0;
    let now = NaN;
    let newest = -Infinity;
    let anyUss = false;
    for (const series of members) {
      const hasUss = measure === 'host' && series.uss.length > 0;
      anyUss = anyUss || hasUss;
      const line =
        measure === 'device' ? series.dev : hasUss ? series.uss : series.rss;
      if (draw) {
        mains.push(line.downsample(t0, t1, buckets, true));
        if (hasUss) {
          muteds.push(series.rss.downsample(t0, t1, buckets, true));
        }
      }
      peak = Math.max(
        peak,
        maxIn(line, t0, t1),
        hasUss ? maxIn(series.rss, t0, t1) : 0
      );
      if (series.last >= newest) {
        newest = series.last;
        now = line.lastValue;
      }
    }
    return {
      main: draw ? joined(mains) : NOTHING,
      muted: !anyUss ? null : draw ? joined(muteds) : NOTHING,
      now,
      peak
    };
  }

  /** Lines one after another, a NaN gap between two (one line: itself). */
  export function joined(parts: IPoints[]): IPoints {
    if (parts.length === 1) {
      return parts[0];
    }
    const n = parts.reduce((sum, p) => sum + p.t.length + 1, 0);
    const out = { t: new Float64Array(n), v: new Float64Array(n) };
    let i = 0;
    for (const p of parts) {
      out.t.set(p.t, i);
      out.v.set(p.v, i);
      i += p.t.length;
      out.t[i] = i > 0 ? out.t[i - 1] : 0;
      out.v[i++] = NaN; // a gap: the next member's line starts afresh
    }
    return out;
  }

  export const NOTHING: IPoints = {
    t: new Float64Array(0),
    v: new Float64Array(0)
  };

  /** The largest value of `s` inside `[t0, t1]` (one bucket: its min and max). */
  export function maxIn(s: MinMaxSeries, t0: number, t1: number): number {
    const p = s.downsample(t0, t1, 1);
    let m = 0;
    for (let i = 0; i < p.v.length; i++) {
      if (p.v[i] > m) {
        m = p.v[i];
      }
    }
    return m;
  }
}

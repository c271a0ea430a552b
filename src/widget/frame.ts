/**
 * What the inline widget draws, computed from a session without any DOM: the device's
 * in-use line over the last `window` seconds (peak-preserving min/max downsampling), the cell
 * bands that fall in that window (the running cell's band included) and the newest point.
 * Built from the panel timeline's own series, bands and downsampling (src/timeline/).
 */
import type { IMemorySession } from '../tokens';
import { axisUnit } from '../timeline/bytes';
import {
  ICellBand,
  cellBands,
  runningBand,
  TimelineSeries
} from '../timeline/series';

export interface IFrameLine {
  label: string;
  role: 'primary' | 'secondary';
  /** Kernel times (UNIX seconds). */
  t: Float64Array;
  /** Bytes (NaN: a gap). */
  v: Float64Array;
}

export interface IFrame {
  device: string;
  /** The window shown, kernel times. */
  t0: number;
  t1: number;
  /** Top of the y axis, bytes (a little above the window's largest value). */
  yMax: number;
  unit: { unit: string; scale: number };
  lines: IFrameLine[];
  bands: ICellBand[];
  /** The newest sample of the device: its time and in-use bytes. */
  newest: { t: number; bytes: number } | null;
}

/** The device a widget follows: `wanted` when it has samples, else the first accelerator. */
export function chooseDevice(
  series: TimelineSeries,
  wanted: string
): string | null {
  const ids = series.devices.filter(d => d.length > 0).map(d => d.id);
  if (wanted && ids.includes(wanted)) {
    return wanted;
  }
  return ids.find(id => id !== 'cpu') ?? ids[0] ?? null;
}

/**
 * The frame for `session` (whose samples `series` mirrors, synced by the caller), or null
 * when the device has no samples yet. `buckets`: how many min/max buckets (about the chart's
 * width in pixels).
 */
export function computeFrame(
  session: IMemorySession,
  series: TimelineSeries,
  options: { device: string; window: number; buckets: number }
): IFrame | null {
  const device = chooseDevice(series, options.device);
  const data = device ? series.device(device) : undefined;
  if (!device || !data || data.length === 0) {
    return null;
  }
  const t1 = data.lastTime;
  const t0 = t1 - Math.max(1, options.window);
  const lines: IFrameLine[] = [];
  for (const { trace, points } of data.downsample(t0, t1, options.buckets)) {
    const role = trace.spec.role;
    if (role === 'primary' || role === 'secondary') {
      lines.push({ label: trace.spec.label, role, t: points.t, v: points.v });
    }
  }
  const primary = data.traces[0].data;
  const last = primary.lastValue;
  const newest = last === last ? { t: primary.lastTime, bytes: last } : null;
  // the drawn lines' largest value (min/max downsampling keeps it exactly)
  let top = 1;
  for (const line of lines) {
    for (let i = 0; i < line.v.length; i++) {
      if (line.v[i] > top) {
        top = line.v[i];
      }
    }
  }
  const bands = cellBands(session.cells, device).filter(
    b => b.end >= t0 && b.start <= t1
  );
  if (session.runningCell && session.runningCell.start <= t1) {
    bands.push(runningBand(session.runningCell, t1, session.epoch));
  }
  return {
    device,
    t0,
    t1,
    yMax: top * 1.1,
    unit: axisUnit(top),
    lines,
    bands,
    newest
  };
}

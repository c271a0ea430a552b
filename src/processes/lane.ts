/**
 * A process's lane: RSS (muted) and, where read, USS (private memory: what copy-on-access
 * grows) over time, drawn on a small canvas as one min/max pair per pixel column, so every
 * peak stays visible and the cost is one pass over the points whatever their number.
 */
import type { ProcessPoint } from '../protocol';

/**
 * The time span and the value scales shared by every lane (lanes compare): RSS up to `max`,
 * USS up to `maxUss` (its own scale, so a worker's private growth shows whatever its RSS).
 */
export interface ILaneRange {
  t0: number;
  t1: number;
  max: number;
  maxUss: number;
}

/** Min and max of `points[i][column]` per pixel column (NaN where a column has none). */
export function laneColumns(
  points: ReadonlyArray<ProcessPoint>,
  range: ILaneRange,
  width: number,
  column: 1 | 2
): { lo: Float64Array; hi: Float64Array } {
  const lo = new Float64Array(width).fill(NaN);
  const hi = new Float64Array(width).fill(NaN);
  const scale = width / (range.t1 - range.t0 || 1);
  for (const p of points) {
    const v = p[column];
    if (v === null) {
      continue;
    }
    const x = Math.min(
      width - 1,
      Math.max(0, Math.floor((p[0] - range.t0) * scale))
    );
    if (!(v >= lo[x])) {
      lo[x] = v;
    }
    if (!(v <= hi[x])) {
      hi[x] = v;
    }
  }
  return { lo, hi };
}

/** The two lines' colours: RSS and USS. */
export interface ILaneColors {
  rss: string;
  uss: string;
}

/** The lane colours of the theme, read once per render from `node`'s computed style. */
export function laneColors(node: Element): ILaneColors {
  const style = getComputedStyle(node);
  return {
    rss: style.getPropertyValue('--jp-ui-font-color3').trim() || '#999',
    uss: style.getPropertyValue('--jp-brand-color1').trim() || '#1976d2'
  };
}

/**
 * Draw a lane on `canvas` (CSS size `width` x `height`). Sets `data-columns` (pixel columns
 * with an RSS value) and `data-peak` (the highest RSS drawn) for tests.
 */
export function drawLane(
  canvas: HTMLCanvasElement,
  points: ReadonlyArray<ProcessPoint>,
  range: ILaneRange,
  width: number,
  height: number,
  colors: ILaneColors
): void {
  const ratio = window.devicePixelRatio || 1;
  const w = Math.max(1, Math.round(width * ratio));
  const h = Math.max(1, Math.round(height * ratio));
  if (canvas.width !== w || canvas.height !== h) {
    canvas.width = w;
    canvas.height = h;
  }
  const ctx = canvas.getContext('2d');
  ctx?.clearRect(0, 0, w, h);
  for (const column of [1, 2] as const) {
    const max = (column === 1 ? range.max : range.maxUss) || 1;
    const y = (v: number) => h - 0.5 - (v / max) * (h - 1);
    const { lo, hi } = laneColumns(points, range, w, column);
    if (column === 1) {
      let columns = 0;
      let peak = 0;
      for (let x = 0; x < w; x++) {
        if (hi[x] === hi[x]) {
          columns++;
          peak = Math.max(peak, hi[x]);
        }
      }
      canvas.dataset.columns = String(columns);
      canvas.dataset.peak = String(peak);
    }
    if (!ctx) {
      continue;
    }
    ctx.strokeStyle = column === 1 ? colors.rss : colors.uss;
    ctx.lineWidth = ratio;
    ctx.beginPath();
    let started = false;
    for (let x = 0; x < w; x++) {
      if (hi[x] !== hi[x]) {
        continue; // NaN: nothing in this column
      }
      if (started) {
        ctx.lineTo(x + 0.5, y(lo[x]));
      } else {
        ctx.moveTo(x + 0.5, y(lo[x]));
        started = true;
      }
      ctx.lineTo(x + 0.5, y(hi[x]));
    }
    ctx.stroke();
  }
}

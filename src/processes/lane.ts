/**
 * A process's lane: its RSS over time as a small inline SVG line, downsampled to one min/max
 * pair per bucket so every peak stays visible whatever the number of points.
 */
import type { ProcessPoint } from '../protocol';

const SVG = 'http://www.w3.org/2000/svg';

/** Min/max per bucket of `buckets` over the points' time span: [t, value] pairs in order. */
export function downsampleLane(
  points: ReadonlyArray<ProcessPoint>,
  buckets: number
): Array<[number, number]> {
  if (points.length <= buckets * 2) {
    return points.map(p => [p[0], p[1]]);
  }
  const t0 = points[0][0];
  const span = points[points.length - 1][0] - t0 || 1;
  const out: Array<[number, number]> = [];
  let bucket = -1;
  let lo: ProcessPoint | null = null;
  let hi: ProcessPoint | null = null;
  const flush = () => {
    if (lo && hi) {
      const pair = lo[0] <= hi[0] ? [lo, hi] : [hi, lo];
      out.push([pair[0][0], pair[0][1]]);
      if (pair[1] !== pair[0]) {
        out.push([pair[1][0], pair[1][1]]);
      }
    }
  };
  for (const p of points) {
    const b = Math.min(buckets - 1, Math.floor(((p[0] - t0) / span) * buckets));
    if (b !== bucket) {
      flush();
      bucket = b;
      lo = hi = p;
    } else {
      if (p[1] < lo![1]) {
        lo = p;
      }
      if (p[1] > hi![1]) {
        hi = p;
      }
    }
  }
  flush();
  return out;
}

/** An SVG line of `points` scaled to `max` (shared by every lane, so lanes compare). */
export function laneSvg(
  points: ReadonlyArray<ProcessPoint>,
  range: { t0: number; t1: number; max: number },
  width = 120,
  height = 16
): SVGSVGElement {
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('class', 'vramscope-Processes-lane');
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.setAttribute('preserveAspectRatio', 'none');
  const pairs = downsampleLane(points, Math.floor(width / 2));
  if (pairs.length) {
    const span = range.t1 - range.t0 || 1;
    const max = range.max || 1;
    const coords = pairs.map(([t, v]) => {
      const x = ((t - range.t0) / span) * width;
      const y = height - (v / max) * (height - 1);
      return `${x.toFixed(1)},${y.toFixed(1)}`;
    });
    const line = document.createElementNS(SVG, 'polyline');
    line.setAttribute('points', coords.join(' '));
    svg.appendChild(line);
  }
  return svg;
}

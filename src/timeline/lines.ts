/**
 * The timeline's memory lines, drawn on a canvas over plotly's plot area.
 *
 * Plotly draws the axes, the cell bands (with their hover and click) and the restart markers;
 * the lines themselves are drawn here. A live update that only adds samples then redraws a
 * canvas (well under a millisecond for a few thousand points) instead of making plotly rebuild
 * the whole figure, which costs 10-20 ms per update on a small machine whatever the points.
 * Plotly replots only when its own part changes (the window moved by a pixel, a new cell band,
 * a new y scale).
 */

/** One drawn line: points in plot units (x: local ms as on the plotly axis; y: axis unit). */
export interface ILine {
  label: string;
  color: string;
  width: number;
  dash: 'solid' | 'dot' | 'dash';
  x: Float64Array;
  y: Float64Array;
}

/** The plot area the lines are drawn in, in CSS px, and the axis ranges it shows. */
export interface IArea {
  left: number;
  top: number;
  width: number;
  height: number;
  x0: number;
  x1: number;
  y0: number;
  y1: number;
}

/** Size and place the canvas over the plot area, then draw the lines (clipped to it). */
export function drawLines(
  canvas: HTMLCanvasElement,
  lines: ReadonlyArray<ILine>,
  area: IArea
): void {
  const ratio = window.devicePixelRatio || 1;
  const w = Math.max(1, Math.round(area.width));
  const h = Math.max(1, Math.round(area.height));
  canvas.style.left = `${area.left}px`;
  canvas.style.top = `${area.top}px`;
  canvas.style.width = `${w}px`;
  canvas.style.height = `${h}px`;
  const pw = Math.round(w * ratio);
  const ph = Math.round(h * ratio);
  if (canvas.width !== pw || canvas.height !== ph) {
    canvas.width = pw;
    canvas.height = ph;
  }
  const ctx = canvas.getContext('2d');
  if (!ctx) {
    return;
  }
  ctx.setTransform(pw / w, 0, 0, ph / h, 0, 0);
  ctx.clearRect(0, 0, w, h);
  const sx = w / (area.x1 - area.x0 || 1);
  const sy = h / (area.y1 - area.y0 || 1);
  ctx.lineJoin = 'round';
  for (const line of lines) {
    ctx.beginPath();
    ctx.strokeStyle = line.color;
    ctx.lineWidth = line.width;
    ctx.setLineDash(
      line.dash === 'dot' ? [2, 3] : line.dash === 'dash' ? [6, 4] : []
    );
    let pen = false;
    for (let i = 0; i < line.x.length; i++) {
      const v = line.y[i];
      if (v !== v) {
        pen = false; // NaN: a gap (restart, device missing)
        continue;
      }
      const px = (line.x[i] - area.x0) * sx;
      const py = h - (v - area.y0) * sy;
      if (pen) {
        ctx.lineTo(px, py);
      } else {
        ctx.moveTo(px, py);
        pen = true;
      }
    }
    ctx.stroke();
  }
}

/** Index of the point of `x` (sorted) nearest to `at`, or -1 when empty. */
export function nearestIndex(x: ArrayLike<number>, at: number): number {
  let lo = 0;
  let hi = x.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (x[mid] < at) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo === x.length) {
    return x.length - 1;
  }
  if (lo > 0 && at - x[lo - 1] <= x[lo] - at) {
    return lo - 1;
  }
  return lo;
}

/** The values of every line at the drawn point nearest to `at` (NaN where there is a gap). */
export function valuesAt(
  lines: ReadonlyArray<ILine>,
  at: number
): { label: string; color: string; x: number; y: number }[] {
  const out: { label: string; color: string; x: number; y: number }[] = [];
  for (const line of lines) {
    const i = nearestIndex(line.x, at);
    if (i >= 0) {
      out.push({
        label: line.label,
        color: line.color,
        x: line.x[i],
        y: line.y[i]
      });
    }
  }
  return out;
}

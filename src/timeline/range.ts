/**
 * The timeline's visible window (kernel seconds), chosen so that live updates rarely move it:
 * plotly replots only when the window (or the y scale) changes.
 */
import { FOLLOW_STEP_PX, MARGIN_X, niceCeil } from './figure';

export interface IRangeInput {
  /** The oldest and newest sample over all devices (NaN: none). */
  span: [number, number];
  /** The shown device's oldest and newest sample. */
  deviceSpan: [number, number];
  follow: boolean;
  /** The range the user zoomed or panned to (used when not following). */
  userRange: [number, number] | null;
  /** The followed window in seconds (Infinity: the whole history). */
  windowSeconds: number;
  /** The plot's width in px. */
  width: number;
}

/**
 * Until the data fills the followed window: the data from its first sample, with room to grow
 * in round steps (the end moves at ~20% growth, so plotly rarely replots); null once full.
 */
export function fittedRange(
  t0: number,
  t1: number,
  windowSeconds: number
): [number, number] | null {
  if (!(t1 >= t0) || t1 - t0 >= windowSeconds) {
    return null;
  }
  const span = Math.min(windowSeconds, niceCeil(Math.max(1, (t1 - t0) * 1.1)));
  return [t0, t0 + span];
}

/**
 * The visible window. A followed window fits the data (`fittedRange`) until it is full. While following, its end moves in steps of a few pixels' worth of time
 * (always at or just after the latest sample), so that samples arriving within the same step
 * leave the window, the axes and the buckets unchanged.
 */
export function visibleRange(input: IRangeInput): [number, number] {
  const [first, last] = input.span;
  const t1 = isNaN(last) ? input.deviceSpan[1] : last;
  const t0 = isNaN(first) ? input.deviceSpan[0] : first;
  if (!input.follow && input.userRange) {
    return input.userRange;
  }
  const px = Math.max(100, input.width - MARGIN_X);
  const windowSeconds = input.windowSeconds;
  if (input.follow && isFinite(windowSeconds)) {
    const fitted = fittedRange(t0, t1, windowSeconds);
    if (fitted) {
      return fitted;
    }
    // 4 px at a time: the axes (a plotly replot) move ~4x less often than the samples come
    const step = (FOLLOW_STEP_PX * windowSeconds) / px;
    const end = Math.ceil(t1 / step) * step;
    return [end - windowSeconds, end];
  }
  if (!(t1 > t0)) {
    return [t0 - 1, t1 + 1];
  }
  // the whole history: a power-of-two step at least one pixel, stable while the span grows
  const step = Math.pow(2, Math.ceil(Math.log2((t1 - t0) / px)));
  return [t0, t0 + Math.max(step, Math.ceil((t1 - t0) / step) * step)];
}

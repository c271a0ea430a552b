/**
 * The timeline's x axis: kernel seconds to plot units (local wall-clock ms on a linear axis,
 * see ./ticks.ts) and back.
 */

/** The local time zone's offset from UTC at kernel time `t`, in ms (Date's sign). */
export function tzOffsetMs(t: number): number {
  return new Date(t * 1000).getTimezoneOffset() * 60000;
}

/**
 * Plotly shows date axes in UTC; shift kernel seconds so the axis reads local wall-clock
 * time.
 */
export function toX(t: number): number {
  return t * 1000 - tzOffsetMs(t);
}

/** Inverse of `toX`; accepts plotly's range values (numbers or date strings). */
export function fromX(x: unknown): number {
  let ms: number;
  if (typeof x === 'number') {
    ms = x;
  } else if (typeof x === 'string') {
    const s = x.trim().replace(' ', 'T');
    ms = Date.parse(s.includes('T') ? `${s}Z` : `${s}T00:00:00Z`);
  } else {
    return NaN;
  }
  const approx = ms / 1000;
  return (ms + tzOffsetMs(approx)) / 1000;
}

/**
 * `toX` for one figure: a constant offset when the window has one (no `Date` per point),
 * per point across a daylight-saving change.
 */
export function xConverter(r0: number, r1: number): (t: number) => number {
  const offset = tzOffsetMs(r0);
  if (offset !== tzOffsetMs(r1)) {
    return toX;
  }
  return (t: number) => t * 1000 - offset;
}

/**
 * What a `plotly_relayout` event did to the x axis: the new range in kernel seconds, a reset
 * to autorange (double-click), or null (nothing on the x axis).
 */
export function relayoutChange(
  e: Record<string, unknown> | null | undefined
): [number, number] | 'autorange' | null {
  if (!e) {
    return null;
  }
  let a = e['xaxis.range[0]'];
  let b = e['xaxis.range[1]'];
  const both = e['xaxis.range'];
  if (Array.isArray(both)) {
    [a, b] = both;
  }
  if (a !== undefined && b !== undefined) {
    const t0 = fromX(a);
    const t1 = fromX(b);
    return isFinite(t0) && isFinite(t1) && t1 > t0 ? [t0, t1] : null;
  }
  return e['xaxis.autorange'] ? 'autorange' : null;
}

/**
 * Clock-time ticks for the timeline's x axis.
 *
 * The plot uses a plain linear axis in "local milliseconds" (`toX`: epoch ms shifted by the
 * time-zone offset) with these ticks, not plotly's date axis: a date axis parses every x value
 * through a string on each redraw, which is most of a live update's cost with thousands of
 * points. Ticks fall on round local clock times (every 10 s, 1 min, 1 h, ...).
 */

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** Candidate tick steps, in ms. */
const STEPS = [
  1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600,
  43200, 86400, 172800, 604800
].map(s => s * SECOND);

const MONTHS = [
  'Jan',
  'Feb',
  'Mar',
  'Apr',
  'May',
  'Jun',
  'Jul',
  'Aug',
  'Sep',
  'Oct',
  'Nov',
  'Dec'
];

export interface ITimeTicks {
  /** Tick positions (local ms, the axis' own values). */
  tickvals: number[];
  /** Their labels: `HH:MM` or `HH:MM:SS`, with the date under the first tick of each day. */
  ticktext: string[];
  /** The step between ticks, in ms. */
  step: number;
}

/** The smallest round step giving at most `maxTicks` ticks over `span` ms. */
export function tickStep(span: number, maxTicks: number): number {
  const want = span / Math.max(1, maxTicks);
  for (const step of STEPS) {
    if (step >= want) {
      return step;
    }
  }
  const weeks = Math.ceil(want / STEPS[STEPS.length - 1]);
  return weeks * STEPS[STEPS.length - 1];
}

/**
 * Ticks between `x0` and `x1` (local ms) for a plot `widthPx` wide (about one tick per 90 px).
 */
export function timeTicks(x0: number, x1: number, widthPx: number): ITimeTicks {
  if (!(x1 > x0) || !isFinite(x0) || !isFinite(x1)) {
    return { tickvals: [], ticktext: [], step: 0 };
  }
  const maxTicks = Math.max(2, Math.floor(widthPx / 90));
  const step = tickStep(x1 - x0, maxTicks);
  const tickvals: number[] = [];
  const ticktext: string[] = [];
  let lastDay = NaN;
  for (let x = Math.ceil(x0 / step) * step; x <= x1; x += step) {
    const day = Math.floor(x / DAY);
    const withDate = day !== lastDay;
    lastDay = day;
    tickvals.push(x);
    ticktext.push(formatTick(x, step, withDate));
  }
  return { tickvals, ticktext, step };
}

/** One tick label; the date goes on a second line where the day changes (or for steps >= 1 day). */
export function formatTick(x: number, step: number, withDate: boolean): string {
  const d = new Date(x); // local ms: read with the UTC getters
  const two = (n: number) => String(n).padStart(2, '0');
  const date = `${MONTHS[d.getUTCMonth()]} ${d.getUTCDate()}`;
  if (step >= DAY) {
    return date;
  }
  let time = `${two(d.getUTCHours())}:${two(d.getUTCMinutes())}`;
  if (step < MINUTE) {
    time += `:${two(d.getUTCSeconds())}`;
  }
  return withDate ? `${time}<br>${date}` : time;
}

/** A time for hover labels: `HH:MM:SS` of a local-ms value. */
export function formatClock(x: number): string {
  const d = new Date(x);
  const two = (n: number) => String(n).padStart(2, '0');
  return `${two(d.getUTCHours())}:${two(d.getUTCMinutes())}:${two(d.getUTCSeconds())}`;
}

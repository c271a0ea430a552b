import { formatTick, tickStep, timeTicks } from '../../src/timeline/ticks';

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
// 2026-11-23 10:00:00 in "local ms" (read with UTC getters)
const T = Date.UTC(2026, 10, 23, 10, 0, 0);

describe('timeTicks', () => {
  it('puts ticks on round clock times inside the window', () => {
    const x0 = T + 7 * SECOND;
    const x1 = x0 + 5 * MINUTE;
    const { tickvals, ticktext, step } = timeTicks(x0, x1, 450); // <= 5 ticks
    expect(step).toBe(MINUTE);
    expect(tickvals.length).toBeLessThanOrEqual(5);
    expect(tickvals[0]).toBe(T + MINUTE);
    for (const v of tickvals) {
      expect(v % step).toBe(0);
      expect(v).toBeGreaterThanOrEqual(x0);
      expect(v).toBeLessThanOrEqual(x1);
    }
    expect(ticktext[0]).toBe('10:01<br>Nov 23'); // the date under the day's first tick
    expect(ticktext[1]).toBe('10:02');
  });

  it('shows seconds for sub-minute steps and dates at day changes', () => {
    expect(formatTick(T + 30 * SECOND, 10 * SECOND, false)).toBe('10:00:30');
    const night = Date.UTC(2026, 10, 23, 22, 0, 0);
    const { ticktext } = timeTicks(night, night + 4 * HOUR, 400);
    expect(ticktext).toContain('00:00<br>Nov 24');
    expect(formatTick(T, 86400 * SECOND, false)).toBe('Nov 23');
  });

  it('chooses the smallest round step that fits', () => {
    expect(tickStep(10 * SECOND, 10)).toBe(SECOND);
    expect(tickStep(8 * HOUR, 10)).toBe(HOUR);
    expect(tickStep(8 * HOUR, 3)).toBe(3 * HOUR);
    expect(tickStep(100 * 86400 * SECOND, 2)).toBe(8 * 7 * 86400 * SECOND);
  });

  it('returns nothing for an empty or invalid window', () => {
    expect(timeTicks(5, 5, 800).tickvals).toEqual([]);
    expect(timeTicks(NaN, 5, 800).tickvals).toEqual([]);
  });
});

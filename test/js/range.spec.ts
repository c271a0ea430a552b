import { fittedRange, visibleRange } from '../../src/timeline/range';

const T0 = 1_700_000_000;

function follow(span: [number, number], windowSeconds: number) {
  return visibleRange({
    span,
    deviceSpan: span,
    follow: true,
    userRange: null,
    windowSeconds,
    width: 1000
  });
}

describe('visibleRange', () => {
  it('fits 40 s of data into a 5-minute window instead of its right tenth', () => {
    const [r0, r1] = follow([T0, T0 + 40], 300);
    expect(r0).toBe(T0);
    // the data takes at least 80% of the width (40 s of 44-50 s)
    expect(40 / (r1 - r0)).toBeGreaterThanOrEqual(0.8);
    expect(r1).toBeGreaterThanOrEqual(T0 + 40);
  });

  it('moves the fitted end in round steps, not at every sample', () => {
    const ends = new Set<number>();
    for (let t = 30; t <= 40; t += 0.1) {
      ends.add(follow([T0, T0 + t], 300)[1]);
    }
    // 100 samples, a handful of window changes (each one a plotly replot)
    expect(ends.size).toBeLessThanOrEqual(3);
    for (let t = 30; t <= 40; t += 0.1) {
      const [r0, r1] = follow([T0, T0 + t], 300);
      expect(r0).toBe(T0);
      expect(r1).toBeGreaterThanOrEqual(T0 + t);
    }
  });

  it('follows the newest samples once the window is full', () => {
    const [r0, r1] = follow([T0, T0 + 900], 300);
    expect(r1 - r0).toBeCloseTo(300, 9);
    expect(r1).toBeGreaterThanOrEqual(T0 + 900);
    expect(r1 - (T0 + 900)).toBeLessThan(300 * 0.01);
    // just under full: from the first sample, never wider than the window
    const [f0, f1] = follow([T0, T0 + 290], 300);
    expect(f0).toBe(T0);
    expect(f1 - f0).toBeLessThanOrEqual(300);
  });

  it('keeps the user range and the whole history as before', () => {
    expect(
      visibleRange({
        span: [T0, T0 + 40],
        deviceSpan: [T0, T0 + 40],
        follow: false,
        userRange: [T0 + 1, T0 + 2],
        windowSeconds: 300,
        width: 1000
      })
    ).toEqual([T0 + 1, T0 + 2]);
    const [a0, a1] = follow([T0, T0 + 40], Infinity);
    expect(a0).toBe(T0);
    expect(a1).toBeGreaterThanOrEqual(T0 + 40);
  });

  it('fittedRange: a single sample gets a one-second window', () => {
    expect(fittedRange(T0, T0, 300)).toEqual([T0, T0 + 1]);
    expect(fittedRange(T0, T0 + 300, 300)).toBeNull();
    expect(fittedRange(NaN, NaN, 300)).toBeNull();
  });
});

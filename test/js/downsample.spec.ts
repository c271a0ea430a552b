import {
  BLOCK,
  IPoints,
  lowerBound,
  minMaxDownsample,
  MinMaxSeries,
  upperBound
} from '../../src/timeline/downsample';

/** Deterministic PRNG (mulberry32) so failures reproduce. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function randomSeries(
  n: number,
  rand: () => number,
  gapRate = 0.01
): { t: Float64Array; v: Float64Array } {
  const t = new Float64Array(n);
  const v = new Float64Array(n);
  let time = 1000;
  let level = 0;
  for (let i = 0; i < n; i++) {
    time += rand() < 0.05 ? 0 : rand() * 0.2; // some equal timestamps
    t[i] = time;
    level += (rand() - 0.5) * 100;
    // occasional spikes, both ways
    const spike = rand() < 0.002 ? (rand() - 0.5) * 1e6 : 0;
    v[i] = rand() < gapRate ? NaN : level + spike;
  }
  return { t, v };
}

function extremes(
  t: ArrayLike<number>,
  v: ArrayLike<number>,
  t0: number,
  t1: number
): [number, number, number] {
  let mn = Infinity;
  let mx = -Infinity;
  let count = 0;
  for (let i = 0; i < t.length; i++) {
    if (t[i] >= t0 && t[i] <= t1 && !isNaN(v[i])) {
      mn = Math.min(mn, v[i]);
      mx = Math.max(mx, v[i]);
      count++;
    }
  }
  return [mn, mx, count];
}

function gapsIn(p: IPoints, t0: number, t1: number): number {
  let n = 0;
  for (let i = 0; i < p.t.length; i++) {
    if (p.t[i] >= t0 && p.t[i] <= t1 && isNaN(p.v[i])) {
      n++;
    }
  }
  return n;
}

function isSorted(a: ArrayLike<number>): boolean {
  for (let i = 1; i < a.length; i++) {
    if (a[i] < a[i - 1]) {
      return false;
    }
  }
  return true;
}

describe('lowerBound / upperBound', () => {
  it('finds the window edges with duplicates', () => {
    const t = [1, 2, 2, 2, 3];
    expect(lowerBound(t, 2)).toBe(1);
    expect(upperBound(t, 2)).toBe(4);
    expect(lowerBound(t, 0)).toBe(0);
    expect(upperBound(t, 9)).toBe(5);
    expect(lowerBound([], 1)).toBe(0);
  });
});

describe('minMaxDownsample', () => {
  it('keeps the exact min and max of every random window', () => {
    const rand = rng(42);
    const { t, v } = randomSeries(20000, rand);
    const span = t[t.length - 1] - t[0];
    for (let k = 0; k < 200; k++) {
      const a = t[0] + rand() * span;
      const b = a + rand() * rand() * span;
      const buckets = 1 + Math.floor(rand() * 500);
      const p = minMaxDownsample(t, v, buckets, a, b);
      const [rawMin, rawMax, count] = extremes(t, v, a, b);
      const [dMin, dMax] = extremes(p.t, p.v, a, b);
      if (count === 0) {
        expect(extremes(p.t, p.v, a, b)[2]).toBe(0);
        continue;
      }
      expect(dMax).toBe(rawMax);
      expect(dMin).toBe(rawMin);
      expect(p.t.length).toBeLessThanOrEqual(3 * buckets);
      expect(isSorted(p.t)).toBe(true);
    }
  });

  it('bounds the output size', () => {
    const t = Float64Array.from({ length: 100000 }, (_, i) => i);
    const v = Float64Array.from({ length: 100000 }, (_, i) => Math.sin(i));
    const p = minMaxDownsample(t, v, 1000);
    expect(p.t.length).toBeLessThanOrEqual(2000);
    expect(p.t.length).toBeGreaterThan(1000);
    expect(Math.max(...p.v)).toBe(Math.max(...v));
    expect(Math.min(...p.v)).toBe(Math.min(...v));
  });

  it('handles empty, one point and short series', () => {
    expect(minMaxDownsample([], [], 10).t.length).toBe(0);
    const one = minMaxDownsample([5], [7], 10);
    expect(Array.from(one.t)).toEqual([5]);
    expect(Array.from(one.v)).toEqual([7]);
    const short = minMaxDownsample([1, 2, 3], [3, 1, 2], 10);
    expect(Array.from(short.v)).toEqual([3, 1, 2]);
    expect(minMaxDownsample([1, 2, 3], [1, 2, 3], 10, 5, 9).t.length).toBe(0);
  });

  it('keeps NaN gaps so a restart breaks the line', () => {
    const n = 10000;
    const t = Float64Array.from({ length: n }, (_, i) => i);
    const v = Float64Array.from({ length: n }, (_, i) => i % 100);
    v[5000] = NaN; // restart
    const p = minMaxDownsample(t, v, 50);
    expect(gapsIn(p, 0, n)).toBe(1);
    // the gap sits between drawn points on both sides of it
    const g = Array.from(p.v).findIndex(x => isNaN(x));
    expect(p.t[g]).toBe(5000);
    expect(p.t[g - 1]).toBeLessThan(5000);
    expect(p.t[g + 1]).toBeGreaterThan(5000);
  });
});

describe('MinMaxSeries', () => {
  function fill(s: MinMaxSeries, t: Float64Array, v: Float64Array) {
    for (let i = 0; i < t.length; i++) {
      s.push(t[i], v[i]);
    }
  }

  it('matches the raw extremes for random windows while growing', () => {
    const rand = rng(7);
    const { t, v } = randomSeries(30000, rand, 0.002);
    const s = new MinMaxSeries(16);
    let filled = 0;
    for (let step = 0; step < 60; step++) {
      const upto = Math.min(t.length, filled + 1 + Math.floor(rand() * 1000));
      for (; filled < upto; filled++) {
        s.push(t[filled], v[filled]);
      }
      const tt = t.subarray(0, filled);
      const vv = v.subarray(0, filled);
      for (let k = 0; k < 10; k++) {
        const span = tt[filled - 1] - tt[0];
        const a = tt[0] + rand() * span - 1;
        const b = rand() < 0.3 ? Infinity : a + rand() * span;
        const buckets = 1 + Math.floor(rand() * 300);
        const p = s.downsample(a, b, buckets, rand() < 0.5);
        const [rawMin, rawMax, count] = extremes(tt, vv, a, b);
        const [dMin, dMax] = extremes(p.t, p.v, a, b);
        if (count > 0) {
          expect(dMax).toBe(rawMax);
          expect(dMin).toBe(rawMin);
        }
        expect(isSorted(p.t)).toBe(true);
        // <= buckets + 2 aligned buckets, each <= 2 points + 1 gap, + 2 context points
        expect(p.t.length).toBeLessThanOrEqual(3 * (buckets + 2) + 2);
        // a gap inside the window is never lost
        let rawGaps = 0;
        for (let i = 0; i < filled; i++) {
          if (tt[i] >= a && tt[i] <= b && isNaN(vv[i])) {
            rawGaps++;
          }
        }
        if (rawGaps > 0) {
          expect(gapsIn(p, a, b)).toBeGreaterThan(0);
        }
      }
    }
  });

  it('gives the same extremes as the pure function on 288k samples, cheaply', () => {
    const n = 288000;
    const s = new MinMaxSeries();
    const t = new Float64Array(n);
    const v = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      t[i] = i / 10;
      v[i] = (i % 600) * 1e6 + (i === 123457 ? 5e9 : 0);
    }
    fill(s, t, v);
    const p = s.downsample(-Infinity, Infinity, 1000);
    expect(Math.max(...p.v)).toBe(5e9 + (123457 % 600) * 1e6);
    expect(p.t.length).toBeLessThanOrEqual(2 * 1000 + 2);
    const started = performance.now();
    for (let k = 0; k < 20; k++) {
      s.push(n / 10 + k, 1);
      s.downsample(-Infinity, Infinity, 1000);
    }
    const perCall = (performance.now() - started) / 20;
    expect(perCall).toBeLessThan(20); // generous: ~0.1-0.5 ms expected
  });

  it('drops whole blocks from the front and keeps working', () => {
    const s = new MinMaxSeries(64);
    for (let i = 0; i < 1000; i++) {
      s.push(i, i === 10 ? 999 : i % 7);
    }
    const dropped = s.dropToLength(300);
    expect(dropped % BLOCK).toBe(0);
    expect(s.length).toBe(1000 - dropped);
    expect(s.length).toBeGreaterThanOrEqual(300);
    expect(s.offset).toBe(dropped);
    expect(s.firstTime).toBe(dropped);
    const p = s.downsample(-Infinity, Infinity, 10);
    expect(Math.max(...p.v)).toBe(6); // the 999 spike was dropped with its block
    s.push(1000, 50);
    expect(Math.max(...s.downsample(-Infinity, Infinity, 10).v)).toBe(50);
  });

  it('handles empty and single-sample series', () => {
    const s = new MinMaxSeries();
    expect(s.downsample(0, 10, 5).t.length).toBe(0);
    expect(isNaN(s.lastTime)).toBe(true);
    s.push(3, 4);
    const p = s.downsample(0, 10, 5);
    expect(Array.from(p.t)).toEqual([3]);
    expect(Array.from(p.v)).toEqual([4]);
    s.push(4, NaN);
    expect(Array.from(s.downsample(0, 10, 5).v)).toEqual([4, NaN]);
  });

  it('adds context points outside the window only when asked', () => {
    const s = new MinMaxSeries();
    for (let i = 0; i < 10; i++) {
      s.push(i, i);
    }
    expect(Array.from(s.downsample(3, 5, 10).t)).toEqual([3, 4, 5]);
    expect(Array.from(s.downsample(3, 5, 10, true).t)).toEqual([2, 3, 4, 5, 6]);
  });
});

/**
 * Peak-preserving downsampling for the live timeline.
 *
 * A series is a pair of arrays `(t, v)` with `t` non-decreasing. A `NaN` value is a gap (a
 * kernel restart, a device missing from a sample) and breaks the drawn line.
 *
 * Min/max bucketing: the samples of a window are cut into buckets and each bucket contributes
 * its minimum and its maximum sample (real samples, at their real times, in time order) plus
 * one `NaN` when it contains a gap. Every bucket lies entirely inside the window, so for the
 * window [t0, t1] the largest drawn value equals the largest raw value in [t0, t1] exactly
 * (and the smallest likewise): a peak is never dropped, whatever the zoom.
 *
 * `minMaxDownsample` is the pure O(n) form. `MinMaxSeries` is the incremental form used live:
 * it keeps per-block aggregates (min index, max index, first gap) for blocks of `BLOCK`
 * samples, updated in O(1) per appended sample, and cuts buckets on block boundaries so that a
 * query touches ~n/BLOCK aggregates instead of n samples (288k samples -> ~4.5k block reads).
 */

/** Samples per aggregate block in `MinMaxSeries` (a power of two). */
export const BLOCK = 64;

/** Downsampled points: `t` and `v` have equal length; `v` may hold `NaN` gaps. */
export interface IPoints {
  t: Float64Array;
  v: Float64Array;
}

/** First index `i` in `[lo, hi)` with `t[i] >= x` (`hi` when none). */
export function lowerBound(
  t: ArrayLike<number>,
  x: number,
  lo = 0,
  hi = t.length
): number {
  return bound(t, x, lo, hi, false);
}

/** First index `i` in `[lo, hi)` with `t[i] > x` (`hi` when none). */
export function upperBound(
  t: ArrayLike<number>,
  x: number,
  lo = 0,
  hi = t.length
): number {
  return bound(t, x, lo, hi, true);
}

function bound(
  t: ArrayLike<number>,
  x: number,
  lo: number,
  hi: number,
  inclusive: boolean
): number {
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (t[mid] < x || (inclusive && t[mid] === x)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

/**
 * Reduce the samples of `[t0, t1]` to at most `2 * maxBuckets + 1` points (plus `NaN` gap
 * markers, at most one per bucket) keeping each bucket's minimum and maximum sample.
 *
 * O(n) in the number of samples inside the window; the window defaults to the whole series.
 */
export function minMaxDownsample(
  t: ArrayLike<number>,
  v: ArrayLike<number>,
  maxBuckets: number,
  t0 = -Infinity,
  t1 = Infinity
): IPoints {
  const lo = lowerBound(t, t0);
  const hi = upperBound(t, t1, lo);
  const out = new PointWriter(Math.min(hi - lo, 3 * Math.max(1, maxBuckets)));
  const n = hi - lo;
  if (n <= 0) {
    return out.finish();
  }
  const buckets = Math.max(1, Math.floor(maxBuckets));
  if (n <= 2 * buckets) {
    for (let i = lo; i < hi; i++) {
      out.push(t[i], v[i]);
    }
    return out.finish();
  }
  const size = Math.ceil(n / buckets);
  for (let start = lo; start < hi; start += size) {
    const end = Math.min(hi, start + size);
    let minI = -1;
    let maxI = -1;
    let gapI = -1;
    for (let i = start; i < end; i++) {
      const x = v[i];
      if (x !== x) {
        if (gapI < 0) {
          gapI = i;
        }
        continue;
      }
      if (minI < 0 || x < v[minI]) {
        minI = i;
      }
      if (maxI < 0 || x > v[maxI]) {
        maxI = i;
      }
    }
    out.bucket(t, v, minI, maxI, gapI);
  }
  return out.finish();
}

/**
 * An append-only (t, v) series with per-block min/max aggregates, for cheap repeated
 * downsampling of a growing history. Old samples can be dropped from the front in whole
 * blocks (`dropBefore`), so the structure follows a bounded ring buffer.
 *
 * Indices are absolute (they keep counting across drops); `offset` is the absolute index of
 * the first retained sample.
 */
export class MinMaxSeries {
  constructor(initialCapacity = 1024) {
    const cap = Math.max(BLOCK, roundUp(initialCapacity, BLOCK));
    this._t = new Float64Array(cap);
    this._v = new Float64Array(cap);
    this._bMin = new Int32Array(cap / BLOCK);
    this._bMax = new Int32Array(cap / BLOCK);
    this._bGap = new Int32Array(cap / BLOCK);
  }

  /** Number of retained samples. */
  get length(): number {
    return this._len;
  }

  /** Absolute index of the first retained sample. */
  get offset(): number {
    return this._offset;
  }

  /** Time of the first retained sample (`NaN` when empty). */
  get firstTime(): number {
    return this._len ? this._t[0] : NaN;
  }

  /** Time of the last sample (`NaN` when empty). */
  get lastTime(): number {
    return this._len ? this._t[this._len - 1] : NaN;
  }

  /** Value of the last sample (`NaN` when empty). */
  get lastValue(): number {
    return this._len ? this._v[this._len - 1] : NaN;
  }

  /** Times of the retained samples (a view, valid until the next mutation). */
  times(): Float64Array {
    return this._t.subarray(0, this._len);
  }

  /** Values of the retained samples (a view, valid until the next mutation). */
  values(): Float64Array {
    return this._v.subarray(0, this._len);
  }

  /** Append one sample; `t` must not be smaller than the last one. O(1) amortised. */
  push(t: number, v: number): void {
    if (this._len === this._t.length) {
      this._grow();
    }
    const i = this._len++;
    this._t[i] = t;
    this._v[i] = v;
    const b = i >> BLOCK_SHIFT;
    if ((i & (BLOCK - 1)) === 0) {
      this._bMin[b] = -1;
      this._bMax[b] = -1;
      this._bGap[b] = -1;
    }
    if (v !== v) {
      if (this._bGap[b] < 0) {
        this._bGap[b] = i;
      }
      return;
    }
    const mn = this._bMin[b];
    if (mn < 0 || v < this._v[mn]) {
      this._bMin[b] = i;
    }
    const mx = this._bMax[b];
    if (mx < 0 || v > this._v[mx]) {
      this._bMax[b] = i;
    }
  }

  /** Drop every sample. */
  clear(): void {
    this._offset += this._len;
    this._len = 0;
  }

  /**
   * Drop whole blocks from the front so that at most `keep` samples (rounded up to a block)
   * remain. Returns how many samples were dropped.
   */
  dropToLength(keep: number): number {
    const excess = this._len - Math.max(0, keep);
    if (excess < BLOCK) {
      return 0;
    }
    const blocks = Math.floor(excess / BLOCK);
    const n = blocks * BLOCK;
    this._t.copyWithin(0, n, this._len);
    this._v.copyWithin(0, n, this._len);
    const nb = Math.ceil(this._len / BLOCK);
    for (let b = blocks; b < nb; b++) {
      const d = b - blocks;
      this._bMin[d] = this._bMin[b] < 0 ? -1 : this._bMin[b] - n;
      this._bMax[d] = this._bMax[b] < 0 ? -1 : this._bMax[b] - n;
      this._bGap[d] = this._bGap[b] < 0 ? -1 : this._bGap[b] - n;
    }
    this._len -= n;
    this._offset += n;
    return n;
  }

  /**
   * Downsample the window `[t0, t1]` into about `maxBuckets` min/max buckets. The result
   * holds the window's exact minimum and maximum; when `context` is true it also holds the
   * last sample before and the first sample after the window so a line reaches the edges.
   *
   * Cost: O(log n + maxBuckets + BLOCK + (samples in window) / BLOCK).
   */
  downsample(
    t0: number,
    t1: number,
    maxBuckets: number,
    context = false
  ): IPoints {
    const t = this._t;
    const v = this._v;
    const lo = lowerBound(t, t0, 0, this._len);
    const hi = upperBound(t, t1, lo, this._len);
    const n = hi - lo;
    const buckets = Math.max(1, Math.floor(maxBuckets));
    const out = new PointWriter(Math.min(n, 3 * buckets + 4) + 2);
    if (context && lo > 0) {
      out.push(t[lo - 1], v[lo - 1]);
    }
    if (n <= 2 * buckets) {
      for (let i = lo; i < hi; i++) {
        out.push(t[i], v[i]);
      }
    } else {
      // Bucket size: a power of two, aligned on absolute sample indices, so buckets stay put
      // while the series grows (no shimmer in a live plot, and a new sample changes at most
      // the last bucket); buckets of at least a block read only block aggregates inside.
      const raw = Math.ceil(n / buckets);
      let size = 1;
      while (size < raw) {
        size *= 2;
      }
      const abs = this._offset;
      let start = lo;
      while (start < hi) {
        const nextAbs = (Math.floor((start + abs) / size) + 1) * size;
        const end = Math.min(hi, nextAbs - abs);
        this._aggregate(start, end);
        out.bucket(t, v, this._qMin, this._qMax, this._qGap);
        start = end;
      }
    }
    if (context && hi < this._len) {
      out.push(t[hi], v[hi]);
    }
    return out.finish();
  }

  /** Min, max and first gap over `[start, end)`, into `_qMin/_qMax/_qGap`. */
  private _aggregate(start: number, end: number): void {
    const v = this._v;
    let minI = -1;
    let maxI = -1;
    let gapI = -1;
    const consider = (mn: number, mx: number, gp: number) => {
      if (gp >= 0 && gapI < 0) {
        gapI = gp;
      }
      if (mn >= 0 && (minI < 0 || v[mn] < v[minI])) {
        minI = mn;
      }
      if (mx >= 0 && (maxI < 0 || v[mx] > v[maxI])) {
        maxI = mx;
      }
    };
    let i = start;
    // Head: scan up to the first block boundary.
    const headEnd = Math.min(end, roundUp(i, BLOCK));
    for (; i < headEnd; i++) {
      const x = v[i];
      consider(x === x ? i : -1, x === x ? i : -1, x === x ? -1 : i);
    }
    // Whole blocks from their aggregates; the last block may be partial but then it is the
    // tail of the series, whose aggregate covers exactly the samples pushed so far.
    while (i + BLOCK <= end || (i < end && end === this._len)) {
      const b = i >> BLOCK_SHIFT;
      consider(this._bMin[b], this._bMax[b], this._bGap[b]);
      i += BLOCK;
    }
    // Tail: scan what is left.
    for (; i < end; i++) {
      const x = v[i];
      consider(x === x ? i : -1, x === x ? i : -1, x === x ? -1 : i);
    }
    this._qMin = minI;
    this._qMax = maxI;
    this._qGap = gapI;
  }

  private _grow(): void {
    const cap = this._t.length * 2;
    const t = new Float64Array(cap);
    t.set(this._t);
    this._t = t;
    const v = new Float64Array(cap);
    v.set(this._v);
    this._v = v;
    const grow32 = (a: Int32Array) => {
      const b = new Int32Array(cap / BLOCK);
      b.set(a);
      return b;
    };
    this._bMin = grow32(this._bMin);
    this._bMax = grow32(this._bMax);
    this._bGap = grow32(this._bGap);
  }

  private _t: Float64Array;
  private _v: Float64Array;
  private _bMin: Int32Array;
  private _bMax: Int32Array;
  private _bGap: Int32Array;
  private _len = 0;
  private _offset = 0;
  private _qMin = -1;
  private _qMax = -1;
  private _qGap = -1;
}

const BLOCK_SHIFT = Math.log2(BLOCK);

function roundUp(x: number, m: number): number {
  return Math.ceil(x / m) * m;
}

/** Collects output points into preallocated typed arrays. */
class PointWriter {
  constructor(capacity: number) {
    this._t = new Float64Array(Math.max(4, capacity));
    this._v = new Float64Array(Math.max(4, capacity));
  }

  push(t: number, v: number): void {
    if (this._n === this._t.length) {
      const t2 = new Float64Array(this._n * 2);
      t2.set(this._t);
      this._t = t2;
      const v2 = new Float64Array(this._n * 2);
      v2.set(this._v);
      this._v = v2;
    }
    this._t[this._n] = t;
    this._v[this._n] = v;
    this._n++;
  }

  /** Emit a bucket's min, max and gap samples in time order (each index at most once). */
  bucket(
    t: ArrayLike<number>,
    v: ArrayLike<number>,
    minI: number,
    maxI: number,
    gapI: number
  ): void {
    let a = minI;
    let b = maxI;
    if (a > b) {
      a = maxI;
      b = minI;
    }
    // a <= b; either may be -1 (all-gap bucket) in which case both are.
    if (gapI >= 0 && (a < 0 || gapI < a)) {
      this.push(t[gapI], NaN);
      gapI = -1;
    }
    if (a >= 0) {
      this.push(t[a], v[a]);
    }
    if (gapI >= 0 && gapI < b) {
      this.push(t[gapI], NaN);
      gapI = -1;
    }
    if (b >= 0 && b !== a) {
      this.push(t[b], v[b]);
    }
    if (gapI >= 0) {
      this.push(t[gapI], NaN);
    }
  }

  finish(): IPoints {
    return { t: this._t.slice(0, this._n), v: this._v.slice(0, this._n) };
  }

  private _t: Float64Array;
  private _v: Float64Array;
  private _n = 0;
}

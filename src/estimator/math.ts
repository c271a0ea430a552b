/**
 * The estimator calculator's pure helpers: parameter counts typed as `7B` / `125M`, the GPU
 * sizes to compare against, and the bars (one per part, on a scale that holds both the total
 * and the GPU) with the fits / does-not-fit verdict.
 */
import type { IEstimate } from '../protocol';

const SUFFIXES: { [suffix: string]: number } = {
  '': 1,
  k: 1e3,
  m: 1e6,
  b: 1e9,
  g: 1e9,
  t: 1e12
};

/**
 * A parameter count from text: `7B`, `125M`, `1.5T`, `350k`, `6,700`; null when it is not one
 * (the kernel parses counts the same way, `vramscope.estimator.parse_param_count`).
 */
export function parseParamCount(text: string): number | null {
  const clean = text.replace(/[,_\s]/g, '');
  const match = /^(\d+(?:\.\d+)?|\.\d+)([kmbgt]?)$/i.exec(clean);
  if (!match) {
    return null;
  }
  const count = Math.round(
    parseFloat(match[1]) * SUFFIXES[match[2].toLowerCase()]
  );
  return count >= 1 && Number.isSafeInteger(count) ? count : null;
}

/** `7000000000` -> `7B`, `124439808` -> `124.4M`, `350000` -> `350k`. */
export function formatParamCount(count: number): string {
  for (const [suffix, scale] of [
    ['T', 1e12],
    ['B', 1e9],
    ['M', 1e6],
    ['k', 1e3]
  ] as const) {
    if (count >= scale) {
      const value = count / scale;
      return `${Number(value.toFixed(value < 10 ? 2 : 1))}${suffix}`;
    }
  }
  return String(count);
}

/** GPU memory presets, GiB. */
export const GPU_PRESETS_GIB: ReadonlyArray<number> = [16, 24, 40, 80];

export const GIB = 1024 ** 3;

/** The parts of an estimate, in the order they are drawn. */
export const PARTS: ReadonlyArray<{ key: keyof IEstimate; label: string }> = [
  { key: 'parameters', label: 'Parameters' },
  { key: 'gradients', label: 'Gradients' },
  { key: 'optimizer_state', label: 'Optimizer state' },
  { key: 'master_weights', label: 'Master weights' },
  { key: 'activations', label: 'Activations' }
];

export interface IBar {
  key: string;
  label: string;
  bytes: number;
  /**
   * Width in percent (0..100): a part's share of the total; the total's share of the larger
   * of the total and the GPU (its row carries the GPU marker).
   */
  percent: number;
  /** The part's share of the total, percent (the total: 100). */
  share: number;
}

/** A part that is not 0 is drawn at least this wide (percent), its exact figure beside it. */
export const MIN_VISIBLE_PERCENT = 1.5;

export interface IBars {
  bars: IBar[];
  total: number;
  gpuBytes: number;
  /** Where the GPU's size falls on the scale, percent. */
  gpuPercent: number;
  fits: boolean;
  /** gpuBytes - total (negative: missing bytes). */
  headroom: number;
}

/**
 * The bars of an estimate against a GPU of `gpuBytes`. The parts are drawn as shares of the
 * total (a small part next to an 80 GiB GPU stays visible; a part that is not 0 gets at least
 * `MIN_VISIBLE_PERCENT`); the total row is drawn on the scale of the larger of the total and
 * the GPU, with the GPU marker, so the two compare by eye.
 */
export function estimateBars(estimate: IEstimate, gpuBytes: number): IBars {
  const total = estimate.total;
  const scale = Math.max(total, gpuBytes, 1);
  const pct = (bytes: number) => Math.min(100, (100 * bytes) / scale);
  const share = (bytes: number) => (total > 0 ? (100 * bytes) / total : 0);
  const bars: IBar[] = PARTS.map(({ key, label }) => {
    const bytes = estimate[key] as number;
    const part = share(bytes);
    const percent = bytes > 0 ? Math.max(part, MIN_VISIBLE_PERCENT) : 0;
    return { key: String(key), label, bytes, percent, share: part };
  });
  bars.push({
    key: 'total',
    label: 'Total',
    bytes: total,
    percent: total > 0 ? Math.max(pct(total), MIN_VISIBLE_PERCENT) : 0,
    share: 100
  });
  return {
    bars,
    total,
    gpuBytes,
    gpuPercent: pct(gpuBytes),
    fits: total <= gpuBytes,
    headroom: gpuBytes - total
  };
}

/**
 * How the verdict is shown: `info` (neutral) until the user asked about a configuration of
 * their own (typed, picked or changed something, or a kernel model is estimated), then
 * `fits` / `nofit`.
 */
export function verdictState(
  fits: boolean,
  asked: boolean
): 'fits' | 'nofit' | 'info' {
  return !asked ? 'info' : fits ? 'fits' : 'nofit';
}

/** A GPU size in GiB from text (custom size): a positive number, else null. */
export function parseGiB(text: string): number | null {
  const value = Number(text.trim());
  return Number.isFinite(value) && value > 0 ? value : null;
}

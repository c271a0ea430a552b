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
  /** Width in percent of the scale (0..100). */
  percent: number;
}

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
 * The bars of an estimate against a GPU of `gpuBytes`: every width is a share of the larger
 * of the total and the GPU size, so the GPU marker and the total bar compare by eye.
 */
export function estimateBars(estimate: IEstimate, gpuBytes: number): IBars {
  const total = estimate.total;
  const scale = Math.max(total, gpuBytes, 1);
  const pct = (bytes: number) => Math.min(100, (100 * bytes) / scale);
  const bars = PARTS.map(({ key, label }) => {
    const bytes = estimate[key] as number;
    return { key: String(key), label, bytes, percent: pct(bytes) };
  });
  bars.push({
    key: 'total',
    label: 'Total',
    bytes: total,
    percent: pct(total)
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

/** A GPU size in GiB from text (custom size): a positive number, else null. */
export function parseGiB(text: string): number | null {
  const value = Number(text.trim());
  return Number.isFinite(value) && value > 0 ? value : null;
}

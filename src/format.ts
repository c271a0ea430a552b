/**
 * Formatting of byte counts, signed deltas and durations for the panel and cell footers.
 */

/** `binary`: KiB/MiB/GiB (1024); `decimal`: kB/MB/GB (1000). */
export type Units = 'binary' | 'decimal';

export interface IFormatBytesOptions {
  /** Default `binary`. */
  units?: Units;
  /** Prefix non-negative, non-zero values with `+` (for deltas). */
  signed?: boolean;
}

/**
 * Format a byte count with one decimal: `64.0 MiB`, `-1.5 GiB`, `0 B`, `512 B`;
 * `signed: true` gives `+64.0 MiB`. Non-finite input gives `–`.
 */
export function formatBytes(
  bytes: number,
  options: IFormatBytesOptions = {}
): string {
  if (!Number.isFinite(bytes)) {
    return '–';
  }
  if (bytes === 0) {
    return '0 B';
  }
  const units = options.units ?? 'binary';
  const base = units === 'decimal' ? 1000 : 1024;
  const names = units === 'decimal' ? Private.DECIMAL : Private.BINARY;
  const sign = bytes < 0 ? '-' : options.signed ? '+' : '';
  let x = Math.abs(bytes);
  let u = 0;
  while (u < names.length - 1 && x >= base) {
    x /= base;
    u++;
  }
  if (u === 0) {
    return `${sign}${Math.round(x)} B`;
  }
  // 1023.96 MiB would print as "1024.0 MiB": move up a unit instead.
  if (Number(x.toFixed(1)) >= base && u < names.length - 1) {
    x /= base;
    u++;
  }
  return `${sign}${x.toFixed(1)} ${names[u]}`;
}

/** A signed delta: `+64.0 MiB`, `-1.5 GiB`, `0 B`. */
export function formatDelta(bytes: number, units: Units = 'binary'): string {
  return formatBytes(bytes, { units, signed: true });
}

/** `0.0004` -> `<1 ms`, `0.012` -> `12 ms`, `1.234` -> `1.2 s`, `75` -> `1m 15s`, `3725` -> `1h 02m`. */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) {
    return '–';
  }
  if (seconds < 0.001) {
    return '<1 ms';
  }
  if (seconds < 1) {
    return `${Math.round(seconds * 1000)} ms`;
  }
  if (seconds < 60) {
    return `${seconds.toFixed(1)} s`;
  }
  const total = Math.round(seconds);
  if (total < 3600) {
    return `${Math.floor(total / 60)}m ${String(total % 60).padStart(2, '0')}s`;
  }
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  return `${h}h ${String(m).padStart(2, '0')}m`;
}

/** `used / total` as a percentage in [0, 100], or null when the total is unknown. */
export function percentOf(used: number, total: number | null): number | null {
  if (total === null || !Number.isFinite(total) || total <= 0) {
    return null;
  }
  return Math.max(0, Math.min(100, (used / total) * 100));
}

namespace Private {
  export const BINARY = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  export const DECIMAL = ['B', 'kB', 'MB', 'GB', 'TB', 'PB'];
}

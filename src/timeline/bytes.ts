/** Axis scaling for byte values (labels come from the shared `../format`). */
import type { Units } from '../format';

const BINARY = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
const DECIMAL = ['B', 'kB', 'MB', 'GB', 'TB'];

/**
 * The unit in which `maxBytes` reads best, for scaling an axis: binary (KiB, MiB: 1024) or
 * decimal (kB, MB: 1000) as the units setting says.
 */
export function axisUnit(
  maxBytes: number,
  units: Units = 'binary'
): { unit: string; scale: number } {
  const base = units === 'decimal' ? 1000 : 1024;
  const names = units === 'decimal' ? DECIMAL : BINARY;
  let u = 0;
  let x = Math.abs(maxBytes);
  while (x >= 2 * base && u < names.length - 1) {
    x /= base;
    u++;
  }
  return { unit: names[u], scale: Math.pow(base, u) };
}

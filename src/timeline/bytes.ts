/**
 * Local byte formatter (binary units) until the shared `src/format.ts` lands; the integrator
 * can point these imports at it.
 */
const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

/** `1536` -> `"1.5 KiB"`; `signed` adds `+` to non-negative values (`"+64.0 MiB"`). */
export function formatBytes(bytes: number, signed = false): string {
  if (!isFinite(bytes)) {
    return '–';
  }
  const sign = bytes < 0 ? '-' : signed ? '+' : '';
  let x = Math.abs(bytes);
  let u = 0;
  while (x >= 1024 && u < UNITS.length - 1) {
    x /= 1024;
    u++;
  }
  return `${sign}${u === 0 ? x.toFixed(0) : x.toFixed(1)} ${UNITS[u]}`;
}

/** The binary unit in which `maxBytes` reads best, for scaling an axis. */
export function axisUnit(maxBytes: number): { unit: string; scale: number } {
  let u = 0;
  let x = Math.abs(maxBytes);
  while (x >= 2048 && u < UNITS.length - 1) {
    x /= 1024;
    u++;
  }
  return { unit: UNITS[u], scale: Math.pow(1024, u) };
}

/** Axis scaling for byte values (labels come from the shared `../format`). */
const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

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

/**
 * The check combinators every message validator is built from (docs/protocol.md,
 * "Validation"): each returns an error string naming the offending path, or null.
 */

/** Checks a value; returns an error string, or null when the value is valid. */
export type Check = (value: unknown, path: string) => string | null;

/** Small combinators the message checks are built from (exported for tests and reuse). */
export namespace Checks {
  export const str: Check = (v, p) =>
    typeof v === 'string'
      ? null
      : `${p}: expected a string, got ${describe(v)}`;

  export const bool: Check = (v, p) =>
    typeof v === 'boolean'
      ? null
      : `${p}: expected a boolean, got ${describe(v)}`;

  /** A finite number. */
  export const num: Check = (v, p) =>
    typeof v === 'number' && Number.isFinite(v)
      ? null
      : `${p}: expected a finite number, got ${describe(v)}`;

  /** A finite number >= 0. */
  export const nonNeg: Check = (v, p) =>
    num(v, p) ?? ((v as number) >= 0 ? null : `${p}: expected >= 0, got ${v}`);

  /** An integer (may be negative: deltas). */
  export const int: Check = (v, p) =>
    typeof v === 'number' && Number.isInteger(v)
      ? null
      : `${p}: expected an integer, got ${describe(v)}`;

  /** A byte count: a non-negative integer. */
  export const bytes: Check = (v, p) =>
    int(v, p) ??
    ((v as number) >= 0 ? null : `${p}: expected a byte count >= 0, got ${v}`);

  export const any: Check = () => null;

  export function literal(...values: ReadonlyArray<unknown>): Check {
    return (v, p) =>
      values.includes(v)
        ? null
        : `${p}: expected one of ${values.map(x => JSON.stringify(x)).join(', ')}, got ${describe(v)}`;
  }

  export function nullable(check: Check): Check {
    return (v, p) => (v === null ? null : check(v, p));
  }

  export function array(item: Check): Check {
    return (v, p) => {
      if (!Array.isArray(v)) {
        return `${p}: expected an array, got ${describe(v)}`;
      }
      for (let i = 0; i < v.length; i++) {
        const e = item(v[i], `${p}[${i}]`);
        if (e) {
          return e;
        }
      }
      return null;
    };
  }

  /** An object whose every value passes `item` (e.g. `{[id: DeviceId]: DeviceDelta}`). */
  export function record(item: Check): Check {
    return (v, p) => {
      if (!isObject(v)) {
        return `${p}: expected an object, got ${describe(v)}`;
      }
      for (const key of Object.keys(v)) {
        const e = item(v[key], `${p}.${key}`);
        if (e) {
          return e;
        }
      }
      return null;
    };
  }

  /**
   * An object with these fields; a field listed in `optional` may be absent (or undefined).
   * Extra fields are ignored.
   */
  export function object(
    fields: { [key: string]: Check },
    optional: ReadonlyArray<string> = []
  ): Check {
    return (v, p) => {
      if (!isObject(v)) {
        return `${p}: expected an object, got ${describe(v)}`;
      }
      for (const key of Object.keys(fields)) {
        if (!(key in v) || v[key] === undefined) {
          if (optional.includes(key)) {
            continue;
          }
          return `${p}.${key}: missing`;
        }
        const e = fields[key](v[key], `${p}.${key}`);
        if (e) {
          return e;
        }
      }
      return null;
    };
  }
}

export function isObject(v: unknown): v is { [key: string]: unknown } {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function describe(v: unknown): string {
  if (v === null) {
    return 'null';
  }
  if (Array.isArray(v)) {
    return 'an array';
  }
  if (typeof v === 'number') {
    return Number.isFinite(v) ? `the number ${v}` : String(v);
  }
  if (typeof v === 'string') {
    return `the string ${JSON.stringify(v.length > 40 ? v.slice(0, 40) + '…' : v)}`;
  }
  return typeof v;
}

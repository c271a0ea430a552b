/**
 * Figure comparison: the timeline replots plotly only when its part of the figure changed.
 */

/** A plotly figure as given to `Plotly.react`. */
export interface IFigure {
  data: any[];
  layout: any;
}

/** Whether two figures are equal (typed arrays element by element). */
export function sameFigure(a: IFigure | null, b: IFigure): boolean {
  return (
    a !== null && deepEqual(a.data, b.data) && deepEqual(a.layout, b.layout)
  );
}

/** A copy of the plain objects and arrays of a figure; typed arrays are shared. */
export function cloneFigure(f: IFigure): IFigure {
  return { data: clone(f.data), layout: clone(f.layout) };
}

function clone(x: any): any {
  if (typeof x !== 'object' || x === null || ArrayBuffer.isView(x)) {
    return x;
  }
  if (Array.isArray(x)) {
    return x.map(clone);
  }
  const out: any = {};
  for (const k of Object.keys(x)) {
    out[k] = clone(x[k]);
  }
  return out;
}

/** Structural equality of plain data (NaN equals NaN; typed arrays element by element). */
export function deepEqual(a: any, b: any): boolean {
  if (a === b) {
    return true;
  }
  if (typeof a !== 'object' || typeof b !== 'object' || !a || !b) {
    return Number.isNaN(a) && Number.isNaN(b);
  }
  if (ArrayBuffer.isView(a) || Array.isArray(a)) {
    const x = a as ArrayLike<unknown>;
    const y = b as ArrayLike<unknown>;
    if (!(ArrayBuffer.isView(b) || Array.isArray(b)) || x.length !== y.length) {
      return false;
    }
    for (let i = 0; i < x.length; i++) {
      if (x[i] !== y[i] && !deepEqual(x[i], y[i])) {
        return false;
      }
    }
    return true;
  }
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) {
    return false;
  }
  return keys.every(k => deepEqual(a[k], b[k]));
}

/**
 * The canvas layer of the timeline: the memory lines drawn over plotly's plot area (see
 * ./lines.ts), also while plotly's axes are dragged.
 */
import { drawLines, IArea, ILine } from './lines';

export class LineLayer {
  constructor() {
    this.canvas = document.createElement('canvas');
    this.canvas.className = 'vramscope-Timeline-lines';
    this.canvas.setAttribute('aria-hidden', 'true');
  }

  readonly canvas: HTMLCanvasElement;

  /** The lines drawn now (plot units: x in local ms, y in the axis unit). */
  get lines(): ReadonlyArray<ILine> {
    return this._lines;
  }

  /** The plot area the lines are drawn in (null: nothing drawn). */
  get area(): IArea | null {
    return this._area;
  }

  /** Replace what is drawn (call `draw` afterwards). */
  set(lines: ILine[], area: IArea | null): void {
    this._lines = lines;
    this._area = area;
  }

  /** Draw the lines over the plot area (at `range`, plotly's while it is dragged). */
  draw(range?: [number, number]): void {
    const area = this._area;
    const canvas = this.canvas;
    if (!area || !this._lines.length) {
      canvas.hidden = true;
      canvas.dataset.points = '0';
      return;
    }
    canvas.hidden = false;
    drawLines(
      canvas,
      this._lines,
      range ? { ...area, x0: range[0], x1: range[1] } : area
    );
    let points = 0;
    let last = -Infinity;
    for (const line of this._lines) {
      points += line.x.length;
      if (line.x.length) {
        last = Math.max(last, line.x[line.x.length - 1]);
      }
    }
    canvas.dataset.points = String(points);
    canvas.dataset.lastX = String(last);
  }

  private _lines: ILine[] = [];
  private _area: IArea | null = null;
}

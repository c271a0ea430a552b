/**
 * The timeline's process lanes, drawn (see ./lanes.ts for the model): under the plot, one row
 * per process named by its role with its current value (or how it ended), and its line on one
 * canvas for all lanes, aligned with the plot area so a lane's time is the plot's. A toggle in
 * the legend row shows or hides them; with no child process there is neither.
 */
import { formatBytes } from '../format';
import type { ILane, ILanesFigure, ProcessLanes } from './lanes';
import type { DeviceKind } from './series';

/** A lane row's height and the height of its drawn part below its label, CSS px. */
export const LANE_HEIGHT = 26;
const LINE_HEIGHT = 13;
/** The lanes' scrolled view: style/timeline.css's max-height of .vramscope-TimelineLanes. */
const VIEW_HEIGHT = 160;

/** The x extent of the plot area the lanes align with, CSS px. */
export interface ILaneArea {
  left: number;
  width: number;
}

/** The lanes' colours: the line, RSS under it, an ended process's line. */
export interface ILaneColors {
  main: string;
  muted: string;
  ended: string;
}

export class TimelineLanes {
  /** `redraw` asks the timeline for a redraw (toggled, scrolled). */
  constructor(redraw: () => void) {
    this.toggle = document.createElement('button');
    this.toggle.className = 'vramscope-Timeline-lanesToggle';
    this.toggle.type = 'button';
    this.toggle.hidden = true;
    this.toggle.addEventListener('click', () => {
      this._userShown = !this.shown;
      redraw();
    });
    this.node = document.createElement('div');
    this.node.className = 'vramscope-TimelineLanes';
    this.node.hidden = true;
    // only the lanes in sight are drawn (64 ranks: a few of them): scrolling draws others
    this.node.addEventListener('scroll', () => {
      this._scrollTop = this.node.scrollTop;
      redraw();
    });
    this._canvas = document.createElement('canvas');
    this._canvas.className = 'vramscope-TimelineLanes-lines';
    this._canvas.setAttribute('aria-hidden', 'true');
    this.node.appendChild(this._canvas);
  }

  /** The lanes (rows and their canvas). */
  readonly node: HTMLDivElement;
  /** The legend row's show/hide button. */
  readonly toggle: HTMLButtonElement;

  /** Whether the lanes are shown: as the user chose, else whenever there are processes. */
  get shown(): boolean {
    return this._count > 0 && (this._userShown ?? true);
  }

  /**
   * Show `model`'s lanes over `area` (null: no plot), their x axis spanning `range` (kernel
   * seconds, the plot's window), for the plot's device `kind`. Rebuilt only when the lanes,
   * the window, the area or the colours changed.
   */
  update(
    model: ProcessLanes,
    kind: DeviceKind | null,
    range: [number, number],
    area: ILaneArea | null,
    colors: ILaneColors
  ): void {
    this._count = model.count;
    this.toggle.hidden = this._count === 0;
    this.toggle.setAttribute('aria-pressed', String(this.shown));
    this.toggle.textContent = `${this.shown ? '▾' : '▸'} ${Private.count(this._count)}`;
    this.toggle.title = this.shown
      ? 'Hide the process lanes'
      : 'Show a lane per process under the plot';
    const shown = this.shown && !!area && kind !== null;
    this.node.hidden = !shown;
    if (this._count === 0) {
      this._clear(); // no rows kept of processes gone (another notebook's, or none)
    }
    if (!shown) {
      return;
    }
    const first = Math.floor(this._scrollTop / LANE_HEIGHT);
    const drawn: [number, number] = [
      first,
      first + Math.ceil(VIEW_HEIGHT / LANE_HEIGHT) + 1
    ];
    const key = [
      model.version,
      ...range,
      area.left,
      area.width,
      kind,
      colors.main,
      first
    ].join();
    if (key === this._key) {
      return;
    }
    this._key = key;
    const buckets = Math.max(25, Math.round(area.width / 4)); // as the plot: 1 per 4 px
    const figure = model.build(range[0], range[1], buckets, kind, drawn);
    this._rows(figure.lanes, area, figure.measure, drawn);
    this._draw(figure, area, range, colors, drawn);
  }

  /** No rows, and nothing drawn: the next lanes are built afresh. */
  private _clear(): void {
    for (const row of this._byKey.values()) {
      row.node.remove();
    }
    this._byKey.clear();
    this._key = '';
    delete this._canvas.dataset.lanes;
  }

  /** Keep one row per lane, in the lanes' order, updated in place. */
  private _rows(
    lanes: ILane[],
    area: ILaneArea,
    measure: string,
    [from, to]: [number, number]
  ): void {
    const seen = new Set<string>();
    let previous: Element = this._canvas;
    lanes.forEach((lane, i) => {
      seen.add(lane.key);
      let row = this._byKey.get(lane.key);
      if (!row) {
        row = new Private.Row(lane.key);
        this._byKey.set(lane.key, row);
      }
      if (row.fresh || (i >= from && i < to)) {
        row.update(lane, area, measure); // the others when scrolled into sight
      }
      if (previous.nextSibling !== row.node) {
        previous.after(row.node);
      }
      previous = row.node;
    });
    for (const [key, row] of this._byKey) {
      if (!seen.has(key)) {
        row.node.remove();
        this._byKey.delete(key);
      }
    }
  }

  /** Draw the lanes in sight on the canvas, which stays in sight (sticky) as they scroll. */
  private _draw(
    figure: ILanesFigure,
    area: ILaneArea,
    [x0, x1]: [number, number],
    colors: ILaneColors,
    [from, to]: [number, number]
  ): void {
    const canvas = this._canvas;
    const ratio = window.devicePixelRatio || 1;
    const w = Math.max(1, Math.round(area.width));
    const h = Math.min(figure.lanes.length * LANE_HEIGHT, VIEW_HEIGHT);
    canvas.style.marginLeft = `${area.left}px`;
    canvas.style.marginBottom = `${-h}px`; // the rows lie under it
    canvas.style.width = `${w}px`;
    canvas.style.height = `${h}px`;
    const pw = Math.round(w * ratio);
    const ph = Math.max(1, Math.round(h * ratio));
    if (canvas.width !== pw || canvas.height !== ph) {
      canvas.width = pw;
      canvas.height = ph;
    }
    canvas.dataset.lanes = String(figure.lanes.length);
    const ctx = canvas.getContext('2d');
    if (!ctx) {
      return;
    }
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, w, h);
    const sx = w / (x1 - x0 || 1);
    const sy = (LINE_HEIGHT - 1) / (figure.max || 1);
    const top = Math.min(
      this._scrollTop,
      Math.max(0, figure.lanes.length * LANE_HEIGHT - h)
    );
    figure.lanes.slice(from, to).forEach((lane, j) => {
      const base = (from + j + 1) * LANE_HEIGHT - 1.5 - top;
      if (lane.muted) {
        Private.stroke(ctx, lane.muted, x0, sx, base, sy, colors.muted, 1);
      }
      const color = lane.exit !== null ? colors.ended : colors.main;
      Private.stroke(ctx, lane.main, x0, sx, base, sy, color, 1.5);
    });
  }

  private _canvas: HTMLCanvasElement;
  private _byKey = new Map<string, Private.Row>();
  private _count = 0;
  private _userShown: boolean | null = null;
  private _key = '';
  private _scrollTop = 0;
}

namespace Private {
  export function count(n: number): string {
    return n === 1 ? '1 process' : `${n} processes`;
  }

  /** One lane's label row: its role, and its current value or how it ended. */
  export class Row {
    constructor(key: string) {
      this.node = document.createElement('div');
      this.node.className = 'vramscope-TimelineLanes-lane';
      this.node.dataset.key = key;
      this._name = document.createElement('span');
      this._name.className = 'vramscope-TimelineLanes-name';
      this._value = document.createElement('span');
      this._value.className = 'vramscope-TimelineLanes-value';
      this.node.append(this._name, this._value);
    }

    readonly node: HTMLDivElement;

    /** Not shown yet. */
    get fresh(): boolean {
      return this._text === '';
    }

    update(lane: ILane, area: ILaneArea, measure: string): void {
      const value =
        lane.exit !== null
          ? lane.exit
          : lane.now === lane.now
            ? formatBytes(lane.now)
            : '';
      const what = measure === 'host' ? 'USS (RSS grey)' : 'device memory';
      const text = `${lane.role}|${value}|${area.left}|${area.width}|${what}`;
      if (text === this._text) {
        this._points(lane);
        return;
      }
      this._text = text;
      // cut with an ellipsis in a narrow panel: each says all of itself on hover
      this._name.textContent = this._name.title = lane.role;
      this._value.textContent = this._value.title = value;
      this.node.style.paddingLeft = `${area.left}px`;
      this.node.style.width = `${area.left + area.width}px`;
      this.node.title = `${lane.role}: ${what}${lane.exit !== null ? `; ${lane.exit}` : ''}`;
      this.node.classList.toggle('vramscope-mod-ended', lane.exit !== null);
      this.node.classList.toggle('vramscope-mod-oom', lane.oom);
      this._points(lane);
    }

    /** For tests: the points drawn and the highest value, per lane. */
    private _points(lane: ILane): void {
      this.node.dataset.points = String(lane.main.t.length);
      this.node.dataset.peak = String(lane.peak);
    }

    private _name: HTMLSpanElement;
    private _value: HTMLSpanElement;
    private _text = '';
  }

  /** One line of a lane: values from `base` (the lane's bottom) up, NaN a gap. */
  export function stroke(
    ctx: CanvasRenderingContext2D,
    p: { t: Float64Array; v: Float64Array },
    x0: number,
    sx: number,
    base: number,
    sy: number,
    color: string,
    width: number
  ): void {
    ctx.beginPath();
    ctx.strokeStyle = color;
    ctx.lineWidth = width;
    let pen = false;
    for (let i = 0; i < p.t.length; i++) {
      const v = p.v[i];
      if (v !== v) {
        pen = false;
        continue;
      }
      const x = (p.t[i] - x0) * sx;
      const y = base - v * sy;
      if (pen) {
        ctx.lineTo(x, y);
      } else {
        ctx.moveTo(x, y);
        pen = true;
      }
    }
    ctx.stroke();
  }
}

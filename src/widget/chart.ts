/**
 * The inline widget's chart: a compact live memory line with cell bands for one notebook's
 * `IMemorySession` — the same session, samples and cells the panel shows; it keeps no copy
 * of them beyond the timeline series it mirrors them into. Plain DOM + two canvases; redraws
 * are coalesced to one per animation frame. `dispose()` disconnects every signal and
 * releases the canvases.
 */
import { IDisposable } from '@lumino/disposable';
import { ISignal } from '@lumino/signaling';

import { formatBytes, Units } from '../format';
import { h } from '../panel/base';
import { drawLines, ILine } from '../timeline/lines';
import { TimelineSeries } from '../timeline/series';
import type { IMemorySession } from '../tokens';
import { computeFrame, IFrame } from './frame';

export class MemoryChart implements IDisposable {
  constructor(options: MemoryChart.IOptions) {
    this._options = options;
    this._findSession = options.findSession;
    this._sessionAdded = options.sessionAdded ?? null;
    this.node = h('div', 'vramscope-Widget');
    const head = h('div', 'vramscope-Widget-head');
    this._title = h('span', 'vramscope-Widget-title', 'vramscope');
    this._now = h('span', 'vramscope-Widget-now');
    head.append(this._title, this._now);
    this._plot = h('div', 'vramscope-Widget-plot');
    this._bands = h('canvas', 'vramscope-Widget-bands');
    this._lines = h('canvas', 'vramscope-Widget-lines');
    this._yMax = h('span', 'vramscope-Widget-ymax');
    this._span = h('span', 'vramscope-Widget-span');
    this._plot.append(this._bands, this._lines, this._yMax, this._span);
    this._message = h('div', 'vramscope-Widget-message');
    this.node.append(head, this._plot, this._message);
    this._applySize();
    this._sessionAdded?.connect(this._onSessionAdded, this);
    this._resize = new ResizeObserver(() => this.schedule());
    this._resize.observe(this._plot);
    this._attach(this._findSession());
    this.schedule();
  }

  readonly node: HTMLElement;

  get session(): IMemorySession | null {
    return this._session;
  }

  /** The last frame drawn (null: nothing to draw). */
  get frame(): IFrame | null {
    return this._frame;
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  /** Change what is shown (the widget model's traits). */
  setOptions(patch: Partial<MemoryChart.IDisplay>): void {
    this._options = { ...this._options, ...patch };
    this._applySize();
    this.schedule();
  }

  /** Redraw on the next animation frame (coalesced). */
  schedule(): void {
    if (this._disposed || this._pending !== null) {
      return;
    }
    this._pending = Private.raf(() => {
      this._pending = null;
      this.draw();
    });
  }

  /** Draw now. */
  draw(): void {
    if (this._disposed) {
      return;
    }
    if (!this._session) {
      this._attach(this._findSession());
    }
    const session = this._session;
    const width = this._plot.clientWidth;
    let frame: IFrame | null = null;
    if (session) {
      this._series.sync(session);
      frame = computeFrame(session, this._series, {
        device: this._options.device,
        window: this._options.window,
        buckets: Math.max(50, Math.round(width))
      });
    }
    this._frame = frame;
    this._render(session, frame, width);
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    if (this._pending !== null) {
      Private.cancel(this._pending);
      this._pending = null;
    }
    this._attach(null);
    this._sessionAdded?.disconnect(this._onSessionAdded, this);
    this._resize.disconnect();
    this._series.reset();
    for (const canvas of [this._bands, this._lines]) {
      canvas.width = 0;
      canvas.height = 0;
    }
    this.node.remove();
  }

  private _attach(session: IMemorySession | null): void {
    if (session === this._session) {
      return;
    }
    const old = this._session;
    if (old) {
      for (const signal of Private.signals(old)) {
        signal.disconnect(this.schedule, this);
      }
    }
    this._session = session;
    this._series.reset();
    if (session) {
      for (const signal of Private.signals(session)) {
        signal.connect(this.schedule, this);
      }
    }
  }

  private _onSessionAdded(): void {
    if (!this._session) {
      this.schedule();
    }
  }

  private _applySize(): void {
    this._plot.style.height = `${Math.max(40, this._options.height)}px`;
  }

  private _render(
    session: IMemorySession | null,
    frame: IFrame | null,
    width: number
  ): void {
    const units = this._options.units?.() ?? 'binary';
    const node = this.node;
    node.dataset.status = session ? session.status : 'no-session';
    if (!session || !frame) {
      this._message.textContent = !session
        ? 'vramscope: this output is not in a notebook that vramscope follows.'
        : session.status === 'connected'
          ? 'vramscope: waiting for memory samples…'
          : `vramscope: ${session.statusMessage || session.status}`;
      this._message.hidden = false;
      this._plot.hidden = true;
      delete node.dataset.newestT;
      delete node.dataset.newestBytes;
      this._now.textContent = '';
      return;
    }
    this._message.hidden = true;
    this._plot.hidden = false;
    node.dataset.device = frame.device;
    node.dataset.bands = String(frame.bands.length);
    this._title.textContent = `vramscope · ${frame.device}`;
    if (frame.newest) {
      node.dataset.newestT = String(frame.newest.t);
      node.dataset.newestBytes = String(frame.newest.bytes);
      this._now.textContent = `${formatBytes(frame.newest.bytes, { units })} in use`;
    }
    this._yMax.textContent = formatBytes(frame.yMax, { units });
    this._span.textContent = `last ${Math.round(frame.t1 - frame.t0)} s`;
    const height = Math.max(40, this._options.height);
    const area = {
      left: 0,
      top: 0,
      width: Math.max(1, width),
      height,
      x0: frame.t0,
      x1: frame.t1,
      y0: 0,
      y1: frame.yMax
    };
    const style = getComputedStyle(node);
    const color = (name: string, fallback: string) =>
      style.getPropertyValue(name).trim() || fallback;
    Private.drawBands(this._bands, frame, area, {
      done: color('--vramscope-widget-band', 'rgba(128, 128, 128, 0.18)'),
      running: color('--vramscope-widget-running', 'rgba(255, 160, 0, 0.25)'),
      text: color('--jp-ui-font-color2', '#666')
    });
    const lines: ILine[] = frame.lines.map(line => ({
      label: line.label,
      color:
        line.role === 'primary'
          ? color('--jp-brand-color1', '#1976d2')
          : color('--jp-ui-font-color3', '#999'),
      width: line.role === 'primary' ? 1.5 : 1,
      dash: line.role === 'primary' ? 'solid' : 'dot',
      x: line.t,
      y: line.v
    }));
    drawLines(this._lines, lines, area);
  }

  private _options: MemoryChart.IOptions;
  private _findSession: () => IMemorySession | null;
  private _sessionAdded: ISignal<unknown, unknown> | null;
  private _session: IMemorySession | null = null;
  private _series = new TimelineSeries();
  private _frame: IFrame | null = null;
  private _pending: number | null = null;
  private _disposed = false;
  private _resize: ResizeObserver;
  private _title: HTMLElement;
  private _now: HTMLElement;
  private _plot: HTMLElement;
  private _bands: HTMLCanvasElement;
  private _lines: HTMLCanvasElement;
  private _yMax: HTMLElement;
  private _span: HTMLElement;
  private _message: HTMLElement;
}

export namespace MemoryChart {
  /** What the widget model's traits choose. */
  export interface IDisplay {
    /** Device id ('' : the first accelerator, else the CPU). */
    device: string;
    /** Seconds shown, ending at the newest sample. */
    window: number;
    /** Plot height, CSS px. */
    height: number;
  }

  export interface IOptions extends IDisplay {
    /** The notebook's session, looked up again until found (e.g. after a page reload). */
    findSession: () => IMemorySession | null;
    /** Emitted when a session appears (the tracker's `sessionAdded`). */
    sessionAdded?: ISignal<unknown, unknown>;
    units?: () => Units;
  }
}

namespace Private {
  export function signals(
    session: IMemorySession
  ): ISignal<IMemorySession, unknown>[] {
    return [
      session.samplesAdded,
      session.cellRecorded,
      session.runningCellChanged,
      session.devicesChanged,
      session.statusChanged,
      session.changed
    ];
  }

  export function raf(callback: () => void): number {
    return typeof requestAnimationFrame === 'function'
      ? requestAnimationFrame(callback)
      : (setTimeout(callback, 16) as unknown as number);
  }

  export function cancel(handle: number): void {
    if (typeof cancelAnimationFrame === 'function') {
      cancelAnimationFrame(handle);
    }
    clearTimeout(handle);
  }

  /** Cell bands as shaded spans with their `[n]` label where wide enough. */
  export function drawBands(
    canvas: HTMLCanvasElement,
    frame: IFrame,
    area: { width: number; height: number },
    colors: { done: string; running: string; text: string }
  ): void {
    const ratio = window.devicePixelRatio || 1;
    const w = Math.round(area.width);
    const hgt = Math.round(area.height);
    canvas.style.width = `${w}px`;
    canvas.style.height = `${hgt}px`;
    canvas.width = Math.round(w * ratio);
    canvas.height = Math.round(hgt * ratio);
    const ctx = canvas.getContext('2d');
    if (!ctx) {
      return;
    }
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, w, hgt);
    const sx = w / (frame.t1 - frame.t0 || 1);
    ctx.font = '10px sans-serif';
    for (const band of frame.bands) {
      const x0 = Math.max(0, (band.start - frame.t0) * sx);
      const x1 = Math.min(w, (band.end - frame.t0) * sx);
      const bw = Math.max(1, x1 - x0);
      ctx.fillStyle = band.running ? colors.running : colors.done;
      ctx.fillRect(x0, 0, bw, hgt);
      if (bw >= 22) {
        ctx.fillStyle = colors.text;
        ctx.fillText(band.label, x0 + 2, 10);
      }
    }
  }
}

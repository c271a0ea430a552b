/**
 * The live memory timeline: one plot for the selected device, cells as bands, restarts as
 * vertical markers, peak-preserving downsampling of the visible window, throttled redraws.
 *
 * The widget puts its parts together: what is shown (./model.ts: the session's series and
 * lanes, the device, the window, follow or the user's range), the toolbar (./controls.ts), the
 * plot that draws it (./plot.ts) and draw scheduling (./schedule.ts). It renders only: the
 * toolbar's and the plot's input go to the model, and the model's changes redraw.
 */
import type { IThemeManager } from '@jupyterlab/apputils';
import { Message } from '@lumino/messaging';
import { ISignal, Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import type { Units } from '../format';
import type { IMemorySession } from '../tokens';
import { emptyText, TimelineControls } from './controls';
import type { ILine } from './lines';
import { TimelineModel } from './model';
import { TimelinePlot } from './plot';
import { DrawScheduler } from './schedule';
import { TimelineSeries } from './series';
import { toX } from './xaxis';

export { SAMPLE_RATE_CHOICES, WINDOW_CHOICES } from './controls';
export { fromX, toX } from './xaxis';

export class TimelineView extends Widget {
  constructor(options: TimelineView.IOptions = {}) {
    super();
    this.addClass('vramscope-Timeline');
    this._model = new TimelineModel({ windowSeconds: options.windowSeconds });
    this.node.setAttribute('data-sample-count', '0');
    const setSampleHz = options.setSampleHz;
    this._controls = new TimelineControls({
      onDevice: id => (this._model.deviceId = id),
      onWindow: seconds => this._model.chooseWindow(seconds),
      onFollowToggled: () => (this._model.follow = !this._model.follow),
      setSampleHz: setSampleHz
        ? (hz: number) => setSampleHz(hz, this._model.session)
        : null
    });
    this._scheduler = new DrawScheduler({
      render: () => this._plot.render(this._model),
      isVisible: () => this.isVisible,
      maxRedrawsPerSecond: options.maxRedrawsPerSecond
    });
    this._plot = new TimelinePlot({
      owner: this,
      schedule: () => this._scheduler.schedule(),
      onZoom: change => this._model.zoom(change),
      onCellClicked: id => this._onCellClicked(id)
    });

    this._empty = document.createElement('div');
    this._empty.className = 'vramscope-Timeline-empty';

    this._model.lanes.changed.connect(this._onLanesChanged, this);
    this._model.changed.connect(this._onModelChanged, this);
    this.node.append(
      this._controls.node,
      this._plot.legendRow,
      this._plot.stage,
      this._plot.lanesNode,
      this._empty
    );
    this._themeManager = options.themeManager ?? null;
    this._themeManager?.themeChanged.connect(this._onThemeChanged, this);
    this._syncControls();
    this._updateEmpty();
  }

  /** What the timeline shows (the session, the device, the window, the x-range). */
  get model(): TimelineModel {
    return this._model;
  }

  /** The session shown (null: none). */
  get session(): IMemorySession | null {
    return this._model.session;
  }

  /** The per-device series mirrored from the session (read-only use). */
  get series(): TimelineSeries {
    return this._model.series;
  }

  /** Emitted with the cell id when a cell band is clicked (after `revealCell`). */
  get cellClicked(): ISignal<this, string> {
    return this._cellClicked;
  }

  /** Show a session's timeline; `null` clears the view. */
  setSession(session: IMemorySession | null): void {
    this._model.setSession(session);
  }

  /** Whether the x-range tracks the latest samples. */
  get follow(): boolean {
    return this._model.follow;
  }
  set follow(value: boolean) {
    this._model.follow = value;
  }

  /** The followed window in seconds (`Infinity` = the whole history). */
  get windowSeconds(): number {
    return this._model.windowSeconds;
  }
  set windowSeconds(value: number) {
    this._model.windowSeconds = value;
  }

  /** The device shown; defaults to the first CUDA device, else MPS, else CPU. */
  get deviceId(): string | null {
    return this._model.deviceId;
  }
  set deviceId(id: string | null) {
    this._model.deviceId = id;
  }

  /** The byte units of the axis and tooltip (the units setting). */
  set units(value: Units) {
    this._model.units = value;
  }

  /** The rate shown when no kernel has reported its settings (e.g. the front-end setting). */
  set sampleHzFallback(hz: number) {
    this._controls.sampleHzFallback = hz;
  }

  /** The memory lines drawn now (plot units: x in local ms, y in the axis unit). */
  get lines(): ReadonlyArray<ILine> {
    return this._plot.lines;
  }

  /**
   * For benchmarks: plotly replots, live updates that only redrew the lines' canvas, and
   * updates skipped because nothing drawn changed.
   */
  get drawStats(): { replots: number; canvasOnly: number; skipped: number } {
    return this._plot.drawStats;
  }

  /** Re-read the `--jp-*` colours and redraw (call on theme change if no theme manager). */
  refreshTheme(): void {
    this._plot.refreshTheme();
    this._scheduler.schedule();
  }

  /** Draw now (bypassing the throttle); resolves when plotly has rendered. */
  async redraw(): Promise<void> {
    this._scheduler.cancel();
    await this._scheduler.drawNow();
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._model.dispose();
    this._themeManager?.themeChanged.disconnect(this._onThemeChanged, this);
    this._scheduler.dispose();
    this._plot.purge();
    super.dispose();
    Signal.clearData(this);
  }

  protected onResize(msg: Widget.ResizeMessage): void {
    super.onResize(msg);
    this._plot.resize();
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    this._plot.resize();
    if (this._scheduler.dirty) {
      this._scheduler.schedule();
    }
  }

  private _onModelChanged(
    _: TimelineModel,
    change: TimelineModel.Change
  ): void {
    if (change === 'data') {
      this.node.setAttribute(
        'data-sample-count',
        String(this._model.series.sampleCount)
      );
      // the oldest and newest sample in plot x units (local ms), for tests and tools
      const [first, last] = this._model.series.timeSpan();
      this.node.dataset.firstX = String(toX(first));
      this.node.dataset.lastX = String(toX(last));
    }
    this._syncControls();
    if (change === 'data') {
      this._updateEmpty();
    }
    this._scheduler.schedule();
  }

  private _onLanesChanged(): void {
    this._scheduler.schedule();
  }

  private _onThemeChanged(): void {
    this.refreshTheme();
  }

  private _onCellClicked(id: string): void {
    const session = this._model.session;
    if (session) {
      session.revealCell(id);
      this._cellClicked.emit(id);
    }
  }

  private _syncControls(): void {
    const model = this._model;
    this._controls.sync({
      devices: model.series.devices.map(d => d.id),
      device: model.deviceId,
      windowSeconds: model.windowSeconds,
      follow: model.follow,
      sampleCount: model.series.sampleCount,
      sampleHz: model.session?.settings?.sample_hz,
      hasSession: !!model.session
    });
  }

  private _updateEmpty(): void {
    const model = this._model;
    const text = emptyText(model.session, !!model.currentDevice());
    this._empty.textContent = text;
    this._empty.hidden = !text;
    this.node.classList.toggle('vramscope-mod-empty', !!text);
  }

  private _model: TimelineModel;
  private _controls: TimelineControls;
  private _scheduler: DrawScheduler;
  private _plot: TimelinePlot;
  private _empty: HTMLDivElement;
  private _themeManager: IThemeManager | null;
  private _cellClicked = new Signal<this, string>(this);
}

export namespace TimelineView {
  export interface IOptions {
    /** Redraw with the new `--jp-*` colours when the theme changes. */
    themeManager?: IThemeManager | null;
    /** Initial "follow live" window in seconds (default 300; Infinity = all). */
    windowSeconds?: number;
    /** Redraw throttle (default 10 per second). */
    maxRedrawsPerSecond?: number;
    /**
     * Change the sample rate (Hz, 0 = off) when the toolbar's rate picker is used; without
     * it the picker is hidden.
     */
    setSampleHz?: (
      hz: number,
      session: IMemorySession | null
    ) => void | Promise<void>;
  }
}

/**
 * The live memory timeline: one plot for the selected device, cells as bands, restarts as
 * vertical markers, peak-preserving downsampling of the visible window, throttled redraws.
 *
 * The widget ties together its parts: the toolbar (./controls.ts), the figure builder
 * (./figure.ts, ./range.ts), the canvas line layer (./layer.ts), legend and tooltip
 * (./hover.ts) and draw scheduling (./schedule.ts).
 */
import type { IThemeManager } from '@jupyterlab/apputils';
import { Message } from '@lumino/messaging';
import { ISignal, Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import type { IMemorySession } from '../tokens';
import { cloneFigure, deepEqual, IFigure, sameFigure } from './compare';
import { emptyText, TimelineControls } from './controls';
import { buildFigure, IBuiltFigure, PLOT_CONFIG } from './figure';
import { TimelineLegend, TimelineTooltip } from './hover';
import { LineLayer } from './layer';
import { ProcessLanes } from './lanes';
import { TimelineLanes } from './lanes-view';
import type { ILine } from './lines';
import { IPlotElement, loadPlotly, PlotlyModule } from './plotly';
import { visibleRange } from './range';
import { DrawScheduler } from './schedule';
import { DeviceSeries, TimelineSeries } from './series';
import { ITheme, readTheme } from './theme';
import { relayoutChange } from './xaxis';

export { SAMPLE_RATE_CHOICES, WINDOW_CHOICES } from './controls';
export { fromX, toX } from './xaxis';

const NO_COLORS = { main: '', muted: '', ended: '' };

export class TimelineView extends Widget {
  constructor(options: TimelineView.IOptions = {}) {
    super();
    this.addClass('vramscope-Timeline');
    this._windowSeconds = options.windowSeconds ?? 300;
    this.node.setAttribute('data-sample-count', '0');
    const setSampleHz = options.setSampleHz;
    this._controls = new TimelineControls({
      onDevice: id => (this.deviceId = id),
      onWindow: seconds => this._onWindowChosen(seconds),
      onFollowToggled: () => (this.follow = !this._follow),
      setSampleHz: setSampleHz
        ? (hz: number) => setSampleHz(hz, this._session)
        : null
    });
    this._scheduler = new DrawScheduler({
      render: () => this._render(),
      isVisible: () => this.isVisible,
      maxRedrawsPerSecond: options.maxRedrawsPerSecond
    });

    this._plot = document.createElement('div') as unknown as IPlotElement;
    this._plot.className = 'vramscope-Timeline-plot';
    const stage = document.createElement('div');
    stage.className = 'vramscope-Timeline-stage';
    stage.append(this._plot, this._layer.canvas, this._tooltip.node);
    stage.addEventListener('mousemove', this);
    stage.addEventListener('mouseleave', this);

    this._empty = document.createElement('div');
    this._empty.className = 'vramscope-Timeline-empty';

    // a lane per child process under the plot, shown and hidden from the legend row
    const legendRow = document.createElement('div');
    legendRow.className = 'vramscope-Timeline-legendRow';
    legendRow.append(this._legend.node, this._lanes.toggle);
    this._processLanes.changed.connect(() => this._scheduler.schedule());
    this.node.append(
      this._controls.node,
      legendRow,
      stage,
      this._lanes.node,
      this._empty
    );
    this._themeManager = options.themeManager ?? null;
    this._themeManager?.themeChanged.connect(this._onThemeChanged, this);
    this._syncControls();
    this._updateEmpty();
  }

  /** The session shown (null: none). */
  get session(): IMemorySession | null {
    return this._session;
  }

  /** The per-device series mirrored from the session (read-only use). */
  get series(): TimelineSeries {
    return this._series;
  }

  /** Emitted with the cell id when a cell band is clicked (after `revealCell`). */
  get cellClicked(): ISignal<this, string> {
    return this._cellClicked;
  }

  /** Show a session's timeline; `null` clears the view. */
  setSession(session: IMemorySession | null): void {
    if (session === this._session) {
      return;
    }
    const old = this._session;
    if (old) {
      old.samplesAdded.disconnect(this._onChanged, this);
      old.cellRecorded.disconnect(this._onChanged, this);
      old.changed.disconnect(this._onChanged, this);
      old.runningCellChanged.disconnect(this._onChanged, this);
      old.devicesChanged.disconnect(this._onChanged, this);
    }
    this._session = session;
    this._processLanes.setSession(session);
    this._series.reset();
    this._userRange = null;
    this._follow = true;
    if (session) {
      session.samplesAdded.connect(this._onChanged, this);
      session.cellRecorded.connect(this._onChanged, this);
      session.changed.connect(this._onChanged, this);
      session.runningCellChanged.connect(this._onChanged, this);
      session.devicesChanged.connect(this._onChanged, this);
      this._series.sync(session);
    }
    this._afterSync();
  }

  /** Whether the x-range tracks the latest samples. */
  get follow(): boolean {
    return this._follow;
  }
  set follow(value: boolean) {
    if (value === this._follow) {
      return;
    }
    this._follow = value;
    if (value) {
      this._userRange = null;
    }
    this._syncControls();
    this._scheduler.schedule();
  }

  /** The followed window in seconds (`Infinity` = the whole history). */
  get windowSeconds(): number {
    return this._windowSeconds;
  }
  set windowSeconds(value: number) {
    this._windowSeconds = value > 0 ? value : Infinity;
    this._syncControls();
    this._scheduler.schedule();
  }

  /** The device shown; defaults to the first CUDA device, else MPS, else CPU. */
  get deviceId(): string | null {
    return this._currentDevice()?.id ?? null;
  }
  set deviceId(id: string | null) {
    this._deviceId = id;
    this._syncControls();
    this._scheduler.schedule();
  }

  /** The rate shown when no kernel has reported its settings (e.g. the front-end setting). */
  set sampleHzFallback(hz: number) {
    this._controls.sampleHzFallback = hz;
  }

  /** The memory lines drawn now (plot units: x in local ms, y in the axis unit). */
  get lines(): ReadonlyArray<ILine> {
    return this._layer.lines;
  }

  /**
   * For benchmarks: plotly replots, live updates that only redrew the lines' canvas, and
   * updates skipped because nothing drawn changed.
   */
  get drawStats(): { replots: number; canvasOnly: number; skipped: number } {
    return {
      replots: this._replots,
      canvasOnly: this._canvasOnly,
      skipped: this._skipped
    };
  }

  /** Re-read the `--jp-*` colours and redraw (call on theme change if no theme manager). */
  refreshTheme(): void {
    this._theme = null;
    this._scheduler.schedule();
  }

  /** Draw now (bypassing the throttle); resolves when plotly has rendered. */
  async redraw(): Promise<void> {
    this._scheduler.cancel();
    await this._scheduler.drawNow();
  }

  handleEvent(event: Event): void {
    if (event.type === 'mousemove') {
      this._tooltip.show(
        event as MouseEvent,
        this._layer.canvas.parentElement,
        this._layer.area,
        this._layer.lines,
        this._unit
      );
    } else if (event.type === 'mouseleave') {
      this._tooltip.hide();
    }
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this.setSession(null);
    this._processLanes.dispose();
    this._themeManager?.themeChanged.disconnect(this._onThemeChanged, this);
    this._scheduler.dispose();
    if (this._plotly && this._plotted) {
      this._plotly.purge(this._plot);
    }
    this._plotted = false;
    super.dispose();
    Signal.clearData(this);
  }

  protected onResize(msg: Widget.ResizeMessage): void {
    super.onResize(msg);
    this._resizePlot();
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    this._resizePlot();
    if (this._scheduler.dirty) {
      this._scheduler.schedule();
    }
  }

  private _resizePlot(): void {
    this._width = 0;
    this._height = 0;
    this._lastFigure = null;
    if (this._plotly && this._plotted && this.isVisible) {
      void this._plotly.Plots.resize(this._plot);
      this._scheduler.schedule();
    }
  }

  private _onChanged(): void {
    if (this._session) {
      this._series.sync(this._session);
    }
    this._afterSync();
  }

  private _onThemeChanged(): void {
    this.refreshTheme();
  }

  private _onWindowChosen(seconds: number): void {
    this._windowSeconds = seconds;
    this._follow = true;
    this._userRange = null;
    this._syncControls();
    this._scheduler.schedule();
  }

  private _afterSync(): void {
    this.node.setAttribute(
      'data-sample-count',
      String(this._series.sampleCount)
    );
    this._syncControls();
    this._updateEmpty();
    this._scheduler.schedule();
  }

  private _currentDevice(): DeviceSeries | undefined {
    if (this._deviceId) {
      const d = this._series.device(this._deviceId);
      if (d) {
        return d;
      }
    }
    const devs = this._series.devices;
    return (
      devs.find(d => d.kind === 'cuda') ??
      devs.find(d => d.kind === 'mps') ??
      devs[0]
    );
  }

  private _syncControls(): void {
    this._controls.sync({
      devices: this._series.devices.map(d => d.id),
      device: this._currentDevice()?.id ?? null,
      windowSeconds: this._windowSeconds,
      follow: this._follow,
      sampleCount: this._series.sampleCount,
      sampleHz: this._session?.settings?.sample_hz,
      hasSession: !!this._session
    });
  }

  private _updateEmpty(): void {
    const text = emptyText(this._session, !!this._currentDevice());
    this._empty.textContent = text;
    this._empty.hidden = !text;
    this.node.classList.toggle('vramscope-mod-empty', !!text);
  }

  private async _render(): Promise<void> {
    const dev = this._currentDevice();
    if (!this._session || !dev || dev.length === 0) {
      if (this._plotly && this._plotted) {
        this._plotly.purge(this._plot);
        this._lastFigure = null;
        this._plotted = false;
      }
      this._layer.set([], null);
      this._lanes.update(this._processLanes, null, [0, 1], null, NO_COLORS);
      this._legend.update([]);
      this._tooltip.hide();
      this._layer.draw();
      return;
    }
    const Plotly = this._plotly ?? (await loadPlotly());
    if (this.isDisposed) {
      return;
    }
    this._plotly = Plotly;
    const { figure, lines, area, unit } = this._figure(dev);
    const { primary: main, band: muted, muted: ended } = this._theme!;
    const colors = { main, muted, ended };
    this._lanes.update(this._processLanes, dev.kind, this._range, area, colors);
    // Plotly replots only when its part (axes, ranges, cell bands, restarts) changed: the
    // window moves in whole pixels and the y scale in round steps. The lines are a canvas.
    const samePlot = this._plotted && sameFigure(this._lastFigure, figure);
    const sameLines =
      deepEqual(this._layer.lines, lines) && deepEqual(this._layer.area, area);
    if (samePlot && sameLines) {
      this._skipped++;
      return;
    }
    this._layer.set(lines, area);
    this._unit = unit;
    this._legend.update(lines);
    if (!samePlot) {
      this._lastFigure = figure;
      this._replots++;
      // plotly writes defaults into what it is given: keep `figure` pristine to compare
      const drawn = cloneFigure(figure);
      await Plotly.react(this._plot, drawn.data, drawn.layout, PLOT_CONFIG);
      if (!this._plotted) {
        this._plotted = true;
        this._plot.on('plotly_relayout', (e: any) => this._onRelayout(e));
        this._plot.on('plotly_relayouting', (e: any) => this._onRelayouting(e));
        this._plot.on('plotly_click', (e: any) => this._onPlotClick(e));
      }
    } else {
      this._canvasOnly++;
    }
    this._layer.draw();
  }

  private _figure(dev: DeviceSeries): IBuiltFigure {
    const session = this._session!;
    const theme = this._theme ?? (this._theme = readTheme(this.node));
    const span = this._series.timeSpan();
    const width = this._plotWidth();
    this._range = visibleRange({
      span,
      deviceSpan: [dev.firstTime, dev.lastTime],
      follow: this._follow,
      userRange: this._userRange,
      windowSeconds: this._windowSeconds,
      width
    });
    return buildFigure({
      device: dev,
      range: this._range,
      width,
      height: this._plotHeight(),
      theme,
      cells: session.cells,
      running: session.runningCell,
      epoch: session.epoch,
      newest: span[1],
      restarts: session.restarts,
      uirevision: this._uirevision
    });
  }

  /** The plot's height in px (cached like the width). */
  private _plotHeight(): number {
    if (!this._height) {
      this._height = this._plot.clientHeight;
    }
    return this._height || 240;
  }

  /** The plot area's width in px (cached: reading it forces a layout; reset on resize). */
  private _plotWidth(): number {
    if (!this._width) {
      this._width = this._plot.clientWidth;
    }
    return this._width || 800;
  }

  /** Pan and scroll-zoom in progress: move the lines with plotly's axes. */
  private _onRelayouting(e: Record<string, unknown>): void {
    const a = e?.['xaxis.range[0]'];
    const b = e?.['xaxis.range[1]'];
    if (typeof a === 'number' && typeof b === 'number') {
      this._layer.draw([a, b]);
    }
  }

  private _onRelayout(e: Record<string, unknown>): void {
    const change = relayoutChange(e);
    if (change === 'autorange') {
      // Double-click: show everything, not following. Plotly autoranged to its own traces
      // (not the lines, which are a canvas): a new uirevision makes it take our range.
      this._userRange = null;
      this._uirevision++;
    } else if (change) {
      this._userRange = change;
    } else {
      return;
    }
    this._follow = false;
    this._lastFigure = null; // draw plotly and the lines at exactly this range
    this._syncControls();
    this._scheduler.schedule();
  }

  private _onPlotClick(e: any): void {
    const point = e?.points?.find((p: any) => typeof p.customdata === 'string');
    const id = point?.customdata as string | undefined;
    if (id && this._session) {
      this._session.revealCell(id);
      this._cellClicked.emit(id);
    }
  }

  private _session: IMemorySession | null = null;
  private _series = new TimelineSeries();
  private _controls: TimelineControls;
  private _scheduler: DrawScheduler;
  private _layer = new LineLayer();
  private _processLanes = new ProcessLanes();
  private _lanes = new TimelineLanes(() => this._scheduler.schedule());
  private _range: [number, number] = [0, 1];
  private _legend = new TimelineLegend();
  private _tooltip = new TimelineTooltip();
  private _themeManager: IThemeManager | null;
  private _theme: ITheme | null = null;
  private _plotly: PlotlyModule | null = null;
  private _plotted = false;
  private _plot: IPlotElement;
  private _empty: HTMLDivElement;
  private _unit = 'B';
  private _width = 0;
  private _height = 0;
  private _uirevision = 0;
  private _lastFigure: IFigure | null = null;
  private _replots = 0;
  private _canvasOnly = 0;
  private _skipped = 0;
  private _follow = true;
  private _windowSeconds: number;
  private _userRange: [number, number] | null = null;
  private _deviceId: string | null = null;
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

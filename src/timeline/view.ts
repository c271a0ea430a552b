/**
 * The live memory timeline: one plot for the selected device, cells as bands, restarts as
 * vertical markers, peak-preserving downsampling of the visible window, throttled redraws.
 */
import type { IThemeManager } from '@jupyterlab/apputils';
import { Message } from '@lumino/messaging';
import { ISignal, Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import type { IMemorySession } from '../tokens';
import { formatDelta, formatDuration } from '../format';
import { axisUnit } from './bytes';
import { IPlotElement, loadPlotly, PlotlyModule } from './plotly';
import { drawLines, IArea, ILine, valuesAt } from './lines';
import { formatClock, timeTicks } from './ticks';
import {
  cellBands,
  DeviceSeries,
  ICellBand,
  ITraceSpec,
  runningBand,
  TimelineSeries
} from './series';

/** Window choices for "follow live" (seconds; Infinity = the whole history). */
export const WINDOW_CHOICES: ReadonlyArray<{ label: string; seconds: number }> =
  [
    { label: '1 min', seconds: 60 },
    { label: '5 min', seconds: 300 },
    { label: '30 min', seconds: 1800 },
    { label: '2 h', seconds: 7200 },
    { label: 'all', seconds: Infinity }
  ];

/** Sample-rate choices of the toolbar's rate picker (Hz; 0 = off). */
export const SAMPLE_RATE_CHOICES: ReadonlyArray<number> = [0, 1, 2, 5, 10, 20];

export class TimelineView extends Widget {
  constructor(options: TimelineView.IOptions = {}) {
    super();
    this.addClass('vramscope-Timeline');
    this._windowSeconds = options.windowSeconds ?? 300;
    this._minIntervalMs = 1000 / Math.max(1, options.maxRedrawsPerSecond ?? 10);
    this.node.setAttribute('data-sample-count', '0');

    const bar = document.createElement('div');
    bar.className = 'vramscope-Timeline-toolbar';

    this._deviceSelect = document.createElement('select');
    this._deviceSelect.className = 'vramscope-Timeline-device';
    this._deviceSelect.title = 'Device';
    this._deviceSelect.setAttribute('aria-label', 'Device');
    this._deviceSelect.addEventListener('change', this);

    this._windowSelect = document.createElement('select');
    this._windowSelect.className = 'vramscope-Timeline-window';
    this._windowSelect.title = 'Time window shown while following live';
    this._windowSelect.setAttribute('aria-label', 'Time window');
    for (const w of WINDOW_CHOICES) {
      const opt = document.createElement('option');
      opt.value = String(w.seconds);
      opt.textContent = w.label;
      this._windowSelect.appendChild(opt);
    }
    this._windowSelect.addEventListener('change', this);

    this._followButton = document.createElement('button');
    this._followButton.type = 'button';
    this._followButton.className = 'vramscope-Timeline-follow';
    this._followButton.textContent = 'Follow live';
    this._followButton.title =
      'Keep the time axis on the latest samples (zooming or panning turns this off)';
    this._followButton.addEventListener('click', this);

    this._status = document.createElement('span');
    this._status.className = 'vramscope-Timeline-status';

    this._setSampleHz = options.setSampleHz ?? null;
    this._rateSelect = document.createElement('select');
    this._rateSelect.className = 'vramscope-Timeline-rate';
    this._rateSelect.title =
      'Sample rate of the live timeline (the "sampleHz" setting)';
    this._rateSelect.setAttribute('aria-label', 'Sample rate');
    this._rateSelect.hidden = !this._setSampleHz;
    this._rateSelect.addEventListener('change', this);

    bar.append(
      this._deviceSelect,
      this._windowSelect,
      this._followButton,
      this._rateSelect,
      this._status
    );

    this._legend = document.createElement('div');
    this._legend.className = 'vramscope-Timeline-legend';
    this._plot = document.createElement('div') as unknown as IPlotElement;
    this._plot.className = 'vramscope-Timeline-plot';
    this._canvas = document.createElement('canvas');
    this._canvas.className = 'vramscope-Timeline-lines';
    this._canvas.setAttribute('aria-hidden', 'true');
    this._tooltip = document.createElement('div');
    this._tooltip.className = 'vramscope-Timeline-tooltip';
    this._tooltip.hidden = true;
    const stage = document.createElement('div');
    stage.className = 'vramscope-Timeline-stage';
    stage.append(this._plot, this._canvas, this._tooltip);
    stage.addEventListener('mousemove', this);
    stage.addEventListener('mouseleave', this);

    this._empty = document.createElement('div');
    this._empty.className = 'vramscope-Timeline-empty';

    this.node.append(bar, this._legend, stage, this._empty);
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
      old.samplesAdded.disconnect(this._onSamples, this);
      old.cellRecorded.disconnect(this._onChanged, this);
      old.changed.disconnect(this._onChanged, this);
      old.runningCellChanged.disconnect(this._onChanged, this);
      old.devicesChanged.disconnect(this._onChanged, this);
    }
    this._session = session;
    this._series.reset();
    this._userRange = null;
    this._follow = true;
    if (session) {
      session.samplesAdded.connect(this._onSamples, this);
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
    this._scheduleDraw();
  }

  /** The followed window in seconds (`Infinity` = the whole history). */
  get windowSeconds(): number {
    return this._windowSeconds;
  }
  set windowSeconds(value: number) {
    this._windowSeconds = value > 0 ? value : Infinity;
    this._syncControls();
    this._scheduleDraw();
  }

  /** The device shown; defaults to the first CUDA device, else MPS, else CPU. */
  get deviceId(): string | null {
    return this._currentDevice()?.id ?? null;
  }
  set deviceId(id: string | null) {
    this._deviceId = id;
    this._syncControls();
    this._scheduleDraw();
  }

  /** Re-read the `--jp-*` colours and redraw (call on theme change if no theme manager). */
  refreshTheme(): void {
    this._theme = null;
    this._scheduleDraw();
  }

  /** Draw now (bypassing the throttle); resolves when plotly has rendered. */
  async redraw(): Promise<void> {
    this._cancelScheduled();
    await this._drawNow();
  }

  handleEvent(event: Event): void {
    if (event.type === 'mousemove') {
      this._hover(event as MouseEvent);
      return;
    }
    if (event.type === 'mouseleave') {
      this._tooltip.hidden = true;
      return;
    }
    if (event.type === 'click' && event.currentTarget === this._followButton) {
      this.follow = !this._follow;
    } else if (event.currentTarget === this._deviceSelect) {
      this.deviceId = this._deviceSelect.value || null;
    } else if (event.currentTarget === this._rateSelect) {
      const hz = Number(this._rateSelect.value);
      if (this._setSampleHz && Number.isFinite(hz)) {
        this._pendingHz = hz;
        void Promise.resolve(this._setSampleHz(hz, this._session))
          .catch(reason =>
            console.error('vramscope: could not set the sample rate', reason)
          )
          .finally(() => {
            this._pendingHz = null;
            this._syncControls();
          });
      }
    } else if (event.currentTarget === this._windowSelect) {
      this._windowSeconds = Number(this._windowSelect.value);
      this._follow = true;
      this._userRange = null;
      this._syncControls();
      this._scheduleDraw();
    }
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this.setSession(null);
    this._themeManager?.themeChanged.disconnect(this._onThemeChanged, this);
    this._cancelScheduled();
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
    if (this._dirty) {
      this._scheduleDraw();
    }
  }

  private _resizePlot(): void {
    this._width = 0;
    this._height = 0;
    this._lastFigure = null;
    if (this._plotly && this._plotted && this.isVisible) {
      void this._plotly.Plots.resize(this._plot);
      this._scheduleDraw();
    }
  }

  private _onSamples(): void {
    if (this._session) {
      this._series.sync(this._session);
    }
    this._afterSync();
  }

  private _onChanged(): void {
    this._onSamples();
  }

  private _onThemeChanged(): void {
    this.refreshTheme();
  }

  private _afterSync(): void {
    this.node.setAttribute(
      'data-sample-count',
      String(this._series.sampleCount)
    );
    this._syncControls();
    this._updateEmpty();
    this._scheduleDraw();
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
    const devs = this._series.devices;
    const ids = devs.map(d => d.id).join('\n');
    if (ids !== this._deviceIds) {
      this._deviceIds = ids;
      this._deviceSelect.textContent = '';
      for (const d of devs) {
        const opt = document.createElement('option');
        opt.value = d.id;
        opt.textContent = d.id;
        this._deviceSelect.appendChild(opt);
      }
    }
    this._deviceSelect.hidden = devs.length < 2;
    const cur = this._currentDevice();
    if (cur) {
      this._deviceSelect.value = cur.id;
    }
    this._windowSelect.value = String(this._windowSeconds);
    this._syncRate();
    this._followButton.setAttribute('aria-pressed', String(this._follow));
    this._followButton.classList.toggle('vramscope-mod-active', this._follow);
    const n = this._series.sampleCount;
    this._status.textContent = n
      ? `${n.toLocaleString('en-US')} sample${n === 1 ? '' : 's'}`
      : '';
  }

  /** The rate picker shows the kernel's applied rate (or the one being set). */
  private _syncRate(): void {
    if (!this._setSampleHz) {
      return;
    }
    const hz =
      this._pendingHz ??
      this._session?.settings?.sample_hz ??
      this._sampleHzFallback;
    const choices = SAMPLE_RATE_CHOICES.includes(hz)
      ? SAMPLE_RATE_CHOICES
      : [...SAMPLE_RATE_CHOICES, hz].sort((a, b) => a - b);
    const key = choices.join(',');
    if (key !== this._rateChoices) {
      this._rateChoices = key;
      this._rateSelect.textContent = '';
      for (const c of choices) {
        const opt = document.createElement('option');
        opt.value = String(c);
        opt.textContent = c === 0 ? 'off' : `${c} Hz`;
        this._rateSelect.appendChild(opt);
      }
    }
    this._rateSelect.value = String(hz);
    this._rateSelect.disabled = !this._session;
  }

  /** The rate shown when no kernel has reported its settings (e.g. the front-end setting). */
  set sampleHzFallback(hz: number) {
    this._sampleHzFallback = hz;
    this._syncControls();
  }

  private _updateEmpty(): void {
    let text = '';
    if (!this._session) {
      text = 'No notebook selected.';
    } else if (!this._currentDevice()) {
      const hz = this._session.settings?.sample_hz;
      text =
        hz === 0
          ? 'Sampling is off (sample_hz = 0): no live timeline.'
          : 'No samples yet: they appear while the kernel runs.';
    }
    this._empty.textContent = text;
    this._empty.hidden = !text;
    this.node.classList.toggle('vramscope-mod-empty', !!text);
  }

  private _cancelScheduled(): void {
    if (this._timer) {
      clearTimeout(this._timer);
      this._timer = 0;
    }
    if (this._raf) {
      cancelAnimationFrame(this._raf);
      this._raf = 0;
    }
    this._scheduled = false;
  }

  /** At most one draw per `_minIntervalMs`, aligned on an animation frame. */
  private _scheduleDraw(): void {
    if (this._scheduled || this.isDisposed) {
      return;
    }
    this._scheduled = true;
    const wait = Math.max(
      0,
      this._minIntervalMs - (performance.now() - this._lastDrawAt)
    );
    this._timer = window.setTimeout(() => {
      this._timer = 0;
      this._raf = requestAnimationFrame(() => {
        this._raf = 0;
        this._scheduled = false;
        void this._drawNow();
      });
    }, wait);
  }

  private async _drawNow(): Promise<void> {
    if (this.isDisposed) {
      return;
    }
    if (!this.isVisible) {
      this._dirty = true;
      return;
    }
    if (this._drawing) {
      this._again = true;
      return this._drawing;
    }
    this._dirty = false;
    this._lastDrawAt = performance.now();
    this._drawing = this._render().finally(() => {
      this._drawing = null;
      if (this._again) {
        this._again = false;
        this._scheduleDraw();
      }
    });
    return this._drawing;
  }

  private async _render(): Promise<void> {
    const dev = this._currentDevice();
    if (!this._session || !dev || dev.length === 0) {
      if (this._plotly && this._plotted) {
        this._plotly.purge(this._plot);
        this._lastFigure = null;
        this._plotted = false;
      }
      this._lines = [];
      this._area = null;
      this._updateLegend([]);
      this._tooltip.hidden = true;
      this._drawCanvas();
      return;
    }
    const Plotly = this._plotly ?? (await loadPlotly());
    if (this.isDisposed) {
      return;
    }
    this._plotly = Plotly;
    const theme = this._theme ?? (this._theme = Private.readTheme(this.node));
    const { figure, lines, area, unit } = this._figure(dev, theme);
    // Plotly replots only when its part (axes, ranges, cell bands, restarts) changed: the
    // window moves in whole pixels and the y scale in round steps. The lines are a canvas.
    const samePlot =
      this._plotted && Private.sameFigure(this._lastFigure, figure);
    const sameLines =
      Private.deepEqual(this._lines, lines) &&
      Private.deepEqual(this._area, area);
    if (samePlot && sameLines) {
      this._skipped++;
      return;
    }
    this._lines = lines;
    this._area = area;
    this._unit = unit;
    this._updateLegend(lines);
    if (!samePlot) {
      this._lastFigure = figure;
      this._replots++;
      // plotly writes defaults into what it is given: keep `figure` pristine to compare
      const drawn = Private.cloneFigure(figure);
      await Plotly.react(this._plot, drawn.data, drawn.layout, Private.CONFIG);
      if (!this._plotted) {
        this._plotted = true;
        this._plot.on('plotly_relayout', (e: any) => this._onRelayout(e));
        this._plot.on('plotly_relayouting', (e: any) => this._onRelayouting(e));
        this._plot.on('plotly_click', (e: any) => this._onPlotClick(e));
      }
    } else {
      this._canvasOnly++;
    }
    this._drawCanvas();
  }

  /** Draw the lines over plotly's plot area (at `range`, plotly's while it is dragged). */
  private _drawCanvas(range?: [number, number]): void {
    const area = this._area;
    if (!area || !this._lines.length) {
      this._canvas.hidden = true;
      this._canvas.dataset.points = '0';
      return;
    }
    this._canvas.hidden = false;
    drawLines(
      this._canvas,
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
    this._canvas.dataset.points = String(points);
    this._canvas.dataset.lastX = String(last);
  }

  /** The memory lines drawn now (plot units: x in local ms, y in the axis unit). */
  get lines(): ReadonlyArray<ILine> {
    return this._lines;
  }

  private _updateLegend(lines: ReadonlyArray<ILine>): void {
    const key = lines.map(l => `${l.label}|${l.color}|${l.dash}`).join('\n');
    if (key === this._legendKey) {
      return;
    }
    this._legendKey = key;
    this._legend.textContent = '';
    for (const l of lines) {
      const item = document.createElement('span');
      item.className = 'vramscope-Timeline-legendItem';
      const swatch = document.createElement('span');
      swatch.className = 'vramscope-Timeline-swatch';
      swatch.style.borderTopColor = l.color;
      swatch.style.borderTopStyle =
        l.dash === 'solid' ? 'solid' : l.dash === 'dot' ? 'dotted' : 'dashed';
      item.append(swatch, l.label);
      this._legend.appendChild(item);
    }
  }

  /** A tooltip with every line's value at the pointer's time. */
  private _hover(event: MouseEvent): void {
    const area = this._area;
    const stage = this._canvas.parentElement;
    if (!area || !stage || !this._lines.length) {
      this._tooltip.hidden = true;
      return;
    }
    const box = stage.getBoundingClientRect();
    const mx = event.clientX - box.left - area.left;
    const my = event.clientY - box.top - area.top;
    if (mx < 0 || my < 0 || mx > area.width || my > area.height) {
      this._tooltip.hidden = true;
      return;
    }
    const at = area.x0 + (mx / area.width) * (area.x1 - area.x0);
    const values = valuesAt(this._lines, at).filter(v => v.y === v.y);
    if (!values.length) {
      this._tooltip.hidden = true;
      return;
    }
    this._tooltip.textContent = '';
    const head = document.createElement('div');
    head.className = 'vramscope-Timeline-tooltipTime';
    head.textContent = formatClock(values[0].x);
    this._tooltip.appendChild(head);
    for (const v of values) {
      const row = document.createElement('div');
      const swatch = document.createElement('span');
      swatch.className = 'vramscope-Timeline-swatch';
      swatch.style.borderTopColor = v.color;
      row.append(swatch, `${v.label}: ${v.y.toFixed(2)} ${this._unit}`);
      this._tooltip.appendChild(row);
    }
    this._tooltip.hidden = false;
    const left = area.left + mx + 12;
    this._tooltip.style.left = `${Math.min(left, Math.max(0, box.width - 160))}px`;
    this._tooltip.style.top = `${area.top + Math.max(0, my - 10)}px`;
  }

  /** Pan and scroll-zoom in progress: move the lines with plotly's axes. */
  private _onRelayouting(e: Record<string, unknown>): void {
    const a = e?.['xaxis.range[0]'];
    const b = e?.['xaxis.range[1]'];
    if (typeof a === 'number' && typeof b === 'number') {
      this._drawCanvas([a, b]);
    }
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

  /**
   * The visible window in kernel seconds. While following, its end moves in steps of a few
   * pixels' worth of time (always at or just after the latest sample), so that samples
   * arriving within the same step leave the window, the axes and the buckets unchanged.
   */
  private _range(dev: DeviceSeries): [number, number] {
    const [first, last] = this._series.timeSpan();
    const t1 = isNaN(last) ? dev.lastTime : last;
    const t0 = isNaN(first) ? dev.firstTime : first;
    if (!this._follow && this._userRange) {
      return this._userRange;
    }
    const px = Math.max(100, this._plotWidth() - Private.MARGIN_X);
    if (this._follow && isFinite(this._windowSeconds)) {
      // 4 px at a time: the axes (a plotly replot) move ~4x less often than the samples come
      const step = (Private.FOLLOW_STEP_PX * this._windowSeconds) / px;
      const end = Math.ceil(t1 / step) * step;
      return [end - this._windowSeconds, end];
    }
    if (!(t1 > t0)) {
      return [t0 - 1, t1 + 1];
    }
    // the whole history: a power-of-two step at least one pixel, stable while the span grows
    const step = Math.pow(2, Math.ceil(Math.log2((t1 - t0) / px)));
    return [t0, t0 + Math.max(step, Math.ceil((t1 - t0) / step) * step)];
  }

  private _figure(
    dev: DeviceSeries,
    theme: Private.ITheme
  ): { figure: Private.IFigure; lines: ILine[]; area: IArea; unit: string } {
    const [r0, r1] = this._range(dev);
    const width = this._plotWidth();
    const x = Private.xConverter(r0, r1);
    // ~1 bucket (its min and max: <= 2 points) per 4 px: every peak is still drawn exactly,
    // and plotly's replot cost grows with the points it draws.
    const buckets = Math.max(50, Math.min(500, Math.round(width / 4)));
    const drawn = dev.downsample(r0, r1, buckets);
    let ymax = 0;
    for (const { points } of drawn) {
      for (let i = 0; i < points.t.length; i++) {
        const t = points.t[i];
        if (t >= r0 && t <= r1 && points.v[i] > ymax) {
          ymax = points.v[i];
        }
      }
    }
    const { unit, scale } = axisUnit(ymax);
    // the y range in round steps (see niceCeil): it moves rarely
    const ytop = Private.niceCeil((((ymax || 1) * 1.1) / scale) * 1.0);
    // An empty trace on the main axes: plotly draws an axis only for a subplot with a trace
    // (the lines are on the canvas, the cell bands on the overlaid y2).
    const data: any[] = [
      {
        type: 'scatter',
        mode: 'lines',
        name: 'axes',
        x: [],
        y: [],
        hoverinfo: 'skip',
        showlegend: false
      }
    ];

    // Cell bands: one bar trace on a hidden [0, 1] axis spanning the plot height. A single
    // trace redraws far faster than one layout shape + annotation per cell (measured: ~60 ms
    // for 48 cells with shapes and annotations at every live update), and bars give per-cell
    // hover and click.
    const bands = cellBands(this._session!.cells, dev.id).filter(
      b => b.end >= r0 && b.start <= r1
    );
    const running = this._session!.runningCell;
    if (running && running.start <= r1) {
      // It grows with the samples, in steps of a few pixels: the band's end moves no more
      // often than the followed window does (each move is a plotly replot).
      const step =
        ((r1 - r0) * Private.FOLLOW_STEP_PX) /
        Math.max(100, width - Private.MARGIN_X);
      const newest = this._series.timeSpan()[1];
      const end = Number.isFinite(newest)
        ? Math.min(r1, Math.ceil(newest / step) * step)
        : running.start;
      if (end >= r0) {
        bands.push(runningBand(running, end, this._session!.epoch));
      }
    }
    const minWidth = (r1 - r0) * 0.004;
    const shapes: any[] = [];
    const annotations: any[] = [];
    if (bands.length) {
      data.push({
        type: 'bar',
        name: 'cells',
        x: bands.map(b =>
          x((b.start + Math.max(b.end, b.start + minWidth)) / 2)
        ),
        y: bands.map(() => 1),
        width: bands.map(b => Math.max(b.end - b.start, minWidth) * 1000),
        yaxis: 'y2',
        marker: {
          color: bands.map(b => (b.oom || !b.ok ? theme.error : theme.band)),
          opacity: bands.map((b, i) =>
            b.running ? 0.45 : b.oom || !b.ok ? 0.18 : i % 2 ? 0.22 : 0.32
          ),
          line: { width: 0 }
        },
        text: bands.map(b => b.label),
        textposition: 'inside',
        insidetextanchor: 'end',
        textangle: 0,
        textfont: { size: 10, color: theme.muted },
        hovertext: bands.map(b => Private.bandHover(b, dev.id)),
        hovertemplate: '%{hovertext}<extra></extra>',
        customdata: bands.map(b => b.cellId),
        showlegend: false,
        hoverlabel: { align: 'left' }
      });
    }

    const lines: ILine[] = [];
    for (const { trace, points } of drawn) {
      const xs = new Float64Array(points.t.length);
      const ys = new Float64Array(points.t.length);
      for (let i = 0; i < xs.length; i++) {
        xs[i] = x(points.t[i]);
        ys[i] = points.v[i] / scale;
      }
      const style = Private.lineStyle(trace.spec, theme);
      lines.push({
        label: trace.spec.label,
        color: style.color,
        width: style.width,
        dash: style.dash ?? 'solid',
        x: xs,
        y: ys
      });
    }

    for (const r of this._session!.restarts) {
      if (r >= r0 && r <= r1) {
        shapes.push({
          type: 'line',
          xref: 'x',
          yref: 'paper',
          x0: x(r),
          x1: x(r),
          y0: 0,
          y1: 1,
          line: { color: theme.warn, width: 1.5, dash: 'dot' }
        });
        annotations.push({
          x: x(r),
          xref: 'x',
          y: 0,
          yref: 'paper',
          yanchor: 'bottom',
          xanchor: 'left',
          text: 'restart',
          showarrow: false,
          font: { size: 10, color: theme.warn }
        });
      }
    }

    const axis = {
      gridcolor: theme.grid,
      linecolor: theme.grid,
      zerolinecolor: theme.grid,
      tickfont: { color: theme.muted }
    };
    const ticks = timeTicks(x(r0), x(r1), width - Private.MARGIN_X);
    const layout = {
      margin: {
        l: Private.MARGIN_L,
        r: Private.MARGIN_X - Private.MARGIN_L,
        t: Private.MARGIN_T,
        b: Private.MARGIN_B,
        autoexpand: false
      },
      paper_bgcolor: theme.background,
      plot_bgcolor: theme.background,
      font: { family: theme.font, size: 11, color: theme.text },
      showlegend: false,
      hovermode: 'closest',
      hoverlabel: { bgcolor: theme.background, font: { color: theme.text } },
      dragmode: 'zoom',
      uirevision: `vramscope-timeline-${this._uirevision}`,
      // A linear axis in local ms with clock-time ticks (./ticks.ts): a date axis would parse
      // every x value through a string at each redraw.
      xaxis: {
        ...axis,
        type: 'linear',
        range: [x(r0), x(r1)],
        tickmode: 'array',
        tickvals: ticks.tickvals,
        ticktext: ticks.ticktext
      },
      yaxis: {
        ...axis,
        title: { text: unit, font: { size: 10, color: theme.muted } },
        range: [0, ytop],
        fixedrange: true
      },
      uniformtext: { mode: 'hide', minsize: 9 },
      yaxis2: {
        overlaying: 'y',
        range: [0, 1],
        visible: false,
        fixedrange: true
      },
      shapes,
      annotations
    };
    const area: IArea = {
      left: Private.MARGIN_L,
      top: Private.MARGIN_T,
      width: Math.max(1, width - Private.MARGIN_X),
      height: Math.max(
        1,
        this._plotHeight() - Private.MARGIN_T - Private.MARGIN_B
      ),
      x0: x(r0),
      x1: x(r1),
      y0: 0,
      y1: ytop
    };
    return { figure: { data, layout }, lines, area, unit };
  }

  private _onRelayout(e: Record<string, unknown>): void {
    if (!e) {
      return;
    }
    let a = e['xaxis.range[0]'];
    let b = e['xaxis.range[1]'];
    const both = e['xaxis.range'];
    if (Array.isArray(both)) {
      [a, b] = both;
    }
    if (a !== undefined && b !== undefined) {
      const t0 = fromX(a);
      const t1 = fromX(b);
      if (isFinite(t0) && isFinite(t1) && t1 > t0) {
        this._userRange = [t0, t1];
        this._follow = false;
        this._lastFigure = null; // draw plotly and the lines at exactly this range
        this._syncControls();
        this._scheduleDraw();
      }
    } else if (e['xaxis.autorange']) {
      // Double-click: show everything, not following. Plotly autoranged to its own traces
      // (not the lines, which are a canvas): a new uirevision makes it take our range.
      this._userRange = null;
      this._follow = false;
      this._uirevision++;
      this._lastFigure = null;
      this._syncControls();
      this._scheduleDraw();
    }
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
  private _themeManager: IThemeManager | null;
  private _theme: Private.ITheme | null = null;
  private _plotly: PlotlyModule | null = null;
  private _plotted = false;
  private _canvas: HTMLCanvasElement;
  private _tooltip: HTMLDivElement;
  private _legend: HTMLDivElement;
  private _legendKey = '';
  private _lines: ILine[] = [];
  private _area: IArea | null = null;
  private _unit = 'B';
  private _height = 0;
  private _canvasOnly = 0;
  private _uirevision = 0;
  private _lastFigure: Private.IFigure | null = null;
  private _width = 0;
  private _replots = 0;
  private _skipped = 0;
  private _follow = true;
  private _windowSeconds: number;
  private _userRange: [number, number] | null = null;
  private _deviceId: string | null = null;
  private _deviceIds = '';
  private _minIntervalMs: number;
  private _lastDrawAt = -Infinity;
  private _scheduled = false;
  private _timer = 0;
  private _raf = 0;
  private _drawing: Promise<void> | null = null;
  private _again = false;
  private _dirty = false;
  private _plot: IPlotElement;
  private _empty: HTMLDivElement;
  private _status: HTMLSpanElement;
  private _deviceSelect: HTMLSelectElement;
  private _windowSelect: HTMLSelectElement;
  private _followButton: HTMLButtonElement;
  private _rateSelect: HTMLSelectElement;
  private _rateChoices = '';
  private _pendingHz: number | null = null;
  private _sampleHzFallback = 10;
  private _setSampleHz: TimelineView.IOptions['setSampleHz'] | null;
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

/**
 * Plotly shows date axes in UTC; shift kernel seconds so the axis reads local wall-clock
 * time. Exported for tests.
 */
export function toX(t: number): number {
  return t * 1000 - Private.tzOffsetMs(t);
}

/** Inverse of `toX`; accepts plotly's range values (numbers or date strings). */
export function fromX(x: unknown): number {
  let ms: number;
  if (typeof x === 'number') {
    ms = x;
  } else if (typeof x === 'string') {
    const s = x.trim().replace(' ', 'T');
    ms = Date.parse(s.includes('T') ? `${s}Z` : `${s}T00:00:00Z`);
  } else {
    return NaN;
  }
  const approx = ms / 1000;
  return (ms + Private.tzOffsetMs(approx)) / 1000;
}

namespace Private {
  /** The plot's margins (fixed: the lines' canvas is laid over the area they leave), px. */
  export const MARGIN_L = 56;
  export const MARGIN_X = MARGIN_L + 12;
  export const MARGIN_T = 10;
  /** While following live, the window moves by this many pixels at a time. */
  export const FOLLOW_STEP_PX = 4;
  export const MARGIN_B = 32;

  /** Plotly's config (one object: plotly compares it between calls). */
  export const CONFIG: any = {
    displaylogo: false,
    responsive: false,
    scrollZoom: true,
    // toImage would export plotly's part only (the lines are a canvas)
    modeBarButtonsToRemove: ['select2d', 'lasso2d', 'autoScale2d', 'toImage']
  };

  /** The smallest round value (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 x 10^k) at or above `x`. */
  export function niceCeil(x: number): number {
    if (!(x > 0)) {
      return 1;
    }
    const p = Math.pow(10, Math.floor(Math.log10(x)));
    for (const m of [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) {
      if (m * p >= x * (1 - 1e-12)) {
        return m * p;
      }
    }
    return 10 * p;
  }

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
      if (
        !(ArrayBuffer.isView(b) || Array.isArray(b)) ||
        x.length !== y.length
      ) {
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

  export function tzOffsetMs(t: number): number {
    return new Date(t * 1000).getTimezoneOffset() * 60000;
  }

  /**
   * `toX` for one figure: a constant offset when the window has one (no `Date` per point),
   * per point across a daylight-saving change.
   */
  export function xConverter(r0: number, r1: number): (t: number) => number {
    const offset = tzOffsetMs(r0);
    if (offset !== tzOffsetMs(r1)) {
      return toX;
    }
    return (t: number) => t * 1000 - offset;
  }

  export interface ITheme {
    background: string;
    text: string;
    muted: string;
    grid: string;
    font: string;
    primary: string;
    secondary: string;
    peak: string;
    device: string;
    band: string;
    warn: string;
    error: string;
  }

  export function readTheme(node: HTMLElement): ITheme {
    const style = getComputedStyle(node);
    const v = (name: string, fallback: string) =>
      style.getPropertyValue(name).trim() || fallback;
    return {
      background: v('--jp-layout-color1', '#ffffff'),
      text: v('--jp-ui-font-color1', '#212121'),
      muted: v('--jp-ui-font-color2', '#616161'),
      grid: v('--jp-border-color2', '#e0e0e0'),
      font: v('--jp-ui-font-family', 'system-ui, sans-serif'),
      primary: v('--jp-brand-color1', '#1976d2'),
      secondary: v('--jp-warn-color1', '#f57c00'),
      peak: v('--jp-error-color1', '#d32f2f'),
      device: v('--jp-ui-font-color2', '#616161'),
      band: v('--jp-layout-color3', '#bdbdbd'),
      warn: v('--jp-warn-color0', '#e65100'),
      error: v('--jp-error-color1', '#d32f2f')
    };
  }

  export function lineStyle(spec: ITraceSpec, theme: ITheme): any {
    switch (spec.role) {
      case 'primary':
        return { color: theme.primary, width: 2 };
      case 'secondary':
        return { color: theme.secondary, width: 1.5 };
      case 'peak':
        return { color: theme.peak, width: 1, dash: 'dot' };
      default:
        return { color: theme.device, width: 1, dash: 'dash' };
    }
  }

  export function bandHover(b: ICellBand, deviceId: string): string {
    const lines = [
      `<b>${escape(b.label)}</b> ${escape(b.codeHead || '(empty)')}`,
      b.running
        ? `running for ${formatDuration(b.end - b.start)}`
        : formatDuration(b.end - b.start)
    ];
    if (b.deltaBytes !== null) {
      lines.push(
        `${escape(deviceId)}: Δ ${formatDelta(b.deltaBytes)}, peak ${formatDelta(b.peakDeltaBytes ?? 0)}`
      );
    }
    if (b.oom) {
      lines.push('<b>out of memory</b>');
    } else if (!b.ok) {
      lines.push(`error: ${escape(b.errorType ?? 'unknown')}`);
    }
    return lines.join('<br>');
  }

  function escape(s: string): string {
    return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  }
}

/**
 * `TimelinePlot`: draws a `TimelineModel`. The plotly figure (axes, cell bands, restarts;
 * replotted only when it changed), the memory lines on a canvas above it (./layer.ts), the
 * legend and hover tooltip (./hover.ts) and the process lanes (./lanes-view.ts). It only
 * renders: what the user does to the plot (pan, zoom, a click on a cell band) goes back to
 * its owner through `onZoom` and `onCellClicked`.
 */
import type { Widget } from '@lumino/widgets';

import { cloneFigure, deepEqual, IFigure, sameFigure } from './compare';
import { buildFigure, IBandHit, IBuiltFigure, PLOT_CONFIG } from './figure';
import { TimelineLegend, TimelineTooltip } from './hover';
import { LineLayer } from './layer';
import { TimelineLanes } from './lanes-view';
import type { ILine } from './lines';
import type { TimelineModel } from './model';
import { IPlotElement, loadPlotly, PlotlyModule } from './plotly';
import { visibleRange } from './range';
import type { DeviceSeries } from './series';
import { ITheme, readTheme } from './theme';
import { relayoutChange } from './xaxis';

const NO_COLORS = { main: '', muted: '', ended: '' };

export class TimelinePlot implements EventListenerObject {
  constructor(options: TimelinePlot.IOptions) {
    this._owner = options.owner;
    this._schedule = options.schedule;
    this._onZoom = options.onZoom;
    this._onCellClicked = options.onCellClicked;
    this._lanes = new TimelineLanes(() => this._schedule());

    this._plot = document.createElement('div') as unknown as IPlotElement;
    this._plot.className = 'vramscope-Timeline-plot';
    this.stage = document.createElement('div');
    this.stage.className = 'vramscope-Timeline-stage';
    this.stage.append(this._plot, this._layer.canvas, this._tooltip.node);
    // capture: plotly's drag layer handles the pointer itself and may stop it bubbling
    this.stage.addEventListener('mousemove', this, true);
    this.stage.addEventListener('mouseleave', this);

    // a lane per child process under the plot, shown and hidden from the legend row
    this.legendRow = document.createElement('div');
    this.legendRow.className = 'vramscope-Timeline-legendRow';
    this.legendRow.append(this._legend.node, this._lanes.toggle);

    // In the side panel the plot's height is what its pane leaves it, which changes without
    // a Lumino resize too (the lanes shown, hidden or grown below it): measure and redraw.
    if (typeof ResizeObserver !== 'undefined') {
      this._sizes = new ResizeObserver(entries => {
        const height = Math.round(
          entries[entries.length - 1].contentRect.height
        );
        const seen = this._seenHeight;
        this._seenHeight = height;
        if (seen >= 0 && height !== seen && height > 0) {
          this.resize();
        }
      });
      this._sizes.observe(this._plot);
    }
  }

  /** The legend and the lanes' toggle (above the plot). */
  readonly legendRow: HTMLDivElement;
  /** The plot, the lines' canvas and the tooltip. */
  readonly stage: HTMLDivElement;

  /** The process lanes (under the plot). */
  get lanesNode(): HTMLElement {
    return this._lanes.node;
  }

  /** The memory lines drawn now (plot units: x in local ms, y in the axis unit). */
  get lines(): ReadonlyArray<ILine> {
    return this._layer.lines;
  }

  /** Plotly replots, updates that only redrew the canvas, updates that changed nothing. */
  get drawStats(): { replots: number; canvasOnly: number; skipped: number } {
    return {
      replots: this._replots,
      canvasOnly: this._canvasOnly,
      skipped: this._skipped
    };
  }

  /** Re-read the `--jp-*` colours at the next draw. */
  refreshTheme(): void {
    this._theme = null;
  }

  /** The plot's size changed or it was shown: measure again and redraw. */
  resize(): void {
    this._width = 0;
    this._height = 0;
    this._lastFigure = null;
    if (this._plotly && this._plotted && this._owner.isVisible) {
      void this._plotly.Plots.resize(this._plot);
      this._schedule();
    }
  }

  /** Release plotly's hold on the plot element. */
  purge(): void {
    this._sizes?.disconnect();
    this._sizes = null;
    if (this._plotly && this._plotted) {
      this._plotly.purge(this._plot);
    }
    this._plotted = false;
  }

  handleEvent(event: Event): void {
    if (event.type === 'mousemove') {
      this._tooltip.show(
        event as MouseEvent,
        this._layer.canvas.parentElement,
        this._layer.area,
        this._layer.lines,
        this._unit,
        this._bands
      );
    } else if (event.type === 'mouseleave') {
      this._tooltip.hide();
    }
  }

  /** Draw what `model` shows now; resolves when plotly has rendered. */
  async render(model: TimelineModel): Promise<void> {
    const dev = model.currentDevice();
    if (!model.session || !dev || dev.length === 0) {
      if (this._plotly && this._plotted) {
        this._plotly.purge(this._plot);
        this._lastFigure = null;
        this._plotted = false;
      }
      this._layer.set([], null);
      this._lanes.update(model.lanes, null, [0, 1], null, NO_COLORS);
      this._legend.update([]);
      this._tooltip.hide();
      this._layer.draw();
      return;
    }
    const Plotly = this._plotly ?? (await loadPlotly());
    if (this._owner.isDisposed) {
      return;
    }
    this._plotly = Plotly;
    const { figure, lines, area, unit, bands } = this._figure(model, dev);
    const { primary: main, band: muted, muted: ended } = this._theme!;
    const colors = { main, muted, ended };
    this._lanes.update(model.lanes, dev.kind, this._range, area, colors);
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
    this._bands = bands;
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

  private _figure(model: TimelineModel, dev: DeviceSeries): IBuiltFigure {
    const session = model.session!;
    const theme = this._theme ?? (this._theme = readTheme(this._owner.node));
    const span = model.series.timeSpan();
    const width = this._plotWidth();
    this._range = visibleRange({
      span,
      deviceSpan: [dev.firstTime, dev.lastTime],
      follow: model.follow,
      userRange: model.userRange,
      windowSeconds: model.windowSeconds,
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
      uirevision: model.uirevision,
      units: model.units
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

  /** Pan or zoom done, or a double-click: the owner moves the range. */
  private _onRelayout(e: Record<string, unknown>): void {
    const change = relayoutChange(e);
    if (!change) {
      return;
    }
    this._lastFigure = null; // draw plotly and the lines at exactly this range
    this._onZoom(change);
  }

  private _onPlotClick(e: any): void {
    const point = e?.points?.find((p: any) => typeof p.customdata === 'string');
    const id = point?.customdata as string | undefined;
    if (id) {
      this._onCellClicked(id);
    }
  }

  private _owner: Widget;
  private _schedule: () => void;
  private _onZoom: (change: [number, number] | 'autorange') => void;
  private _onCellClicked: (cellId: string) => void;
  private _layer = new LineLayer();
  private _lanes: TimelineLanes;
  private _range: [number, number] = [0, 1];
  private _legend = new TimelineLegend();
  private _tooltip = new TimelineTooltip();
  private _theme: ITheme | null = null;
  private _plotly: PlotlyModule | null = null;
  private _plotted = false;
  private _plot: IPlotElement;
  private _unit = 'B';
  private _bands: IBandHit[] = [];
  private _width = 0;
  private _height = 0;
  private _sizes: ResizeObserver | null = null;
  private _seenHeight = -1;
  private _lastFigure: IFigure | null = null;
  private _replots = 0;
  private _canvasOnly = 0;
  private _skipped = 0;
}

export namespace TimelinePlot {
  export interface IOptions {
    /** The widget the plot is drawn in (its node's theme, visibility, disposal). */
    owner: Widget;
    /** Ask for a redraw (throttled by the owner). */
    schedule: () => void;
    /** The user panned or zoomed (a range in kernel seconds) or double-clicked (`autorange`). */
    onZoom: (change: [number, number] | 'autorange') => void;
    /** A cell band was clicked. */
    onCellClicked: (cellId: string) => void;
  }
}

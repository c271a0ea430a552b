/**
 * The timeline's plotly figure (axes, cell bands, restart markers) and the memory lines drawn
 * over it on a canvas, built from the visible window of one device's series. No DOM.
 */
import type { ICellEntry, IRunningCell } from '../tokens';
import { formatDelta, formatDuration, Units } from '../format';
import { axisUnit } from './bytes';
import type { IFigure } from './compare';
import type { IArea, ILine } from './lines';
import { cellBands, DeviceSeries, ICellBand, runningBand } from './series';
import { ITheme, lineStyle } from './theme';
import { timeTicks } from './ticks';
import { xConverter } from './xaxis';

/** The plot's margins (fixed: the lines' canvas is laid over the area they leave), px. */
export const MARGIN_L = 56;
export const MARGIN_X = MARGIN_L + 12;
/**
 * Tall enough for plotly's mode bar (24 px at the top right, shown on hover) to sit above the
 * plot area instead of over the newest cell band's label, which is drawn at the band's top.
 */
export const MARGIN_T = 28;
export const MARGIN_B = 32;
/** While following live, the window moves by this many pixels at a time. */
export const FOLLOW_STEP_PX = 4;

/** Plotly's config (one object: plotly compares it between calls). */
export const PLOT_CONFIG: any = {
  displaylogo: false,
  responsive: false,
  scrollZoom: true,
  // toImage would export plotly's part only (the lines are a canvas)
  modeBarButtonsToRemove: ['select2d', 'lasso2d', 'autoScale2d', 'toImage'],
  // plotly's "Double-click to zoom back out" notice would sit over the toolbar
  showTips: false,
  // a double-click autoranges (the model then shows all data), never resets to the first
  // range plotly was given (the first second of the session)
  doubleClick: 'autosize',
  // plotly times the two clicks of a double-click by when its handlers run: while a live
  // update renders between them (a busy page, a slow machine), 300 ms was missed
  doubleClickDelay: 700
};

/** What one figure is built from. */
export interface IFigureInput {
  device: DeviceSeries;
  /** The visible window, kernel seconds. */
  range: [number, number];
  /** The plot's size in px. */
  width: number;
  height: number;
  theme: ITheme;
  cells: ReadonlyArray<ICellEntry>;
  running: IRunningCell | null;
  epoch: number;
  /** The newest sample's time over all devices (NaN: none). */
  newest: number;
  restarts: ReadonlyArray<number>;
  /** Plotly's uirevision counter (a new one makes plotly take our ranges). */
  uirevision: number;
  /** The byte units setting (default binary). */
  units?: Units;
}

/** A cell band as the tooltip finds it: its span in plot x units and its description. */
export interface IBandHit {
  x0: number;
  x1: number;
  lines: string[];
}

/** A built figure: plotly's part, the canvas lines, the plot area, the y unit, the bands. */
export interface IBuiltFigure {
  figure: IFigure;
  lines: ILine[];
  area: IArea;
  unit: string;
  bands: IBandHit[];
}

export function buildFigure(input: IFigureInput): IBuiltFigure {
  const { device: dev, theme, width } = input;
  const [r0, r1] = input.range;
  const x = xConverter(r0, r1);
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
  const { unit, scale } = axisUnit(ymax, input.units);
  // the y range in round steps (see niceCeil): it moves rarely
  const ytop = niceCeil((((ymax || 1) * 1.1) / scale) * 1.0);
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
  const bands = visibleBands(input);
  if (bands.length) {
    data.push(bandTrace(bands, input, x));
  }

  const lines: ILine[] = [];
  for (const { trace, points } of drawn) {
    const xs = new Float64Array(points.t.length);
    const ys = new Float64Array(points.t.length);
    for (let i = 0; i < xs.length; i++) {
      xs[i] = x(points.t[i]);
      ys[i] = points.v[i] / scale;
    }
    const style = lineStyle(trace.spec, theme);
    lines.push({
      label: trace.spec.label,
      color: style.color,
      width: style.width,
      dash: style.dash ?? 'solid',
      x: xs,
      y: ys
    });
  }

  const { shapes, annotations } = restartMarkers(input, x);
  const axis = {
    gridcolor: theme.grid,
    linecolor: theme.grid,
    zerolinecolor: theme.grid,
    tickfont: { color: theme.muted }
  };
  const ticks = timeTicks(x(r0), x(r1), width - MARGIN_X);
  const layout = {
    margin: {
      l: MARGIN_L,
      r: MARGIN_X - MARGIN_L,
      t: MARGIN_T,
      b: MARGIN_B,
      autoexpand: false
    },
    paper_bgcolor: theme.background,
    plot_bgcolor: theme.background,
    font: { family: theme.font, size: 11, color: theme.text },
    showlegend: false,
    hovermode: 'closest',
    hoverlabel: { bgcolor: theme.background, font: { color: theme.text } },
    modebar: {
      bgcolor: 'rgba(0,0,0,0)',
      color: theme.muted,
      activecolor: theme.text
    },
    dragmode: 'zoom',
    uirevision: `vramscope-timeline-${input.uirevision}`,
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
    left: MARGIN_L,
    top: MARGIN_T,
    width: Math.max(1, width - MARGIN_X),
    height: Math.max(1, input.height - MARGIN_T - MARGIN_B),
    x0: x(r0),
    x1: x(r1),
    y0: 0,
    y1: ytop
  };
  const hits = bands.map(b => ({
    x0: x(b.start),
    x1: x(Math.max(b.end, b.start)),
    lines: bandLines(b, dev.id, input.units)
  }));
  return { figure: { data, layout }, lines, area, unit, bands: hits };
}

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

/** The cell bands in the window, the running cell's included. */
function visibleBands(input: IFigureInput): ICellBand[] {
  const [r0, r1] = input.range;
  const bands = cellBands(input.cells, input.device.id).filter(
    b => b.end >= r0 && b.start <= r1
  );
  const running = input.running;
  if (running && running.start <= r1) {
    // It grows with the samples, in steps of a few pixels: the band's end moves no more
    // often than the followed window does (each move is a plotly replot).
    const step =
      ((r1 - r0) * FOLLOW_STEP_PX) / Math.max(100, input.width - MARGIN_X);
    const newest = input.newest;
    const end = Number.isFinite(newest)
      ? Math.min(r1, Math.ceil(newest / step) * step)
      : running.start;
    if (end >= r0) {
      bands.push(runningBand(running, end, input.epoch));
    }
  }
  return bands;
}

/**
 * Cell bands: one bar trace on a hidden [0, 1] axis spanning the plot height. A single trace
 * redraws far faster than one layout shape + annotation per cell (measured: ~60 ms for 48
 * cells with shapes and annotations at every live update), and bars give per-cell hover and
 * click.
 */
function bandTrace(
  bands: ICellBand[],
  input: IFigureInput,
  x: (t: number) => number
): any {
  const { theme } = input;
  const minWidth = (input.range[1] - input.range[0]) * 0.004;
  return {
    type: 'bar',
    name: 'cells',
    x: bands.map(b => x((b.start + Math.max(b.end, b.start + minWidth)) / 2)),
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
    hovertext: bands.map(b => bandHover(b, input.device.id, input.units)),
    // plotly draws no label (it cannot keep one inside a narrow panel): the band is
    // described in the timeline's own tooltip (./hover.ts), clamped to the plot; hover and
    // click events still fire
    hoverinfo: 'none',
    customdata: bands.map(b => b.cellId),
    showlegend: false
  };
}

/** A dotted vertical line and a label at each kernel restart in the window. */
function restartMarkers(
  input: IFigureInput,
  x: (t: number) => number
): { shapes: any[]; annotations: any[] } {
  const [r0, r1] = input.range;
  const { theme } = input;
  const shapes: any[] = [];
  const annotations: any[] = [];
  for (const r of input.restarts) {
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
  return { shapes, annotations };
}

/** A cell band's description, line by line (plain text): head, duration, figures, error. */
export function bandLines(
  b: ICellBand,
  deviceId: string,
  units: Units = 'binary'
): string[] {
  const lines = [
    `${b.label} ${b.codeHead || '(empty)'}`,
    b.running
      ? `running for ${formatDuration(b.end - b.start)}`
      : formatDuration(b.end - b.start)
  ];
  if (b.deltaBytes !== null) {
    lines.push(
      `${deviceId}: Δ ${formatDelta(b.deltaBytes, units)}, peak ${formatDelta(b.peakDeltaBytes ?? 0, units)}`
    );
  }
  if (b.oom) {
    lines.push('out of memory');
  } else if (!b.ok) {
    lines.push(`error: ${b.errorType ?? 'unknown'}`);
  }
  return lines;
}

/** A cell band's hover text (plotly's HTML subset), kept on the trace as its description. */
export function bandHover(
  b: ICellBand,
  deviceId: string,
  units: Units = 'binary'
): string {
  const [head, ...rest] = bandLines(b, deviceId, units).map(escape);
  return [`<b>${head}</b>`, ...rest].join('<br>');
}

function escape(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

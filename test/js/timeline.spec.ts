import { Widget } from '@lumino/widgets';

import {
  cellRecord,
  FakeSession,
  sawtooth
} from '../../bench/timeline_update.fake';
import { cellBands, kindOf, TimelineSeries } from '../../src/timeline/series';
import { fromX, TimelineView, toX } from '../../src/timeline/view';

const GiB = 2 ** 30;
const MiB = 2 ** 20;

function finite(a: ArrayLike<number>): number[] {
  return Array.from(a).filter(x => !isNaN(x));
}

describe('TimelineSeries', () => {
  it('builds CUDA traces and shows device_used only when present', () => {
    const s = new FakeSession();
    s.addSamples(sawtooth(100, { deviceId: 'cuda:0' }), false);
    const series = new TimelineSeries();
    expect(series.sync(s)).toBe(100);
    const dev = series.device('cuda:0')!;
    expect(dev.kind).toBe('cuda');
    expect(dev.visibleTraces().map(t => t.spec.label)).toEqual([
      'allocated',
      'reserved',
      'peak'
    ]);
    s.addSamples(
      sawtooth(10, {
        deviceId: 'cuda:0',
        t0: 1_700_000_100,
        withDeviceUsed: true
      }),
      false
    );
    series.sync(s);
    const labels = dev.visibleTraces().map(t => t.spec.label);
    expect(labels).toEqual([
      'allocated',
      'reserved',
      'peak',
      'device used (all processes)'
    ]);
    const du = dev.traces.find(t => t.spec.field === 'device_used')!;
    // the first 100 samples had no device_used: NaN, the last 10 have used + 1 GiB
    expect(finite(du.data.values())).toHaveLength(10);
    expect(du.data.lastValue).toBe(dev.traces[0].data.lastValue + GiB);
  });

  it('maps CPU and MPS fields to their own labels', () => {
    const s = new FakeSession();
    s.devices = [
      {
        id: 'cpu',
        kind: 'cpu',
        name: 'CPU',
        total_bytes: null,
        used_bytes: 0,
        reserved_bytes: null,
        initialized: true,
        source: 'mallinfo2'
      }
    ];
    s.addSamples(
      [
        {
          t: 1,
          d: {
            cpu: { used: 10 * MiB, reserved: 50 * MiB },
            mps: { used: 1, reserved: 2 }
          }
        }
      ],
      false
    );
    const series = new TimelineSeries();
    series.sync(s);
    const cpu = series.device('cpu')!;
    expect(
      cpu.visibleTraces().map(t => [t.spec.label, t.data.lastValue])
    ).toEqual([
      ['in use', 10 * MiB],
      ['RSS', 50 * MiB]
    ]);
    expect(
      series
        .device('mps')!
        .visibleTraces()
        .map(t => t.spec.label)
    ).toEqual(['allocated', 'driver']);
    expect(kindOf('cuda:1')).toBe('cuda');
  });

  it('reads only new samples and inserts a gap at a restart', () => {
    const s = new FakeSession();
    s.addSamples(sawtooth(50, { t0: 100, deviceId: 'cpu' }), false);
    const series = new TimelineSeries();
    series.sync(s);
    s.restarts.push(106);
    s.addSamples(sawtooth(20, { t0: 110, deviceId: 'cpu' }), false);
    expect(series.sync(s)).toBe(20);
    expect(series.sampleCount).toBe(70);
    const used = series.device('cpu')!.traces[0].data;
    // 50 + gap + 20
    expect(used.length).toBe(71);
    const v = used.values();
    const t = used.times();
    expect(isNaN(v[50])).toBe(true);
    expect(t[50]).toBe(106);
    expect(t[49]).toBeCloseTo(104.9);
    expect(t[51]).toBe(110);
  });

  it('inserts a gap when a device is missing from a sample', () => {
    const s = new FakeSession();
    s.addSamples(
      [
        { t: 1, d: { cpu: { used: 1 }, 'cuda:0': { used: 5 } } },
        { t: 2, d: { cpu: { used: 2 } } },
        { t: 3, d: { cpu: { used: 3 } } },
        { t: 4, d: { cpu: { used: 4 }, 'cuda:0': { used: 6 } } }
      ],
      false
    );
    const series = new TimelineSeries();
    series.sync(s);
    const cuda = series.device('cuda:0')!.traces[0].data;
    expect(Array.from(cuda.times())).toEqual([1, 2, 4]);
    expect(Array.from(cuda.values())).toEqual([5, NaN, 6]);
    expect(series.device('cpu')!.length).toBe(4);
  });

  it('keeps the line of a device the kernel did not read at a tick (unread)', () => {
    const s = new FakeSession();
    s.addSamples(
      [
        { t: 1, d: { cpu: { used: 1 } } },
        { t: 2, d: {}, unread: ['cpu'] },
        { t: 3, d: {}, unread: ['cpu'] },
        { t: 4, d: { cpu: { used: 4 } } },
        { t: 5, d: {} } // no reading at all: a gap
      ],
      false
    );
    const series = new TimelineSeries();
    series.sync(s);
    const cpu = series.device('cpu')!.traces[0].data;
    expect(Array.from(cpu.times())).toEqual([1, 4, 5]);
    expect(Array.from(cpu.values())).toEqual([1, 4, NaN]);
  });

  it('rebuilds when more samples arrived than the ring keeps', () => {
    const s = new FakeSession(100);
    s.addSamples(sawtooth(80, { deviceId: 'cpu' }), false);
    const series = new TimelineSeries();
    series.sync(s);
    s.addSamples(sawtooth(150, { deviceId: 'cpu', t0: 1_700_000_100 }), false);
    expect(series.sync(s)).toBe(100);
    expect(series.sampleCount).toBe(230);
    expect(series.device('cpu')!.length).toBe(100);
  });

  it('turns cells into bands with the device delta and peak', () => {
    const bands = cellBands(
      [
        {
          record: cellRecord({
            cell_id: 'b',
            execution_count: 7,
            start_time: 20,
            duration: 2.5,
            code_head: 'model(x)',
            devices: {
              'cuda:0': {
                before_bytes: 0,
                after_bytes: 64 * MiB,
                delta_bytes: 64 * MiB,
                peak_delta_bytes: 100 * MiB
              }
            }
          }),
          epoch: 0
        },
        { record: cellRecord({ cell_id: 'a', start_time: 10 }), epoch: 0 }
      ],
      'cuda:0'
    );
    expect(bands.map(b => b.cellId)).toEqual(['a', 'b']);
    expect(bands[1]).toMatchObject({
      label: '[7]',
      start: 20,
      end: 22.5,
      codeHead: 'model(x)',
      deltaBytes: 64 * MiB,
      peakDeltaBytes: 100 * MiB
    });
    expect(bands[0].deltaBytes).toBeNull();
  });
});

describe('toX / fromX', () => {
  it('round-trips kernel seconds through plotly date strings', () => {
    const t = 1_700_000_123.25;
    expect(fromX(toX(t))).toBeCloseTo(t, 6);
    const iso = new Date(toX(t))
      .toISOString()
      .replace('T', ' ')
      .replace('Z', '');
    expect(fromX(iso)).toBeCloseTo(t, 3);
  });
});

describe('TimelineView', () => {
  let view: TimelineView;
  let session: FakeSession;

  beforeEach(() => {
    session = new FakeSession();
    view = new TimelineView({ windowSeconds: 60 });
    Widget.attach(view, document.body);
  });

  afterEach(() => {
    view.dispose();
    session.dispose();
  });

  function plot(): any {
    return view.node.querySelector('.vramscope-Timeline-plot');
  }

  it('exposes the stable selectors and counts samples', async () => {
    expect(view.node.classList.contains('vramscope-Timeline')).toBe(true);
    expect(view.node.getAttribute('data-sample-count')).toBe('0');
    view.setSession(session);
    session.addSamples(sawtooth(30));
    expect(view.node.getAttribute('data-sample-count')).toBe('30');
    session.addSamples(sawtooth(5, { t0: 1_700_000_003 }));
    expect(view.node.getAttribute('data-sample-count')).toBe('35');
    expect(
      view.node.querySelector('.vramscope-Timeline-follow')
    ).not.toBeNull();
    expect(plot()).not.toBeNull();
  });

  it('draws the running cell as a band that grows with the samples', async () => {
    view.setSession(session);
    const t0 = 1_700_000_000;
    session.addSamples(sawtooth(100, { t0, amplitude: GiB }));
    const running = {
      msgId: 'm1',
      cellId: 'c9',
      executionCount: 9,
      start: t0 + 5,
      codeHead: 'for step in range(1000):'
    };
    session.runningCell = running;
    session.runningCellChanged.emit(running);
    await view.redraw();
    let bars = plot().data.find((d: any) => d.name === 'cells');
    expect(bars.text).toEqual(['[9]']);
    expect(bars.customdata).toEqual(['c9']);
    expect(bars.hovertext[0]).toContain('for step in range(1000):');
    expect(bars.hovertext[0]).toContain('running for');
    const firstWidth = bars.width[0];
    // the newest sample is its end, to a few pixels
    const newest = t0 + 99 * 0.1;
    expect(firstWidth / 1000).toBeGreaterThanOrEqual(newest - running.start);
    expect(firstWidth / 1000).toBeLessThan(newest - running.start + 2);

    session.addSamples(sawtooth(100, { t0: t0 + 10, amplitude: GiB }));
    await view.redraw();
    bars = plot().data.find((d: any) => d.name === 'cells');
    expect(bars.width[0]).toBeGreaterThan(firstWidth);

    // It ends: the band goes, the cell's record (when it comes) is drawn instead.
    session.runningCell = null;
    session.runningCellChanged.emit(null);
    await view.redraw();
    expect(plot().data.map((d: any) => d.name)).toEqual(['axes']);
  });

  it('draws the traces, cell bands and restart markers with plotly', async () => {
    view.setSession(session);
    const t0 = 1_700_000_000;
    session.addSamples(sawtooth(600, { t0, amplitude: 4 * GiB }));
    session.addCell(
      cellRecord({
        cell_id: 'c1',
        execution_count: 3,
        start_time: t0 + 10,
        duration: 5,
        code_head: 'train()',
        devices: {
          'cuda:0': {
            before_bytes: 0,
            after_bytes: 0,
            delta_bytes: 64 * MiB,
            peak_delta_bytes: 2 * GiB
          }
        }
      })
    );
    session.restarts.push(t0 + 30);
    await view.redraw();
    const gd = plot();
    // plotly draws the cell bands; the memory lines are drawn on the canvas over it
    expect(gd.data.map((d: any) => d.name)).toEqual(['axes', 'cells']);
    expect(view.lines.map(l => l.label)).toEqual([
      'allocated',
      'reserved',
      'peak'
    ]);
    const canvas = view.node.querySelector(
      '.vramscope-Timeline-lines'
    ) as HTMLCanvasElement;
    expect(Number(canvas.dataset.points)).toBe(
      view.lines.reduce((n, l) => n + l.x.length, 0)
    );
    expect(
      Array.from(
        view.node.querySelectorAll('.vramscope-Timeline-legendItem')
      ).map(e => e.textContent)
    ).toEqual(['allocated', 'reserved', 'peak']);
    const bars = gd.data[1];
    expect(bars.customdata).toEqual(['c1']);
    expect(bars.hovertext[0]).toContain('[3]');
    expect(bars.hovertext[0]).toContain('train()');
    expect(bars.hovertext[0]).toContain('+64.0 MiB');
    expect(bars.hovertext[0]).toContain('+2.0 GiB');
    // the band spans the cell: centred on it, as wide as its duration (ms on a date axis)
    expect(bars.x).toEqual([toX(t0 + 12.5)]);
    expect(bars.width).toEqual([5000]);
    expect(bars.text).toEqual(['[3]']);
    const shapes = gd.layout.shapes;
    expect(shapes).toHaveLength(1);
    expect(shapes[0]).toMatchObject({ type: 'line', x0: toX(t0 + 30) });
    // y in GiB; follow window 60 s covers the whole saw-tooth: max is base + amplitude
    expect(gd.layout.yaxis.title.text).toBe('GiB');
    const allocated = view.lines[0];
    expect(Math.max(...finite(allocated.y))).toBeCloseTo(
      1 + 4 * (599 / 600),
      6
    );
    // following: the window ends at the last sample or less than a pixel's time after it
    const end = fromX(gd.layout.xaxis.range[1]);
    expect(end).toBeGreaterThanOrEqual(t0 + 59.9);
    expect(end - (t0 + 59.9)).toBeLessThan(300 / 100);
    // clock-time ticks on a linear axis, inside the window
    expect(gd.layout.xaxis.type).toBe('linear');
    expect(gd.layout.xaxis.tickvals.length).toBeGreaterThan(1);
    expect(gd.layout.xaxis.tickvals.length).toBe(
      gd.layout.xaxis.ticktext.length
    );
  });

  it('draws the exact maximum of every visible window, whatever the zoom', async () => {
    view.setSession(session);
    const t0 = 1_700_000_000;
    // 20k samples with one short spike: far more than the buckets drawn
    const samples = sawtooth(20000, { t0, amplitude: GiB });
    samples[12345].d['cuda:0'].used = 7 * GiB + 123;
    session.addSamples(samples);
    const drawnMax = () =>
      Math.max(...finite(view.lines.find(l => l.label === 'allocated')!.y)) *
      GiB;
    const rawMax = (a: number, b: number) =>
      Math.max(
        ...samples
          .filter(s => s.t >= a && s.t <= b)
          .map(s => s.d['cuda:0'].used as number)
      );
    view.windowSeconds = Infinity;
    await view.redraw();
    expect(
      view.lines.find(l => l.label === 'allocated')!.y.length
    ).toBeLessThan(2000);
    expect(drawnMax()).toBeCloseTo(rawMax(t0, t0 + 2000), -1);
    // a zoomed window around the spike, and one without it
    for (const [a, b] of [
      [t0 + 1200, t0 + 1300],
      [t0 + 100, t0 + 900]
    ]) {
      plot().emit('plotly_relayout', {
        'xaxis.range[0]': toX(a),
        'xaxis.range[1]': toX(b)
      });
      await view.redraw();
      expect(drawnMax()).toBeCloseTo(rawMax(a, b), -1);
    }
  });

  it('takes its colours from the JupyterLab theme', async () => {
    view.setSession(session);
    session.addSamples(sawtooth(100));
    view.node.style.setProperty('--jp-brand-color1', 'rgb(1, 2, 3)');
    view.node.style.setProperty('--jp-layout-color1', 'rgb(9, 9, 9)');
    view.refreshTheme();
    await view.redraw();
    expect(plot().layout.paper_bgcolor).toBe('rgb(9, 9, 9)');
    expect(view.lines.find(l => l.label === 'allocated')!.color).toBe(
      'rgb(1, 2, 3)'
    );
  });

  it('skips the replot when a live update changes nothing drawn', async () => {
    view.setSession(session);
    const t0 = 1_700_000_000;
    // flat memory: new samples inside the same pixel leave every bucket as it was
    const flat = (n: number, start: number) =>
      sawtooth(n, { t0: start, amplitude: 0 });
    view.windowSeconds = 3600; // one pixel is ~5 s: the next sample stays in it
    session.addSamples(flat(20000, t0)); // 33 min at 10 Hz: downsampled
    await view.redraw();
    const before = view.drawStats;
    expect(before).toEqual({ replots: 1, canvasOnly: 0, skipped: 0 });
    session.addSamples(flat(1, t0 + 2000));
    await view.redraw();
    expect(view.drawStats).toEqual({ replots: 1, canvasOnly: 0, skipped: 1 });
    // a new value within the same y scale: only the lines' canvas is redrawn
    session.addSamples(
      sawtooth(1, { t0: t0 + 2000.05, amplitude: 0, base: 2 ** 30 + 2 ** 20 })
    );
    await view.redraw();
    expect(view.drawStats).toEqual({ replots: 1, canvasOnly: 1, skipped: 1 });
    // a new maximum always replots, and the drawn maximum is the raw one
    session.addSamples(sawtooth(1, { t0: t0 + 2000.1, base: 3 * GiB }));
    await view.redraw();
    const replots = view.drawStats.replots;
    expect(replots).toBeGreaterThan(before.replots);
    expect(view.lines[0].label).toBe('allocated');
    expect(Math.max(...finite(view.lines[0].y))).toBeCloseTo(3, 6);
  });

  it('selects the cell when a band is clicked', async () => {
    view.setSession(session);
    session.addSamples(sawtooth(20));
    session.addCell(cellRecord({ cell_id: 'abc', start_time: 1_700_000_000 }));
    await view.redraw();
    const clicked: string[] = [];
    view.cellClicked.connect((_, id) => clicked.push(id));
    plot().emit('plotly_click', { points: [{ customdata: 'abc' }] });
    expect(session.revealed).toEqual(['abc']);
    expect(clicked).toEqual(['abc']);
  });

  it('turns follow off on zoom and back on from the toggle', async () => {
    view.setSession(session);
    const t0 = 1_700_000_000;
    session.addSamples(sawtooth(3000, { t0 }));
    await view.redraw();
    expect(view.follow).toBe(true);
    const gd = plot();
    gd.emit('plotly_relayout', {
      'xaxis.range[0]': toX(t0 + 10),
      'xaxis.range[1]': toX(t0 + 20)
    });
    expect(view.follow).toBe(false);
    const button = view.node.querySelector(
      '.vramscope-Timeline-follow'
    ) as HTMLButtonElement;
    expect(button.getAttribute('aria-pressed')).toBe('false');
    await view.redraw();
    expect(fromX(gd.layout.xaxis.range[0])).toBeCloseTo(t0 + 10, 3);
    // new samples do not move a zoomed view
    session.addSamples(sawtooth(10, { t0: t0 + 300 }));
    await view.redraw();
    expect(fromX(gd.layout.xaxis.range[1])).toBeCloseTo(t0 + 20, 3);
    button.click();
    expect(view.follow).toBe(true);
    await view.redraw();
    const end = fromX(gd.layout.xaxis.range[1]);
    expect(end).toBeGreaterThanOrEqual(t0 + 300.9);
    expect(end - (t0 + 300.9)).toBeLessThan(300 / 100);
    expect(fromX(gd.layout.xaxis.range[0])).toBeCloseTo(end - 60, 3);
  });

  it('a double-click shows the whole history, axes and lines at the same range', async () => {
    view.setSession(session);
    const t0 = 1_700_000_000;
    session.addSamples(sawtooth(3000, { t0 }));
    view.windowSeconds = Infinity;
    await view.redraw();
    const before = plot().layout.uirevision;
    const range = [...plot().layout.xaxis.range];
    plot().emit('plotly_relayout', { 'xaxis.autorange': true });
    expect(view.follow).toBe(false);
    await view.redraw();
    // a new uirevision: plotly takes the computed range instead of its own autorange
    expect(plot().layout.uirevision).not.toBe(before);
    expect(plot().layout.xaxis.range).toEqual(range);
    expect(view.drawStats.replots).toBe(2);
  });

  it('offers a device selector when there are several devices', async () => {
    view.setSession(session);
    session.addSamples([
      {
        t: 1,
        d: { cpu: { used: 5 * MiB, reserved: 9 * MiB }, 'cuda:0': { used: 1 } }
      }
    ]);
    const select = view.node.querySelector(
      '.vramscope-Timeline-device'
    ) as HTMLSelectElement;
    expect(select.hidden).toBe(false);
    expect(Array.from(select.options).map(o => o.value)).toEqual([
      'cpu',
      'cuda:0'
    ]);
    expect(view.deviceId).toBe('cuda:0');
    select.value = 'cpu';
    select.dispatchEvent(new Event('change'));
    expect(view.deviceId).toBe('cpu');
    await view.redraw();
    expect(view.lines.map(l => l.label)).toEqual(['in use', 'RSS']);
  });

  it('disconnects from the old session and purges on dispose', async () => {
    view.setSession(session);
    session.addSamples(sawtooth(10));
    await view.redraw();
    view.setSession(null);
    session.addSamples(sawtooth(10, { t0: 1_700_000_001 }));
    expect(view.node.getAttribute('data-sample-count')).toBe('0');
    view.setSession(session);
    expect(view.node.getAttribute('data-sample-count')).toBe('20');
    await view.redraw();
    const gd = plot();
    expect(gd.data).toBeDefined();
    view.dispose();
    expect(gd.data).toBeUndefined();
    session.addSamples(sawtooth(1, { t0: 1_700_000_010 })); // no throw after dispose
  });
});

describe('TimelineView sample-rate picker', () => {
  it('is hidden without a setter', () => {
    const view = new TimelineView();
    const rate = view.node.querySelector(
      '.vramscope-Timeline-rate'
    ) as HTMLSelectElement;
    expect(rate.hidden).toBe(true);
    view.dispose();
  });

  it("shows the kernel's rate and calls the setter on change", async () => {
    const calls: number[] = [];
    const view = new TimelineView({
      setSampleHz: hz => {
        calls.push(hz);
      }
    });
    Widget.attach(view, document.body);
    const rate = view.node.querySelector(
      '.vramscope-Timeline-rate'
    ) as HTMLSelectElement;
    expect(rate.hidden).toBe(false);
    expect(rate.disabled).toBe(true); // no session
    expect(Array.from(rate.options).map(o => o.textContent)).toEqual([
      'off',
      '1 Hz',
      '2 Hz',
      '5 Hz',
      '10 Hz',
      '20 Hz'
    ]);
    expect(rate.value).toBe('10');

    const session = new FakeSession();
    session.settings = {
      sample_hz: 2.5,
      cuda_peak_policy: 'reset',
      insight: true,
      insight_budget_ms: 20,
      history_limit: 36000
    };
    view.setSession(session);
    expect(rate.disabled).toBe(false);
    expect(rate.value).toBe('2.5'); // a rate off the list is added
    expect(Array.from(rate.options).map(o => o.value)).toContain('2.5');

    rate.value = '0';
    rate.dispatchEvent(new Event('change'));
    expect(calls).toEqual([0]);
    expect(rate.value).toBe('0');
    await new Promise(r => setTimeout(r, 0));
    session.settings = { ...session.settings, sample_hz: 0 };
    session.changed.emit();
    expect(rate.value).toBe('0');
    view.dispose();
    session.dispose();
  });
});

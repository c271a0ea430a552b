import { Signal } from '@lumino/signaling';

import { cellRecord, FakeSession } from '../../bench/timeline_update.fake';
import type { ISample } from '../../src/protocol';
import { TimelineSeries } from '../../src/timeline/series';
import type { IMemorySession } from '../../src/tokens';
import { MemoryChart } from '../../src/widget/chart';
import { chooseDevice, computeFrame } from '../../src/widget/frame';

const T0 = 1_700_000_000;
const MiB = 2 ** 20;

/** 1 Hz samples on cpu and cuda:0; cuda's in-use bytes are a known function of time. */
function samples(from: number, to: number): ISample[] {
  const out: ISample[] = [];
  for (let i = from; i < to; i++) {
    out.push({
      t: T0 + i,
      d: {
        cpu: { used: 100 * MiB, reserved: 200 * MiB },
        'cuda:0': {
          used: (i % 50) * MiB + (i === 90 ? 500 * MiB : 0),
          reserved: 600 * MiB,
          peak: 700 * MiB
        }
      }
    });
  }
  return out;
}

function session(): FakeSession {
  const s = new FakeSession();
  s.addSamples(samples(0, 120), false);
  s.addCell(
    cellRecord({ execution_count: 1, start_time: T0 + 10, duration: 5 })
  );
  s.addCell(
    cellRecord({ execution_count: 2, start_time: T0 + 80, duration: 12 })
  );
  s.addCell(
    cellRecord({ execution_count: 3, start_time: T0 + 100, duration: 3 })
  );
  return s;
}

/** A 2D context that records what the chart draws. */
function recordingContext() {
  const calls: { fillRect: number[][]; text: string[]; lineTo: number } = {
    fillRect: [],
    text: [],
    lineTo: 0
  };
  const ctx = {
    setTransform() {},
    clearRect() {},
    fillRect(x: number, y: number, w: number, h: number) {
      calls.fillRect.push([x, y, w, h]);
    },
    fillText(text: string) {
      calls.text.push(text);
    },
    beginPath() {},
    moveTo() {},
    lineTo() {
      calls.lineTo++;
    },
    stroke() {},
    setLineDash() {},
    set fillStyle(_: string) {},
    set strokeStyle(_: string) {},
    set lineWidth(_: number) {},
    set lineJoin(_: string) {},
    set font(_: string) {}
  };
  return { ctx, calls };
}

const nextFrame = () => new Promise(resolve => setTimeout(resolve, 40));

describe('widget frame', () => {
  it('follows the accelerator over the window, with its cells and the newest point', () => {
    const s = session();
    const series = new TimelineSeries();
    series.sync(s);
    expect(chooseDevice(series, '')).toBe('cuda:0');
    expect(chooseDevice(series, 'cpu')).toBe('cpu');
    expect(chooseDevice(series, 'cuda:7')).toBe('cuda:0');

    const frame = computeFrame(s, series, {
      device: '',
      window: 60,
      buckets: 10
    })!;
    expect(frame.device).toBe('cuda:0');
    expect([frame.t0, frame.t1]).toEqual([T0 + 59, T0 + 119]);
    expect(frame.newest).toEqual({ t: T0 + 119, bytes: (119 % 50) * MiB });
    // min/max downsampling keeps the spike at t = 90 (a 549 MiB peak among 10 buckets)
    const used = frame.lines.find(l => l.role === 'primary')!;
    const max = Math.max(...Array.from(used.v).filter(v => v === v));
    expect(max).toBe(40 * MiB + 500 * MiB);
    expect(frame.lines.map(l => l.label)).toEqual(['allocated', 'reserved']);
    expect(frame.yMax).toBeCloseTo(600 * MiB * 1.1, 0);
    // cell [1] ended before the window
    expect(frame.bands.map(b => b.label)).toEqual(['[2]', '[3]']);

    s.runningCell = {
      msgId: 'm',
      cellId: 'c4',
      executionCount: 4,
      start: T0 + 110,
      codeHead: 'train()'
    };
    const running = computeFrame(s, series, {
      device: 'cpu',
      window: 30,
      buckets: 10
    })!;
    expect(running.device).toBe('cpu');
    // [2] (80-92 s) reaches into the window (89-119 s)
    expect(running.bands.map(b => [b.label, b.running ?? false])).toEqual([
      ['[2]', false],
      ['[3]', false],
      ['[4]', true]
    ]);
    expect(running.bands[2].end).toBe(T0 + 119);
  });

  it('has nothing to draw before the first sample', () => {
    const s = new FakeSession();
    const series = new TimelineSeries();
    series.sync(s);
    expect(
      computeFrame(s, series, { device: '', window: 60, buckets: 10 })
    ).toBeNull();
  });
});

describe('MemoryChart', () => {
  let restore: () => void;
  let calls: ReturnType<typeof recordingContext>['calls'];

  beforeEach(() => {
    const rec = recordingContext();
    calls = rec.calls;
    const original = HTMLCanvasElement.prototype.getContext;
    HTMLCanvasElement.prototype.getContext = (() => rec.ctx) as any;
    restore = () => {
      HTMLCanvasElement.prototype.getContext = original;
    };
  });

  afterEach(() => {
    restore();
    document.body.innerHTML = '';
  });

  it('finds its session when it appears, draws live, and lets go on dispose', async () => {
    const s = session();
    let known: IMemorySession | null = null;
    const added = new Signal<unknown, unknown>({});
    const chart = new MemoryChart({
      device: '',
      window: 60,
      height: 100,
      findSession: () => known,
      sessionAdded: added
    });
    document.body.appendChild(chart.node);
    await nextFrame();
    expect(chart.node.dataset.status).toBe('no-session');
    expect(chart.node.textContent).toContain(
      'this output is not in a notebook that vramscope follows'
    );

    known = s;
    added.emit(undefined);
    await nextFrame();
    expect(chart.session).toBe(s);
    expect(chart.node.dataset.device).toBe('cuda:0');
    expect(chart.node.dataset.newestT).toBe(String(T0 + 119));
    expect(chart.node.dataset.bands).toBe('2');
    expect(chart.node.querySelector('.vramscope-Widget-now')!.textContent).toBe(
      '19.0 MiB in use'
    );
    // two bands shaded (the plot is 1 px wide in jsdom: [2] and [3] both fall on it)
    expect(calls.fillRect.length).toBe(2);
    expect(calls.lineTo).toBeGreaterThan(0);

    // live: a new sample moves the newest point; a running cell gets its band
    s.runningCell = {
      msgId: 'm',
      cellId: 'c4',
      executionCount: 4,
      start: T0 + 119.5,
      codeHead: 'train()'
    };
    s.runningCellChanged.emit(s.runningCell);
    s.addSamples(samples(120, 122));
    await nextFrame();
    expect(chart.node.dataset.newestT).toBe(String(T0 + 121));
    expect(chart.node.dataset.newestBytes).toBe(String(21 * MiB));
    expect(chart.node.dataset.bands).toBe('3');

    // the model's traits change what is shown
    chart.setOptions({ device: 'cpu', height: 80 });
    await nextFrame();
    expect(chart.node.dataset.device).toBe('cpu');
    expect(
      (chart.node.querySelector('.vramscope-Widget-plot') as HTMLElement).style
        .height
    ).toBe('80px');

    chart.dispose();
    expect(chart.isDisposed).toBe(true);
    expect(chart.session).toBeNull();
    expect(chart.node.isConnected).toBe(false);
    const before = calls.lineTo;
    s.addSamples(samples(122, 130));
    added.emit(undefined);
    await nextFrame();
    expect(calls.lineTo).toBe(before);
    expect(chart.node.dataset.newestT).toBe(String(T0 + 121));
    chart.dispose(); // idempotent
  });

  it('says why when the session has no samples', async () => {
    const s = new FakeSession();
    s.status = 'no-bridge';
    s.statusMessage = 'vramscope is not installed in this kernel';
    const chart = new MemoryChart({
      device: '',
      window: 60,
      height: 100,
      findSession: () => s
    });
    await nextFrame();
    expect(chart.node.dataset.status).toBe('no-bridge');
    expect(
      chart.node.querySelector('.vramscope-Widget-message')!.textContent
    ).toBe('vramscope: vramscope is not installed in this kernel');
    chart.dispose();
  });
});

/**
 * Browser side of bench/timeline_update.mjs: bundled with rspack and run in headless
 * Chromium. Measures one live update of the real TimelineView (ingest a sample batch,
 * downsample the visible window, Plotly.react) over 8 h of 10 Hz history, and a naive
 * full redraw (all raw points to Plotly.react) in the same page for comparison.
 */
import { Widget } from '@lumino/widgets';

import { loadPlotly } from '../src/timeline/plotly';
import { TimelineView } from '../src/timeline/view';
import type { ISample } from '../src/protocol';
import {
  cellRecord,
  FakeSession,
  sawtooth,
  stats
} from './timeline_update.fake';
import { lanesBench } from './timeline_update.lanes';

/**
 * A training loop's memory at 10 Hz: each ~1 s step climbs through the forward pass and
 * falls back in backward (sharp, repeating saw-teeth over a steady base).
 */
function trainingLoop(
  n: number,
  options: { t0: number; hz: number; from: number }
): ISample[] {
  const out: ISample[] = [];
  const GiB = 2 ** 30;
  for (let i = 0; i < n; i++) {
    const k = options.from + i;
    const phase = k % 10;
    const used = 6 * GiB + (phase < 6 ? phase : 10 - phase) * 0.4 * GiB;
    out.push({
      t: options.t0 + k / options.hz,
      d: {
        'cuda:0': {
          used,
          reserved: 10 * GiB,
          peak: 8.4 * GiB,
          device_used: 11 * GiB,
          device_total: 80 * GiB
        }
      }
    });
  }
  return out;
}

async function run(options: {
  samples: number;
  updates: number;
  naiveUpdates: number;
  cells?: boolean;
  width?: number;
  ranks?: number;
}): Promise<Record<string, unknown>> {
  const HZ = 10;
  const T0 = 1_700_000_000;
  const session = new FakeSession(options.samples + 10_000);
  const history = sawtooth(options.samples, {
    t0: T0,
    hz: HZ,
    withDeviceUsed: true
  });
  session.addSamples(history, false);
  // one cell per 10 minutes of history
  for (
    let t = 0;
    options.cells !== false && t < options.samples / HZ;
    t += 600
  ) {
    session.cells.push({
      record: cellRecord({
        cell_id: `c${t}`,
        execution_count: t / 600 + 1,
        start_time: T0 + t,
        duration: 300,
        code_head: 'train(model, loader)'
      }),
      epoch: 0
    });
  }

  // A training cell has been running for a minute while the live updates arrive: its band
  // grows with them.
  session.runningCell = {
    msgId: 'running',
    cellId: 'running',
    executionCount: 999,
    start: T0 + options.samples / HZ - 60,
    codeHead: 'train(model, loader)'
  };

  const view = new TimelineView({ windowSeconds: Infinity });
  view.node.style.width = `${options.width ?? 1200}px`;
  view.node.style.height = '400px';
  Widget.attach(view, document.body);
  const t0 = performance.now();
  view.setSession(session);
  await view.redraw();
  const firstDrawMs = performance.now() - t0;

  let next = options.samples;
  let pattern: 'ramp' | 'train' = 'ramp';
  const batch = () =>
    pattern === 'ramp'
      ? sawtooth(1, { t0: T0 + next / HZ, withDeviceUsed: true })
      : trainingLoop(1, { t0: T0, hz: HZ, from: next });
  /** One live update: ingest a batch, draw, and the style + layout it causes. */
  const update = async () => {
    const b = batch();
    next++;
    const replotsBefore = view.drawStats.replots;
    const start = performance.now();
    session.addSamples(b); // the view syncs on samplesAdded
    await view.redraw(); // downsample + Plotly.react, as the throttled redraw does
    void document.body.offsetHeight; // force the style and layout of what changed
    const ms = performance.now() - start;
    return { ms, replot: view.drawStats.replots > replotsBefore };
  };

  const measure = async (n: number) => {
    for (let i = 0; i < 5; i++) {
      await update(); // warm-up
    }
    const all: number[] = [];
    const replots: number[] = [];
    for (let i = 0; i < n; i++) {
      const u = await update();
      all.push(u.ms);
      if (u.replot) {
        replots.push(u.ms);
      }
    }
    return {
      update: stats(all),
      replot: replots.length ? stats(replots) : null,
      replotShare: replots.length / n
    };
  };

  // Split of one "all" update: ingest + figure (downsample) vs the whole redraw.
  const anyView = view as any;
  const figXs: number[] = [];
  for (let i = 0; i < 20; i++) {
    const b = batch();
    next++;
    const start = performance.now();
    session.addSamples(b);
    const model = anyView._model;
    anyView._plot._figure(model, model.currentDevice());
    figXs.push(performance.now() - start);
  }
  const ingestAndDownsample = stats(figXs);
  view.windowSeconds = Infinity;
  const all = await measure(options.updates);
  view.windowSeconds = 300;
  const fiveMin = await measure(options.updates);
  const drawnPoints = view.lines.reduce((n, l) => n + l.x.length, 0);
  pattern = 'train';
  view.windowSeconds = Infinity;
  const trainAll = await measure(options.updates);
  view.windowSeconds = 300;
  const trainFiveMin = await measure(options.updates);

  // Naive: every update rebuilds x/y from all samples and hands them all to Plotly.react.
  const Plotly = await loadPlotly();
  const naiveDiv = document.createElement('div');
  naiveDiv.style.width = '1200px';
  naiveDiv.style.height = '400px';
  document.body.appendChild(naiveDiv);
  const fields = ['used', 'reserved', 'peak', 'device_used'] as const;
  const naiveUpdate = async () => {
    const b = sawtooth(1, { t0: T0 + next / HZ, withDeviceUsed: true });
    next++;
    const start = performance.now();
    session.addSamples(b, false);
    const all = session.samples.toArray();
    const x = all.map(s => s.t * 1000);
    const data = fields.map(f => ({
      type: 'scatter' as const,
      mode: 'lines' as const,
      name: f,
      x,
      y: all.map(s => s.d['cuda:0']?.[f] ?? null)
    }));
    await Plotly.react(naiveDiv, data as any, {
      xaxis: { type: 'date' },
      margin: { l: 56, r: 12, t: 28, b: 32 }
    });
    void document.body.offsetHeight;
    return performance.now() - start;
  };
  await naiveUpdate();
  const naiveXs: number[] = [];
  for (let i = 0; i < options.naiveUpdates; i++) {
    naiveXs.push(await naiveUpdate());
  }
  const naive = stats(naiveXs);
  view.dispose();
  const lanes = await lanesBench({
    ranks: options.ranks ?? 64,
    updates: 2 * options.updates, // 1 in 5 carries a processes message
    width: options.width ?? 1200
  });
  return {
    lanes,
    samples: options.samples,
    firstDrawMs,
    ingestAndDownsample,
    all,
    fiveMin,
    trainAll,
    trainFiveMin,
    drawnPoints5min: drawnPoints,
    naive
  };
}

(window as any).vramscopeBench = run;

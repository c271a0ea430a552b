/**
 * Browser side of bench/timeline_update.mjs: bundled with rspack and run in headless
 * Chromium. Measures one live update of the real TimelineView (ingest a sample batch,
 * downsample the visible window, Plotly.react) over 8 h of 10 Hz history, and a naive
 * full redraw (all raw points to Plotly.react) in the same page for comparison.
 */
import { Widget } from '@lumino/widgets';

import { loadPlotly } from '../src/timeline/plotly';
import { TimelineView } from '../src/timeline/view';
import { cellRecord, FakeSession, sawtooth } from './timeline_update.fake';

interface IStats {
  median: number;
  p90: number;
  min: number;
  n: number;
}

function stats(xs: number[]): IStats {
  const s = [...xs].sort((a, b) => a - b);
  return {
    median: s[Math.floor(s.length / 2)],
    p90: s[Math.min(s.length - 1, Math.floor(s.length * 0.9))],
    min: s[0],
    n: s.length
  };
}

async function run(options: {
  samples: number;
  updates: number;
  naiveUpdates: number;
  cells?: boolean;
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

  const view = new TimelineView({ windowSeconds: Infinity });
  view.node.style.width = '1200px';
  view.node.style.height = '400px';
  Widget.attach(view, document.body);
  const t0 = performance.now();
  view.setSession(session);
  await view.redraw();
  const firstDrawMs = performance.now() - t0;

  let next = options.samples;
  const update = async () => {
    const batch = sawtooth(1, { t0: T0 + next / HZ, withDeviceUsed: true });
    next++;
    const start = performance.now();
    session.addSamples(batch); // the view syncs on samplesAdded
    await view.redraw(); // downsample + Plotly.react, as the throttled redraw does
    return performance.now() - start;
  };

  const measure = async (n: number) => {
    for (let i = 0; i < 5; i++) {
      await update(); // warm-up
    }
    const xs: number[] = [];
    for (let i = 0; i < n; i++) {
      xs.push(await update());
    }
    return stats(xs);
  };

  // Split of one "all" update: ingest + figure (downsample) vs the whole redraw.
  const anyView = view as any;
  const figXs: number[] = [];
  for (let i = 0; i < 20; i++) {
    const batch = sawtooth(1, { t0: T0 + next / HZ, withDeviceUsed: true });
    next++;
    const start = performance.now();
    session.addSamples(batch);
    anyView._figure(anyView._currentDevice(), anyView._theme);
    figXs.push(performance.now() - start);
  }
  const ingestAndDownsample = stats(figXs);
  view.windowSeconds = Infinity;
  const all = await measure(options.updates);
  view.windowSeconds = 300;
  const fiveMin = await measure(options.updates);
  const drawnPoints = (
    view.node.querySelector('.vramscope-Timeline-plot') as any
  ).data.reduce((s: number, d: any) => s + (d.x?.length ?? 0), 0);

  // Naive: every update rebuilds x/y from all samples and hands them all to Plotly.react.
  const Plotly = await loadPlotly();
  const naiveDiv = document.createElement('div');
  naiveDiv.style.width = '1200px';
  naiveDiv.style.height = '400px';
  document.body.appendChild(naiveDiv);
  const fields = ['used', 'reserved', 'peak', 'device_used'] as const;
  const naiveUpdate = async () => {
    const batch = sawtooth(1, { t0: T0 + next / HZ, withDeviceUsed: true });
    next++;
    const start = performance.now();
    session.addSamples(batch, false);
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
    return performance.now() - start;
  };
  await naiveUpdate();
  const naiveXs: number[] = [];
  for (let i = 0; i < options.naiveUpdates; i++) {
    naiveXs.push(await naiveUpdate());
  }
  const naive = stats(naiveXs);
  view.dispose();
  return {
    samples: options.samples,
    firstDrawMs,
    ingestAndDownsample,
    all,
    fiveMin,
    drawnPoints5min: drawnPoints,
    naive
  };
}

(window as any).vramscopeBench = run;

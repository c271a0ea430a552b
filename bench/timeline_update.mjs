#!/usr/bin/env node
// Live-timeline update benchmark: 8 h of 10 Hz history (288k samples, saw-tooth), one sample
// batch per update, median over N updates of the real TimelineView (ingest + peak-preserving
// downsample + Plotly.react), against a naive full redraw (all raw points) in the same page;
// then the timeline with a lane per process for --ranks ranks reporting at 10 Hz, next to the
// same view with no child process (bench/timeline_update.lanes.ts).
//
//   node bench/timeline_update.mjs [--updates 50] [--naive 8] [--samples 288000] [--ranks 64]
//                                  [--record]
//
// Bundles bench/timeline_update.entry.ts with rspack (from @jupyter/builder) into a temp dir,
// runs it in headless system Chromium via playwright-core. --record appends a section to
// bench/RESULTS.md.
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir, cpus, loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { bundle, chromiumPath, runBench } from './_bundle.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..');

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}
const record = process.argv.includes('--record');
const opts = {
  samples: arg('samples', 288000),
  updates: arg('updates', 50),
  naiveUpdates: arg('naive', 8),
  cells: !process.argv.includes('--no-cells'),
  width: arg('width', 1200),
  ranks: arg('ranks', 64)
};
const chromium = chromiumPath();

const out = mkdtempSync(join(tmpdir(), 'vramscope-bench-'));
const t0 = Date.now();
await bundle(join(here, 'timeline_update.entry.ts'), out);
const css = readFileSync(join(root, 'style', 'timeline.css'), 'utf8');
writeFileSync(
  join(out, 'index.html'),
  `<!doctype html><html><head><meta charset="utf-8"><style>${css}
  body { margin: 0; --jp-layout-color1: #fff; --jp-ui-font-color1: #212121; }
  </style></head><body><script src="bench.js"></script></body></html>`
);
console.log(`bundled in ${((Date.now() - t0) / 1000).toFixed(1)} s`);

const { result, browserVersion } = await runBench(out, chromium, opts);

const f = x => x.toFixed(2);
const row = (name, m) =>
  `${name}: per live update median ${f(m.update.median)} ms, mean ${f(m.update.mean)} ms, ` +
  `p90 ${f(m.update.p90)} ms (n=${m.update.n}); ${(100 * m.replotShare).toFixed(0)}% with a plotly replot (the others redraw the lines' canvas or nothing)` +
  (m.replot
    ? `, per replot median ${f(m.replot.median)} ms, p90 ${f(m.replot.p90)} ms`
    : '');
const worst = Math.max(
  ...[result.all, result.fiveMin, result.trainAll, result.trainFiveMin].map(
    m => m.update.median
  )
);
const worstMean = Math.max(
  ...[result.all, result.fiveMin, result.trainAll, result.trainFiveMin].map(
    m => m.update.mean
  )
);
const ratio = result.naive.median / result.all.update.median;
const L = result.lanes;
const lanesMet = L.on.median <= 16 && L.onMessage.median <= 16;
const met = worst <= 16 && worstMean <= 16 && lanesMet;
const lines = [
  `history: ${result.samples.toLocaleString('en-US')} samples (8 h at 10 Hz, cuda:0 with 4 traces, 48 cell bands and the band of a cell running for the last minute, which grows with the updates), plot ${opts.width} px wide, 1 sample per update; times include the style and layout the update causes`,
  `first draw (sync + downsample + newPlot, incl. plotly load): ${f(result.firstDrawMs)} ms`,
  `our share (ingest + downsample + figure build, window "all"): median ${f(result.ingestAndDownsample.median)} ms`,
  row('60 s ramps, window "all" (8 h)', result.all),
  row('ramp, window 5 min', result.fiveMin) +
    ` (${result.drawnPoints5min} points drawn)`,
  row('training-loop saw-teeth (1 s steps), window "all"', result.trainAll),
  row('training-loop saw-teeth, window 5 min', result.trainFiveMin),
  `naive full redraw (all raw points to Plotly.react): median ${f(result.naive.median)} ms, p90 ${f(result.naive.p90)} ms (n=${result.naive.n})`,
  `ratio naive / ours (ramps, "all"): ${ratio.toFixed(1)}x`,
  `target <= 16 ms per live update (median and mean, every case): ${worst <= 16 && worstMean <= 16 ? 'met' : 'NOT met'} (worst median ${f(worst)} ms, worst mean ${f(worstMean)} ms)`,
  `process lanes: ${L.ranks} ranks at 10 Hz, ${L.lanes} lanes of 5 min (3000 points each, ${L.drawnPerLane} drawn per lane), window 5 min, one processes message (5 points per rank) every 5th update; same page, alternating: with the lanes per update median ${f(L.on.median)} ms, p90 ${f(L.on.p90)} ms, mean ${f(L.on.mean)} ms (n=${L.on.n}); updates with a processes message median ${f(L.onMessage.median)} ms, p90 ${f(L.onMessage.p90)} ms (n=${L.onMessage.n}); A/A baseline, no child process: median ${f(L.off.median)} ms, p90 ${f(L.off.p90)} ms`,
  `target < 16 ms median per update with ${L.ranks} lanes (all updates, and those with a processes message): ${lanesMet ? 'met' : 'NOT met'}`
];
console.log(lines.join('\n'));

if (record) {
  const file = join(here, 'RESULTS.md');
  const chromeVersion = browserVersion;
  const stamp = new Date().toISOString().slice(0, 16).replace('T', ' ');
  const section =
    `## timeline_update (${opts.width} px)\n\n_${stamp} UTC, ${process.arch}_\n\n` +
    `\`node bench/timeline_update.mjs --updates ${opts.updates} --naive ${opts.naiveUpdates}\`` +
    ` on ${cpus().length} cores (load average ${loadavg()[0].toFixed(1)}), headless Chromium ${chromeVersion}.\n\n` +
    lines.map(l => `- ${l}`).join('\n') +
    '\n\n';
  // Replace this benchmark's own section (as bench/_results.py does), keep the others.
  const text = existsSync(file)
    ? readFileSync(file, 'utf8')
    : '# Benchmark results\n\n';
  const parts = text.split(/^(?=## )/m);
  const own = `## timeline_update (${opts.width} px)`;
  const kept = parts.filter(
    p => !p.startsWith(own) && !/^## timeline_update \(20/.test(p)
  );
  const head = kept[0].startsWith('## ')
    ? '# Benchmark results\n\n'
    : kept.shift();
  const body = kept.map(p =>
    p.endsWith('\n\n') ? p : p.replace(/\n*$/, '\n\n')
  );
  writeFileSync(
    file,
    (head.replace(/\n*$/, '\n\n') + body.join('') + section).replace(
      /\n+$/,
      '\n'
    )
  );
  console.log(`recorded in ${file}`);
}
process.exit(met ? 0 : 1);

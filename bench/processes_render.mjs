#!/usr/bin/env node
// Processes section at scale: 64 ranks reporting at 10 Hz (one `processes` message every
// 0.5 s with 5 new points per rank), each lane full (3000 points), in the real ProcessesView
// in headless system Chromium. Prints the time of one update (apply + render + the style and
// layout it causes) against the 16 ms frame budget, and the points drawn per lane.
//
//   node bench/processes_render.mjs [--ranks 64] [--updates 40] [--width 280] [--record]
//
// Bundles bench/processes_render.entry.ts with rspack like bench/timeline_update.mjs.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir, cpus, loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execFileSync } from 'node:child_process';

import { bundle, chromiumPath, runBench } from './_bundle.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..');
const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};
const opts = {
  ranks: arg('ranks', 64),
  updates: arg('updates', 40),
  width: arg('width', 280)
};
const chromium = chromiumPath();

const out = mkdtempSync(join(tmpdir(), 'vramscope-bench-'));
await bundle(join(here, 'processes_render.entry.ts'), out);
const css = readFileSync(join(root, 'style', 'processes.css'), 'utf8');
writeFileSync(
  join(out, 'index.html'),
  `<!doctype html><html><head><meta charset="utf-8"><style>${css}</style></head>` +
    '<body><script src="bench.js"></script></body></html>'
);
const { result: r, browserVersion } = await runBench(out, chromium, opts);

const f = x => x.toFixed(2);
const met = r.update.median <= 16 && r.update.p90 <= 16;
const lines = [
  `${opts.ranks} ranks, lanes of 3000 points each (5 min at 10 Hz), section ${opts.width} px wide in an 800 px high page (lanes out of sight are not redrawn), one processes message per update (5 new points per rank, as every 0.5 s at 10 Hz)`,
  `first draw (all lanes): ${f(r.firstMs)} ms; ${r.rows} lanes, ${r.drawnPerLane} pixel columns drawn per lane (a min/max pair each)`,
  `per update (apply + render + style/layout): median ${f(r.update.median)} ms, mean ${f(r.update.mean)} ms, p90 ${f(r.update.p90)} ms (n=${r.update.n}): apply ${f(r.apply)} ms, render ${f(r.render)} ms, style/layout ${f(r.layout)} ms (medians)`,
  `target <= 16 ms (median and p90): ${met ? 'met' : 'NOT met'}`
];
console.log(lines.join('\n'));
if (process.argv.includes('--record')) {
  const python = join(root, '.venv', 'bin', 'python');
  const script =
    'import sys, json; sys.path.insert(0, "bench"); from _results import record; ' +
    'record("processes_render", json.loads(sys.argv[1]))';
  const header = `\`node bench/processes_render.mjs\` on ${cpus().length} cores (load average ${loadavg()[0].toFixed(1)}), headless Chromium ${browserVersion}`;
  execFileSync(python, ['-c', script, JSON.stringify([header, ...lines])], {
    cwd: root,
    stdio: 'inherit'
  });
  console.log('recorded in bench/RESULTS.md');
}
process.exit(met ? 0 : 1);

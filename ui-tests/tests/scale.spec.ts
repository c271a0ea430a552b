/**
 * A model with 10,000 modules in the real UI (issue 14): a kernel cell builds an
 * nn.Sequential of 10,000 Linear(4, 4) layers and trains a step, then a small cell runs.
 * Every message the panel's session gets is timed in the page: its handling (validation,
 * the session's state, every listener, the insight view's DOM) plus the style and layout it
 * leaves to the browser (forced right after, so it is counted here and not in a later
 * frame). Each insight received is then handled again (the fastest of 5, after an empty one so
 * that every row is rebuilt) and must take < 50 ms: live, the kernel's own insight work
 * competes for the shared 2 cores, so live times only bound the median (< 50 ms), each but
 * the slowest (< 200 ms; it was 160-470 ms) and the slowest (< 1 s: one message descheduled
 * midway). Each comm payload must stay under 256 KiB (the kernel caps the layer table at
 * 1,000 rows). Long animation frames are logged beside, for diagnosis.
 */
import { expect, IJupyterLabPageFixture } from '@jupyterlab/galata';

import {
  expandSection,
  newNotebookWithPanel,
  runCode,
  shutDownOtherServers,
  test
} from './lab';

const BUDGET_MS = 50;
const KIB = 1024;

interface ITimed {
  type: string;
  ms: number;
  bytes: number;
}

/** Time every message the active session handles (see the file's comment). */
async function timeMessages(page: IJupyterLabPageFixture): Promise<void> {
  await page.evaluate(() => {
    const w = window as any;
    const panel = [...w.jupyterapp.shell.widgets('right')].find(
      (x: any) => x.id === 'vramscope-panel'
    );
    const session = panel._tracker.activeSession;
    const handle = session.handleMessage.bind(session);
    w.__vramscopeTimed = [] as ITimed[];
    w.__vramscopeInsights = [] as string[];
    const timedHandle = (raw: any) => {
      const start = performance.now();
      const msg = handle(raw);
      void document.body.offsetHeight; // style and layout of what it changed
      return { msg, ms: performance.now() - start };
    };
    session.handleMessage = (raw: any) => {
      const copy = JSON.stringify(raw);
      const { msg, ms } = timedHandle(raw);
      w.__vramscopeTimed.push({
        type: String(raw?.type),
        ms,
        bytes: copy.length,
        valid: !!msg
      });
      if (raw?.type === 'insight') {
        w.__vramscopeInsights.push(copy);
      }
      return msg;
    };
    // Each insight received, handled again `rounds` times right after an empty one (so that
    // every layer row is rebuilt): the fastest of each, in ms. On the shared 2 cores the
    // kernel's own insight work competes with the page while the live messages arrive.
    // `count`: the first insights only, those in the timed list the test read (another one
    // can arrive meanwhile: the kernel's insight work goes on after a cell's reply).
    w.__vramscopeReplay = (rounds: number, count: number): number[] => {
      const empty = JSON.parse(w.__vramscopeInsights[0]);
      empty.insight.layers = [];
      return w.__vramscopeInsights.slice(0, count).map((copy: string) => {
        const times: number[] = [];
        for (let i = 0; i < rounds; i++) {
          handle(JSON.parse(JSON.stringify(empty)));
          void document.body.offsetHeight;
          times.push(timedHandle(JSON.parse(copy)).ms);
        }
        return Math.min(...times); // the work itself: contention only adds time
      });
    };
    w.__vramscopeFrames = [];
    new PerformanceObserver(list => {
      for (const e of list.getEntries() as any[]) {
        w.__vramscopeFrames.push({
          at: Math.round(e.startTime),
          ms: Math.round(e.duration),
          scripts: e.scripts.map(
            (s: any) => `${s.invoker} ${Math.round(s.duration)} ms`
          )
        });
      }
    }).observe({ type: 'long-animation-frame' });
  });
}

const timed = (page: IJupyterLabPageFixture): Promise<ITimed[]> =>
  page.evaluate(() => (window as any).__vramscopeTimed);

test('a 10,000-module model: every panel update is handled in < 50 ms', async ({
  page,
  pageErrors,
  request
}) => {
  test.setTimeout(240_000);
  // alone on the machine: the other worker's last kernels go too (playwright.config.ts)
  await shutDownOtherServers(request, test.info().parallelIndex);
  await newNotebookWithPanel(page, 'scale.ipynb', 460);
  await expandSection(page.locator('#vramscope-panel'), 'Model insight');
  await timeMessages(page);
  await runCode(
    page,
    0,
    [
      'import torch',
      'big = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(10_000)])',
      'opt = torch.optim.SGD(big.parameters(), lr=0.1)',
      'loss = big(torch.randn(2, 4)).sum()',
      'loss.backward()',
      'opt.step()'
    ].join('\n')
  );
  const insight = page.locator('#vramscope-panel .vramscope-Insight');
  // the insight of `big`: the kernel's 1,000 rows, the tree showing the first 50 (TREE_ROWS_STEP)
  await expect(insight.locator('.vramscope-Insight-model')).toHaveValue('big', {
    timeout: 60_000
  });
  const foot = insight.locator('.vramscope-Layers-foot');
  await expect(foot).toContainText('Showing 50 of 1000 rows (1000 modules;');
  await expect(insight.locator('.vramscope-Layers-bar')).toHaveCount(50);
  // the kernel's holders scan continues in slices; wait until it has finished
  await expect(insight.locator('.vramscope-Insight-meta')).not.toContainText(
    'partial',
    { timeout: 60_000 }
  );
  // a cell that changes what insight shows (a 2 MiB tensor bound): its insight, whole or
  // slim; a cell that changes nothing shown gets none
  await runCode(page, 1, 'after = torch.ones(2**19)');
  await expect(
    page.locator('#vramscope-panel .vramscope-CellTable-row')
  ).toHaveCount(2);
  // "Show more" renders the next 50
  await insight.locator('.vramscope-Layers-more').click();
  await expect(insight.locator('.vramscope-Layers-bar')).toHaveCount(100);

  const messages = await timed(page);
  const frames = await page.evaluate(() => (window as any).__vramscopeFrames);
  console.log(
    'messages handled:',
    JSON.stringify(
      messages.map(m => `${m.type} ${m.ms.toFixed(1)} ms ${m.bytes} B`)
    )
  );
  console.log('long animation frames:', JSON.stringify(frames));
  const insights = messages.filter(m => m.type === 'insight');
  const replayed: number[] = await page.evaluate(
    count => (window as any).__vramscopeReplay(5, count),
    insights.length
  );
  console.log(
    'insights handled again (fastest of 5, rows rebuilt):',
    JSON.stringify(replayed.map(ms => `${ms.toFixed(1)} ms`))
  );
  expect(replayed).toHaveLength(insights.length);
  for (const ms of replayed) {
    expect(ms, 'insight handled again in').toBeLessThan(BUDGET_MS);
  }
  expect(insights.length).toBeGreaterThanOrEqual(2); // one per cell, at least
  expect(messages.filter(m => m.type === 'cell')).toHaveLength(2);
  expect(Math.max(...insights.map(m => m.bytes))).toBeGreaterThan(50 * KIB); // the big one
  for (const m of messages) {
    expect(m.bytes, `${m.type} payload`).toBeLessThan(256 * KIB);
  }
  // Live, with the kernel busy beside: the median over every message under the budget, and
  // every message but the slowest under 4x. A live time is wall-clock time on a shared 2-core
  // machine: one message descheduled in its middle has taken 237 ms where its work takes ~17
  // (the replay above bounds the work itself), so the slowest one only may not freeze the
  // page (1 s).
  const live = messages.map(m => m.ms).sort((a, b) => a - b);
  expect(live[Math.floor(live.length / 2)]).toBeLessThan(BUDGET_MS);
  expect(live.length).toBeGreaterThanOrEqual(10);
  expect(
    live[live.length - 2],
    'all but the slowest message, live'
  ).toBeLessThan(4 * BUDGET_MS);
  expect(live[live.length - 1], 'the slowest message, live').toBeLessThan(1000);
  expect(pageErrors).toEqual([]);
});

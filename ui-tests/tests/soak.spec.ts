/**
 * A bounded browser soak (issue 14): a notebook of 40 cells run with Run All at 50 Hz
 * sampling, three times, with a page reload and then a kernel restart before the third.
 * Every round's cells reach the panel once (no record lost or doubled, the restart marked),
 * no page error, and the page's JS heap after a forced GC stays under HEAP_BOUND and grows
 * < ROUND_GROWTH from one round to the next.
 */
import { expect, IJupyterLabPageFixture } from '@jupyterlab/galata';

import { openPanel, rows, runAll, test } from './lab';
import { openNotebookFile } from './notebookfile';
import { debuggerAnswered } from './utils';

const CELLS = 40;
const MIB = 1024 * 1024;
/** The page's JS heap after GC, JupyterLab included (measured 39-41 MiB). */
const HEAP_BOUND = 96 * MIB;
/** Growth allowed between two rounds in the same page (after GC). */
const ROUND_GROWTH = 8 * MIB;

const SOURCES = [
  'import vramscope\nvramscope.settings(sample_hz=50)',
  ...Array.from(
    { length: CELLS - 1 },
    (_, i) => `soak_${i} = bytearray(${(i % 5) + 1} * 1024 * 1024)`
  )
];

async function heapAfterGc(page: IJupyterLabPageFixture): Promise<number> {
  const cdp = await page.context().newCDPSession((page as any).page);
  await cdp.send('HeapProfiler.collectGarbage');
  const { usedSize } = await cdp.send('Runtime.getHeapUsage');
  await cdp.detach();
  return usedSize;
}

async function connected(page: IJupyterLabPageFixture): Promise<void> {
  await openPanel(page);
  await expect(
    page.locator('#vramscope-panel .vramscope-Status')
  ).toHaveAttribute('data-status', 'connected', { timeout: 60_000 });
}

// galata mocks the kernels/sessions REST routes and answers every POST with 201, which
// breaks `POST /api/kernels/<id>/restart` (JupyterLab expects 200): talk to the server.
// a page loaded for it: its bound on the page's heap is for a fresh JupyterLab
test.use({ kernels: null, sessions: null, sharePage: false });

test('soak: Run All three times, a page reload and a kernel restart before the third', async ({
  page,
  pageErrors,
  tmpPath
}) => {
  test.setTimeout(170_000);
  await openNotebookFile(page, `${tmpPath}/soak.ipynb`, SOURCES);
  await connected(page);

  await runAll(page);
  await expect(rows(page)).toHaveCount(CELLS);
  const first = await heapAfterGc(page);
  await runAll(page); // a second round in the same page
  await expect(rows(page)).toHaveCount(2 * CELLS);
  const second = await heapAfterGc(page);

  // a reload: the history comes back from the kernel, nothing twice
  await page.reload({ waitForIsReady: false });
  await page.waitForFunction(
    () =>
      !!(window as any).jupyterapp?.shell &&
      !!document.querySelector('.jp-NotebookPanel')
  );
  await connected(page);
  await expect(rows(page)).toHaveCount(2 * CELLS);

  // a kernel restart: the history is kept in the page, the restart marked once. First let
  // JupyterLab's debugger have its replies: a restart cancels a pending debug_request, and
  // JupyterLab reports that as an uncaught error of its own.
  await debuggerAnswered(page);
  await page.evaluate(() => {
    void (window as any).jupyterapp.commands.execute('notebook:restart-kernel');
  });
  await page.locator('.jp-Dialog .jp-mod-accept').click();
  await expect(
    page.locator('#vramscope-panel .vramscope-CellTable-restart')
  ).toHaveCount(1, { timeout: 30_000 });
  await connected(page);
  await expect(rows(page)).toHaveCount(2 * CELLS);
  await runAll(page);
  await expect(rows(page)).toHaveCount(3 * CELLS);

  const counts = await rows(page).evaluateAll(nodes =>
    nodes.map(
      n => n.querySelector('.vramscope-CellTable-code')?.textContent ?? ''
    )
  );
  for (let i = 0; i < CELLS - 1; i++) {
    expect(
      counts.filter(t => t.startsWith(`soak_${i} =`)),
      `soak_${i}`
    ).toHaveLength(3);
  }
  const last = await heapAfterGc(page);
  console.log(
    `JS heap after GC: ${(first / MIB).toFixed(1)} MiB after round 1, ` +
      `${(second / MIB).toFixed(1)} MiB after round 2, ` +
      `${(last / MIB).toFixed(1)} MiB at the end`
  );
  expect(second - first).toBeLessThan(ROUND_GROWTH);
  for (const heap of [first, second, last]) {
    expect(heap).toBeLessThan(HEAP_BOUND);
  }
  expect(pageErrors).toEqual([]);
});

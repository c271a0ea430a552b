/**
 * JupyterLab (galata) helpers shared by the specs: a new notebook with the vramscope panel
 * open, cells whose source is set through the model, and panel locators.
 */
import {
  expect,
  IJupyterLabPageFixture,
  test as galataTest
} from '@jupyterlab/galata';
import type { APIRequestContext, Locator, Page } from '@playwright/test';
import * as path from 'path';

import { closeLeft, openDocument, openNotebookFile } from './notebookfile';
import { SHARE_PAGE_DEFAULT, SharedLab } from './sharedpage';
import {
  debuggerAnswered,
  filterDebuggerSources,
  forgetDebugRequests,
  isolateWorkspaces,
  pageErrorFixtures,
  type PageErrorFixtures,
  ROOT,
  watchDebugRequests
} from './utils';

/**
 * galata's `test` on this worker's own JupyterLab server, which after each test waits until the page's kernel connections have
 * settled (see `kernelsSettled`) before the page is closed, which shuts down the kernels
 * that earlier tests left on the server while the test runs (see `leftKernels`), and whose
 * `pageErrors` fixture collects the page errors a spec asserts on, JupyterLab's cancelled
 * debug request left out (utils.ts, `pageErrorFixtures`: the one place that tolerates it).
 * Its tests share their worker's JupyterLab page, put back as fresh after each
 * (sharedpage.ts), unless a spec says `test.use({ sharePage: false })`.
 */
export const test = galataTest.extend<
  { settleKernels: void; sharePage: boolean } & PageErrorFixtures,
  { sharedLab: SharedLab }
>({
  ...pageErrorFixtures,
  // The JupyterLab server of this worker (playwright.config.ts starts one per worker).
  baseURL: async ({ baseURL }, use, testInfo) => {
    await use(serverOf(testInfo.parallelIndex)?.url ?? baseURL);
  },
  sharePage: [SHARE_PAGE_DEFAULT, { option: true }],
  sharedLab: [
    async ({ browser }, use, workerInfo) => {
      const lab = await SharedLab.open(
        browser,
        workerInfo.project.use.viewport
      );
      await use(lab);
      const { loaded, reused, reloadedAfter } = lab.counts;
      if (loaded + reused) {
        console.log(
          `[shared page] worker ${workerInfo.parallelIndex}: JupyterLab loaded ` +
            `${loaded} times for ${loaded + reused} tests` +
            (reloadedAfter.length
              ? `; not as fresh after: ${reloadedAfter.join('; ')}`
              : '')
        );
      }
      await lab.close();
    },
    { scope: 'worker' }
  ],
  // The shared page's context (Playwright's `page` fixture takes its first page), cleared
  // of what the test added to it once the test is over.
  context: async ({ context, sharePage, sharedLab }, use) => {
    if (!sharePage) {
      await filterDebuggerSources(context);
      await isolateWorkspaces(context);
      await use(context);
      return;
    }
    await sharedLab.beginTest();
    await use(sharedLab.context);
    await sharedLab.endTest();
  },
  // galata loads JupyterLab unless the shared page has it, as fresh
  autoGoto: async ({ autoGoto, sharePage, sharedLab }, use) => {
    await use(autoGoto && !(sharePage && sharedLab.loaded));
  },
  // Closed (or, shared, put back as fresh) only once its kernel connections have settled.
  // An override, not part of the auto fixture below: a test that never asks for `page` (a
  // report opened in a bare browser page) loads no JupyterLab.
  page: async ({ page, sharePage, sharedLab, tmpPath }, use, testInfo) => {
    if (sharePage) {
      await sharedLab.ready(page, tmpPath);
    }
    await use(page);
    await kernelsSettled(page);
    if (sharePage) {
      await sharedLab.reset(page, testInfo);
      forgetDebugRequests(page); // its listeners go with the test's (sharedLab.endTest)
    }
  },
  settleKernels: [
    async ({ request }, use) => {
      // Listed before the test starts any kernel; shut down while it runs, the errors kept
      // for after it (a rejection left unhandled meanwhile would end the worker).
      const shutdowns = shutDown(request, await leftKernels(request)).then(
        () => null,
        (error: unknown) => error
      );
      await use();
      const failed = await shutdowns;
      if (failed) {
        throw failed;
      }
    },
    { auto: true }
  ]
});

/** The URLs of the JupyterLab servers playwright.config.ts started, one per worker. */
function serverUrls(): string[] {
  return JSON.parse(process.env.VRAMSCOPE_UI_URLS || '[]');
}

/**
 * The JupyterLab server of worker `parallelIndex` (its URL and data dir), from the servers
 * playwright.config.ts started (VRAMSCOPE_UI_URLS, VRAMSCOPE_UI_DATA_DIRS); null when the
 * config started none. Two workers on one server would shut down each other's kernels.
 */
export function serverOf(
  parallelIndex: number
): { url: string; dataDir: string } | null {
  const urls = serverUrls();
  const dataDirs: string[] = JSON.parse(
    process.env.VRAMSCOPE_UI_DATA_DIRS || '[]'
  );
  if (!urls.length) {
    return null;
  }
  if (parallelIndex >= urls.length || urls.length !== dataDirs.length) {
    throw new Error(
      `worker ${parallelIndex} has no JupyterLab server of its own (${urls.length} ` +
        'started): set VRAMSCOPE_UI_WORKERS instead of --workers'
    );
  }
  return { url: urls[parallelIndex], dataDir: dataDirs[parallelIndex] };
}

/**
 * Shut down the kernels on the other workers' servers that no page is connected to: for a
 * spec that times the page and runs alone once the others are done (playwright.config.ts,
 * project `alone`), where the other worker's last tests left theirs sampling (this worker's
 * go with `settleKernels`). A kernel still connected (a test running beside, as with
 * `--no-deps`) is left alone.
 */
export async function shutDownOtherServers(
  request: APIRequestContext,
  parallelIndex: number
): Promise<void> {
  const others = serverUrls().filter((_, i) => i !== parallelIndex);
  for (const url of others) {
    await shutDown(request, await leftKernels(request, url, true));
  }
}

/**
 * The kernels that earlier tests left on the server (the new page has started none yet), as
 * the URLs that shut them down: a session's (which shuts its kernel down) or else the
 * kernel's. With `kernels: null` galata leaves each test's kernels running: each with torch
 * imported and the bridge's sampler ticking at 10 Hz, ~0.5% of a core apiece, ~25 of them by
 * the end of the suite.
 */
async function leftKernels(
  request: APIRequestContext,
  server = '',
  unconnectedOnly = false
): Promise<string[]> {
  type Kernel = { id: string; connections?: number };
  const get = async (url: string) => (await request.get(server + url)).json();
  const sessions: { id: string; kernel?: Kernel }[] =
    await get('/api/sessions');
  const kernels: Kernel[] = await get('/api/kernels');
  const inSessions = new Set(sessions.map(s => s.kernel?.id));
  const left = (k?: Kernel) => !unconnectedOnly || !k?.connections;
  return [
    ...sessions
      .filter(s => left(s.kernel))
      .map(s => `${server}/api/sessions/${s.id}`),
    ...kernels
      .filter(k => !inSessions.has(k.id) && left(k))
      .map(k => `${server}/api/kernels/${k.id}`)
  ];
}

/** Shut down the kernels that `leftKernels` listed, all at once. */
async function shutDown(
  request: APIRequestContext,
  urls: string[]
): Promise<void> {
  await Promise.all(urls.map(url => request.delete(url)));
}

/**
 * Wait until no kernel websocket of `page` is still being opened. A page closed while one is
 * (a notebook just reopened, a kernel restarting or starting at the end of a test) drops the
 * connection while the server is still preparing it, and jupyter_server then fails its
 * handshake with `'NoneType' object has no attribute 'kernel_ws_protocol'` (a 500 and a
 * traceback in the server log).
 */
export async function kernelsSettled(page: Page): Promise<void> {
  if (page.isClosed()) {
    return;
  }
  const pending = () =>
    page
      .evaluate(() => {
        const app = (window as any).jupyterapp;
        if (!app) {
          return 0;
        }
        let n = 0;
        for (const widget of app.shell.widgets('main')) {
          const context = (widget as any).sessionContext;
          const kernel = context?.session?.kernel;
          if (!context || context.isDisposed) {
            continue;
          }
          if (
            !context.isReady ||
            context.isRestarting ||
            context.isTerminating
          ) {
            n++; // a session still starting: its kernel websocket is yet to open
          } else if (kernel && !kernel.isDisposed && kernel.status !== 'dead') {
            const ready =
              kernel.connectionStatus === 'connected' &&
              !['unknown', 'starting', 'restarting', 'autorestarting'].includes(
                kernel.status
              );
            n += ready ? 0 : 1;
          }
        }
        return n;
      })
      .catch(() => 0); // the page went away: nothing left to wait for
  await expect.poll(pending, { timeout: 60_000 }).toBe(0);
}

export async function openPanel(page: IJupyterLabPageFixture): Promise<void> {
  await page.evaluate(() =>
    (window as any).jupyterapp.shell.activateById('vramscope-panel')
  );
  await expect(page.locator('#vramscope-panel')).toBeVisible();
}

/** Put `source` into code cell `index`, a new cell when `index` is the cell count. */
export async function setCode(
  page: IJupyterLabPageFixture,
  index: number,
  source: string
): Promise<void> {
  // Through the notebook's model, as one transaction: typing would add the editor's
  // auto-indent, and galata's setCell/addCell drive the UI (~1.5 s a cell). A cell `index`
  // that exists gets the source (a code cell in place of another type); at the end, a new
  // one. The cell becomes the active one, as a cell added through the toolbar does.
  const error = await page.evaluate(
    ({ index, source }) => {
      const notebook = (window as any).jupyterapp.shell.currentWidget.content;
      const shared = notebook.model.sharedModel;
      if (index > shared.cells.length) {
        return `cell ${index} of a notebook of ${shared.cells.length}`;
      }
      shared.transact(() => {
        const cell = shared.cells[index];
        if (cell?.cell_type === 'code') {
          cell.setSource(source);
          return;
        }
        if (cell) {
          shared.deleteCell(index);
        }
        shared.insertCell(index, {
          cell_type: 'code',
          source,
          metadata: { trusted: true } // as JupyterLab's own insert commands make it
        });
      });
      notebook.activeCellIndex = index;
      return '';
    },
    { index, source }
  );
  expect(error, 'setCode').toBe('');
}

/** Run `source` in cell `index` and wait until it has finished. */
export async function runCode(
  page: IJupyterLabPageFixture,
  index: number,
  source: string
): Promise<void> {
  await setCode(page, index, source);
  await runCell(page, index);
}

/**
 * Start `source` in cell `index` without waiting for the end; resolves once the cell shows
 * `[*]` (queued or running). Await `waitForCell` for its end.
 */
export async function startCode(
  page: IJupyterLabPageFixture,
  index: number,
  source: string
): Promise<Locator> {
  await setCode(page, index, source);
  await debuggerAnswered(page);
  expect(await runCommand(page, index, false), `started cell ${index}`).toBe(
    true
  );
  const prompt = (await page.notebook.getCellLocator(index))!.locator(
    '.jp-InputArea-prompt'
  );
  await expect(prompt).toHaveText('[*]:', { timeout: 30_000 });
  return prompt;
}

/** Wait until cell `index` has run (its prompt shows an execution count). */
export async function waitForCell(
  page: IJupyterLabPageFixture,
  index: number,
  timeout = 120_000
): Promise<void> {
  const prompt = (await page.notebook.getCellLocator(index))!.locator(
    '.jp-InputArea-prompt'
  );
  await expect(prompt).toHaveText(/^\[\d+\]:$/, { timeout });
}

/** The text output of cell `index` (stdout or the execute result), trimmed. */
export async function cellOutput(
  page: IJupyterLabPageFixture,
  index: number
): Promise<string> {
  const output = (await page.notebook.getCellLocator(index))!.locator(
    '.jp-OutputArea-output'
  );
  await expect(output.first()).toBeVisible();
  return (await output.allInnerTexts()).join('\n').trim();
}

/**
 * A new notebook (kernelspec `kernel`: COLD_KERNEL for a test of what importing torch in a
 * cell shows) with the left sidebar closed and the vramscope panel open and connected.
 */
export async function newNotebookWithPanel(
  page: IJupyterLabPageFixture,
  name: string,
  panelWidth = 460,
  kernel = 'python3'
): Promise<Locator> {
  const dir = await page.filebrowser.getCurrentDirectory();
  await openNotebookFile(page, dir ? `${dir}/${name}` : name, [''], kernel);
  await closeLeft(page);
  await openPanel(page);
  await page.sidebar.setWidth(panelWidth, 'right');
  const status = page.locator('#vramscope-panel .vramscope-Status');
  await expect(status).toHaveAttribute('data-status', 'connected', {
    timeout: 60_000
  });
  return status;
}

/** The panel's cell-table rows. */
export const rows = (page: IJupyterLabPageFixture): Locator =>
  page.locator('#vramscope-panel .vramscope-CellTable-row');

/** The plotly figure of the timeline: its traces as plotly holds them (`gd.data`). */
export async function plotTraces(page: IJupyterLabPageFixture): Promise<any[]> {
  return page.evaluate(() => {
    const gd = document.querySelector(
      '#vramscope-panel .vramscope-Timeline-plot'
    ) as any;
    return (gd?.data ?? []).map((t: any) => ({
      type: t.type,
      name: t.name,
      text: t.text ? Array.from(t.text) : [],
      hovertext: t.hovertext ? Array.from(t.hovertext) : []
    }));
  });
}

/**
 * Run every cell of the current notebook (Run All) and wait until it stopped: no cell is
 * queued or running any more and at least one has run (a cell that raises, like the demo's
 * shape error, ends the run there).
 */
export async function runAll(
  page: IJupyterLabPageFixture,
  timeout = 240_000
): Promise<void> {
  await page.evaluate(() =>
    (window as any).jupyterapp.commands.execute('notebook:run-all-cells')
  );
  const prompts = page.locator('.jp-CodeCell .jp-InputArea-prompt');
  await expect
    .poll(
      async () => {
        const texts = (await prompts.allInnerTexts()).map(t => t.trim());
        return !texts.includes('[*]:') && texts.some(t => /^\[\d+\]:$/.test(t));
      },
      { timeout, intervals: [500] }
    )
    .toBe(true);
  // the prompts can read done while the last cell still runs (seen once in reload.spec)
  await expect
    .poll(
      () =>
        page.evaluate(
          () =>
            (window as any).jupyterapp.shell.currentWidget.sessionContext
              .kernelDisplayStatus
        ),
      { timeout }
    )
    .toBe('idle');
}

/**
 * Open the notebook at `file` with the left sidebar closed and the vramscope panel open (the
 * right sidebar `panelWidth` px wide when given, else at its default width) and connected;
 * resolves to the panel.
 */
export async function openWithPanel(
  page: IJupyterLabPageFixture,
  file: string,
  panelWidth?: number
): Promise<Locator> {
  watchDebugRequests(page);
  await openDocument(page, file);
  await closeLeft(page);
  await openPanel(page);
  if (panelWidth !== undefined) {
    await page.sidebar.setWidth(panelWidth, 'right');
  }
  const panel = page.locator('#vramscope-panel');
  await expect(panel.locator('.vramscope-Status')).toHaveAttribute(
    'data-status',
    'connected',
    { timeout: 60_000 }
  );
  return panel;
}

/**
 * The repository's demo notebook (the one README's first command opens), uploaded as
 * `dir`/demo.ipynb and opened with the panel (see `openWithPanel`); resolves to the panel.
 */
export async function openDemoWithPanel(
  page: IJupyterLabPageFixture,
  dir: string,
  panelWidth?: number
): Promise<Locator> {
  const file = `${dir}/demo.ipynb`;
  await page.contents.uploadFile(
    path.join(ROOT, 'examples', 'demo.ipynb'),
    file
  );
  return openWithPanel(page, file, panelWidth);
}

/** The header (accordion title) of the panel's pane titled `title`. */
export function sectionToggle(panel: Locator, title: string): Locator {
  return panel.locator(`.vramscope-Section-toggle[data-section="${title}"]`);
}

/**
 * Open (or with `open` false, close) the panel's pane titled `title`. Clicked again while it
 * is not so: the headers move when the answer line above them changes height (advice
 * arriving), and a click aimed at a header that moved between Playwright's hit test and the
 * click falls beside it (fresh run 110: the Timeline stayed open for 30 s).
 */
export async function expandSection(
  panel: Locator,
  title: string,
  open = true
): Promise<void> {
  const toggle = sectionToggle(panel, title);
  await expect(async () => {
    if ((await toggle.getAttribute('aria-expanded')) !== String(open)) {
      await toggle.click();
    }
    await expect(toggle).toHaveAttribute('aria-expanded', String(open), {
      timeout: 2_000
    });
  }).toPass({ timeout: 30_000 });
}

/** How many pixels of the canvas `canvas` have ink (a non-zero alpha). */
export async function inkedPixels(canvas: Locator): Promise<number> {
  return canvas.evaluate((c: HTMLCanvasElement) => {
    const data = c.getContext('2d')!.getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 3; i < data.length; i += 4) {
      n += data[i] > 0 ? 1 : 0;
    }
    return n;
  });
}

/** The current notebook's cells: type, source and execution count (null: not run, or markdown). */
export async function notebookCells(
  page: IJupyterLabPageFixture
): Promise<{ type: string; source: string; count: number | null }[]> {
  return page.evaluate(() =>
    (window as any).jupyterapp.shell.currentWidget.content.widgets.map(
      (c: any) => ({
        type: c.model.type,
        source: c.model.sharedModel.getSource(),
        count: c.model.type === 'code' ? c.model.executionCount : null
      })
    )
  );
}

/** The index of the first cell whose source contains `needle` (fails when none does). */
export async function cellIndex(
  page: IJupyterLabPageFixture,
  needle: string
): Promise<number> {
  const index = (await notebookCells(page)).findIndex(c =>
    c.source.includes(needle)
  );
  expect(index, `a cell containing ${needle}`).toBeGreaterThanOrEqual(0);
  return index;
}

/**
 * Run cell `index` of the current notebook with JupyterLab's own command (`notebook:run-cell`,
 * what Ctrl+Enter runs), in one round trip to the page: galata's runCell selects the cell,
 * presses the keys and polls the status bar, ~15 browser calls (~1.5-3 s a cell on 2 busy
 * cores). Once the kernel session is ready, the cell becomes the only selected, active one
 * and the command starts it; with `wait`, resolves once the kernel has replied (the cell has
 * its execution count; a cell that raised counts as run), else as soon as it is started.
 * Resolves to whether it ran (or started).
 */
async function runCommand(
  page: IJupyterLabPageFixture,
  index: number,
  wait: boolean
): Promise<boolean> {
  return page.evaluate(
    async ({ index, wait }) => {
      const app = (window as any).jupyterapp;
      const panel = app.shell.currentWidget;
      if (!panel?.content?.widgets?.[index]) {
        return false;
      }
      await panel.sessionContext.ready;
      const notebook = panel.content;
      notebook.activeCellIndex = index;
      notebook.deselectAll();
      const model = notebook.widgets[index].model;
      const run = app.commands.execute('notebook:run-cell');
      if (!wait) {
        void run.catch(() => undefined);
        return true;
      }
      await run;
      return model.executionCount !== null;
    },
    { index, wait }
  );
}

/** Run the notebook's cell `index` as it is and wait until it has finished. */
export async function runCell(
  page: IJupyterLabPageFixture,
  index: number
): Promise<void> {
  await debuggerAnswered(page); // the previous cell's: see watchDebugRequests
  expect(await runCommand(page, index, true), `ran cell ${index}`).toBe(true);
}

/**
 * Open the vramscope panel (at the right sidebar's width as it is: the default one unless a
 * test set it), wait until it is connected, close the panes `close` and open Optimize (which
 * asks the kernel for advice). Resolves to the panel and the Optimize pane's content.
 */
export async function openOptimizePane(
  page: IJupyterLabPageFixture,
  close: string[] = []
): Promise<{ panel: Locator; optimize: Locator }> {
  await openPanel(page);
  const panel = page.locator('#vramscope-panel');
  await expect(panel.locator('.vramscope-Status')).toHaveAttribute(
    'data-status',
    'connected',
    { timeout: 60_000 }
  );
  for (const title of close) {
    await expandSection(panel, title, false);
  }
  await expandSection(panel, 'Optimize');
  return { panel, optimize: panel.locator('.vramscope-Optimize') };
}

/**
 * Click an Optimize button that opens the insert preview (`Insert cell below`, `Insert undo
 * cell`), accept the dialog, and resolve to the previewed code and the index of the cell
 * it became (inserted, not run).
 */
export async function insertThroughPreview(
  page: IJupyterLabPageFixture,
  button: Locator
): Promise<{ code: string; index: number }> {
  await button.click();
  const dialog = page.locator('.jp-Dialog');
  await expect(dialog).toBeVisible();
  const code =
    (await dialog.locator('.vramscope-OptimizePreview-code').textContent()) ??
    '';
  expect(code).toMatch(/^# vramscope: /);
  await dialog.locator('.jp-mod-accept').click();
  await expect(dialog).toBeHidden();
  const cells = await notebookCells(page);
  const index = cells.findIndex(c => c.source === code);
  expect(index, 'the inserted cell').toBeGreaterThanOrEqual(0);
  expect(cells[index].count).toBeNull(); // inserted, not run
  return { code, index };
}

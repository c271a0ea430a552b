import { expect, IJupyterLabPageFixture } from '@jupyterlab/galata';
import type { Locator } from '@playwright/test';

import {
  inkedPixels,
  newNotebookWithPanel,
  runCode,
  setCode,
  test
} from './lab';
import { panelBuilt } from './utils';

/** The file whose appearance in the kernel's working directory ends SLOW_CELL early. */
const STOP_FILE = 'stop-cell';

/**
 * A cell that runs for about 5 s and grows memory step by step; it stops (and removes
 * STOP_FILE) as soon as the test has seen what it needs, ~2 s in.
 */
const SLOW_CELL = [
  `if os.path.exists('${STOP_FILE}'):  # left by a run that ended on its own`,
  `    os.remove('${STOP_FILE}')`,
  'xs = []',
  'for i in range(50):',
  `    if os.path.exists('${STOP_FILE}'):`,
  `        os.remove('${STOP_FILE}')`,
  '        break',
  '    xs.append(torch.ones(256 * 1024))  # 1 MiB more each step',
  '    time.sleep(0.1)'
].join('\n');

/** Cell `index` of the open notebook. */
const cell = (page: IJupyterLabPageFixture, index: number): Locator =>
  page
    .locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')
    .nth(index);

/**
 * Put `source` in cell `index` and start it, through JupyterLab's own commands (galata's
 * notebook helpers need the page galata loaded; part of this test runs after a plain reload).
 */
async function start(
  page: IJupyterLabPageFixture,
  index: number,
  source: string,
  command = 'notebook:run-cell'
): Promise<Locator> {
  await page.evaluate(
    ({ index, source, command }) => {
      const app = (window as any).jupyterapp;
      const notebook = app.shell.currentWidget.content;
      notebook.widgets[index].model.sharedModel.setSource(source);
      notebook.activeCellIndex = index;
      void app.commands.execute(command);
    },
    { index, source, command }
  );
  return cell(page, index).locator('.jp-InputArea-prompt');
}

const newest = (widget: Locator) => async () =>
  Number((await widget.getAttribute('data-newest-t')) ?? -Infinity);

/**
 * While `cell` runs, the widget's newest point moves and the running cell has its band.
 * `dir` is the notebook's folder (the kernel's working directory).
 */
async function followsARunningCell(
  page: IJupyterLabPageFixture,
  widget: Locator,
  index: number,
  dir: string
): Promise<void> {
  const before = await newest(widget)();
  const bands = Number(await widget.getAttribute('data-bands'));
  const prompt = await start(page, index, SLOW_CELL);
  await expect(prompt).toHaveText('[*]:', { timeout: 30_000 });
  const first = await expect
    .poll(newest(widget), { timeout: 30_000 })
    .toBeGreaterThan(before)
    .then(() => newest(widget)());
  // ... and keeps moving while the cell still runs
  await expect
    .poll(newest(widget), { timeout: 10_000 })
    .toBeGreaterThan(first + 0.5);
  await expect
    .poll(async () => Number(await widget.getAttribute('data-bands')))
    .toBeGreaterThan(bands);
  await expect(prompt).toHaveText('[*]:');
  const inked = await inkedPixels(
    widget.locator('canvas.vramscope-Widget-lines')
  );
  expect(inked).toBeGreaterThan(50);
  await page.contents.uploadContent('', 'text', `${dir}/${STOP_FILE}`);
  await expect(prompt).toHaveText(/^\[\d+\]:$/, { timeout: 60_000 });
}

test.describe('inline widget (issue 11 item 3)', () => {
  test.use({ kernels: null, sessions: null });

  test.skip(!panelBuilt(), 'the front end is not built');

  test('vramscope.widget() draws live in cell output, survives a reload, goes when cleared', async ({
    page,
    tmpPath
  }) => {
    await page.setViewportSize({ width: 1400, height: 900 });
    await newNotebookWithPanel(page, 'widget.ipynb', 320);
    await runCode(page, 0, 'import os, time, torch, vramscope');
    await runCode(page, 1, 'vramscope.widget(window=30, height=100)');
    await setCode(page, 2, 'pass');
    await setCode(page, 3, 'pass');
    const widget = cell(page, 1).locator('.vramscope-Widget');
    await expect(widget).toBeVisible({ timeout: 30_000 });
    await expect(widget).toHaveAttribute('data-status', 'connected');
    await expect(widget).toHaveAttribute('data-device', 'cpu');
    await expect(widget.locator('.vramscope-Widget-now')).toHaveText(
      /[\d.]+ (MiB|GiB) in use/
    );

    await test.step('the newest point moves while a cell runs', async () => {
      await followsARunningCell(page, widget, 2, tmpPath);
      await widget.screenshot({
        path: test.info().outputPath('widget.png')
      });
    });

    await test.step('after a page reload it finds the session again', async () => {
      // A notebook renamed after its kernel session started (galata's createNew renames
      // Untitled.ipynb) leaves the session at the old path, and a reload would then start a
      // new kernel (that holds no widget). newNotebookWithPanel writes widget.ipynb under its
      // name and opens it, so this only guards: point the session at the notebook.
      await page.evaluate(async () => {
        const panel = (window as any).jupyterapp.shell.currentWidget;
        const session = panel.sessionContext.session;
        if (session.path !== panel.context.path) {
          await session.setPath(panel.context.path);
        }
      });
      await page.notebook.save();
      // a plain reload (galata's, without its wait for a Launcher this layout has not got)
      await page.reload({ waitForIsReady: false });
      await page.waitForURL(/widget\.ipynb/);
      await page
        .locator('#jupyterlab-splash')
        .waitFor({ state: 'detached', timeout: 60_000 });
      await page.waitForSelector('.jp-Notebook');
      const restored = cell(page, 1).locator('.vramscope-Widget');
      await expect(restored).toBeVisible({ timeout: 60_000 });
      await expect(restored).toHaveAttribute('data-status', 'connected', {
        timeout: 60_000
      });
      await followsARunningCell(page, restored, 2, tmpPath);
    });

    await test.step('clearing the output disposes it', async () => {
      const errors: string[] = [];
      page.on('console', msg => {
        if (msg.type() === 'error') {
          errors.push(msg.text());
        }
      });
      await start(
        page,
        1,
        'vramscope.widget(window=30, height=100)',
        'notebook:clear-cell-output'
      );
      await expect(page.locator('.vramscope-Widget')).toHaveCount(0);
      // a cell still runs fine with the view gone (nothing left drawing into it)
      const prompt = await start(page, 3, 'xs = None');
      await expect(prompt).toHaveText(/^\[\d+\]:$/, { timeout: 60_000 });
      expect(errors.filter(e => e.includes('vramscope'))).toEqual([]);
    });
  });
});

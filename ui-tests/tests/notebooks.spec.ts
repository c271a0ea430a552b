/**
 * Several notebooks in one JupyterLab (issue 14): two notebooks on two kernels each show only
 * their own cells, and activating the other notebook switches the panel; two notebooks on
 * one kernel (the second switched to the first's kernel, as the kernel selector does) should
 * both show the same records, none twice and none lost. No fixed sleeps.
 */
import { expect, IJupyterLabPageFixture } from '@jupyterlab/galata';

import { openPanel, rows, runCode, test } from './lab';
import { closeLeft, openNotebookFile } from './notebookfile';

/**
 * A new notebook `dir`/`name` (written through the contents API, so it keeps its name and
 * starts its own python3 kernel), open with the panel connected to it.
 */
async function newNotebook(
  page: IJupyterLabPageFixture,
  dir: string,
  name: string
): Promise<void> {
  await openNotebookFile(page, `${dir}/${name}`, ['']);
  await closeLeft(page);
  await openPanel(page);
  await expect(
    page.locator('#vramscope-panel .vramscope-Status')
  ).toHaveAttribute('data-status', 'connected', { timeout: 60_000 });
}

/** The id of the current notebook's kernel. */
const kernelId = (page: IJupyterLabPageFixture): Promise<string> =>
  page.evaluate(
    () =>
      (window as any).jupyterapp.shell.currentWidget.sessionContext.session
        .kernel.id
  );

/** The cell table's rows as text (their sources' first lines), newest first. */
const rowTexts = (page: IJupyterLabPageFixture): Promise<string[]> =>
  rows(page).evaluateAll(nodes =>
    nodes.map(n =>
      (
        n.querySelector('.vramscope-CellTable-code')?.textContent ??
        n.textContent ??
        ''
      ).trim()
    )
  );

async function activate(
  page: IJupyterLabPageFixture,
  name: string
): Promise<void> {
  await page.notebook.activate(name);
  await expect(
    page.locator('#vramscope-panel .vramscope-Status')
  ).toHaveAttribute('data-status', 'connected', { timeout: 60_000 });
}

test('two notebooks on two kernels: each panel shows its own cells', async ({
  page,
  pageErrors,
  tmpPath
}) => {
  await newNotebook(page, tmpPath, 'a.ipynb');
  await runCode(page, 0, 'in_a = 1');
  await expect(rows(page)).toHaveCount(1);
  const a = await kernelId(page);

  await newNotebook(page, tmpPath, 'b.ipynb');
  expect(await kernelId(page)).not.toBe(a);
  await expect(rows(page)).toHaveCount(0); // b's kernel has run nothing
  await runCode(page, 0, 'in_b = 2');
  await runCode(page, 1, 'in_b2 = 3');
  await expect(rows(page)).toHaveCount(2);
  expect(await rowTexts(page)).toEqual([
    expect.stringContaining('in_b2 = 3'),
    expect.stringContaining('in_b = 2')
  ]);

  await activate(page, 'a.ipynb');
  await expect(rows(page)).toHaveCount(1);
  expect(await rowTexts(page)).toEqual([expect.stringContaining('in_a = 1')]);
  await activate(page, 'b.ipynb');
  await expect(rows(page)).toHaveCount(2);
  expect(pageErrors).toEqual([]);
});

// JupyterLab gives a page's second connection to a kernel no comms; the bridge runs its comm
// over that connection's shell and iopub messages by hand (src/model/iopubcomm.ts).
test('two notebooks on one kernel: the same records in both, none twice', async ({
  page,
  pageErrors,
  tmpPath
}) => {
  await newNotebook(page, tmpPath, 'one.ipynb');
  await runCode(page, 0, 'from_one = 1');
  await expect(rows(page)).toHaveCount(1);
  const shared = await kernelId(page);

  await newNotebook(page, tmpPath, 'two.ipynb');
  const own = await kernelId(page);
  // what the kernel selector does: switch two.ipynb to one.ipynb's running kernel
  await page.evaluate(async id => {
    const context = (window as any).jupyterapp.shell.currentWidget
      .sessionContext;
    await context.changeKernel({ id });
  }, shared);
  await expect.poll(() => kernelId(page), { timeout: 60_000 }).toBe(shared);
  expect(shared).not.toBe(own);
  await expect(
    page.locator('#vramscope-panel .vramscope-Status')
  ).toHaveAttribute('data-status', 'connected', { timeout: 60_000 });
  // the shared kernel's history, from hello
  await expect(rows(page)).toHaveCount(1);
  await runCode(page, 0, 'from_two = 2');
  await expect(rows(page)).toHaveCount(2);
  const inTwo = await rowTexts(page);
  expect(inTwo).toEqual([
    expect.stringContaining('from_two = 2'),
    expect.stringContaining('from_one = 1')
  ]);

  await activate(page, 'one.ipynb');
  await expect(rows(page)).toHaveCount(2);
  await runCode(page, 1, 'from_one_again = 3');
  await expect(rows(page)).toHaveCount(3);
  const inOne = await rowTexts(page);
  await activate(page, 'two.ipynb');
  await expect(rows(page)).toHaveCount(3);
  expect(await rowTexts(page)).toEqual(inOne);
  expect(inOne).toEqual([
    expect.stringContaining('from_one_again = 3'),
    expect.stringContaining('from_two = 2'),
    expect.stringContaining('from_one = 1')
  ]);

  // one.ipynb's connection is the one that handles comms: closing it leaves two's working
  await activate(page, 'one.ipynb');
  await page.notebook.close(true);
  expect(await page.notebook.isOpen('one.ipynb')).toBe(false);
  await activate(page, 'two.ipynb');
  await runCode(page, 1, 'after_close = 4');
  await expect(rows(page)).toHaveCount(4);
  expect(await rowTexts(page)).toEqual([
    expect.stringContaining('after_close = 4'),
    ...inOne
  ]);
  // closing one.ipynb may cancel a debug request of JupyterLab's: pageErrors leaves that
  // one JupyterLab error out (utils.ts), every other page error fails
  expect(pageErrors).toEqual([]);
});

/**
 * Notebooks written through the contents API and opened by path (no rename, unlike galata's
 * createNew(name), so every page that opens the path gets the same kernel session).
 */
import { expect, IJupyterLabPageFixture } from '@jupyterlab/galata';

import { watchDebugRequests } from './utils';

/**
 * The kernelspec of a cold kernel (test/warm_kernels/zygote.py): for a test of what importing
 * torch in a cell shows. The servers' `python3` kernels are warm, forked with torch imported,
 * unless the run has VRAMSCOPE_COLD_KERNELS=1 (then every kernel is cold, and `python3` is it).
 */
export const COLD_KERNEL =
  process.env.VRAMSCOPE_COLD_KERNELS === '1' ? 'python3' : 'python3-cold';

/** A notebook (kernelspec `kernel`) of code cells with these sources, as .ipynb JSON. */
export function notebookJson(sources: string[], kernel = 'python3'): string {
  return JSON.stringify({
    cells: sources.map(source => ({
      cell_type: 'code',
      source,
      metadata: {},
      outputs: [],
      execution_count: null
    })),
    metadata: {
      kernelspec: {
        name: kernel,
        display_name: 'Python 3',
        language: 'python'
      }
    },
    nbformat: 4,
    nbformat_minor: 5
  });
}

/**
 * Write the notebook `path` with these cell sources (on kernelspec `kernel`) and open it;
 * resolves once it is the current widget and its kernel session exists.
 */
export async function openNotebookFile(
  page: IJupyterLabPageFixture,
  path: string,
  sources: string[],
  kernel = 'python3'
): Promise<void> {
  watchDebugRequests(page);
  await page.contents.uploadContent(
    notebookJson(sources, kernel),
    'text',
    path
  );
  await openDocument(page, path);
}

/**
 * Open the notebook at `path` (JupyterLab's `docmanager:open`, as the file browser does);
 * resolves once it is the current widget and its kernel session exists.
 */
export async function openDocument(
  page: IJupyterLabPageFixture,
  path: string
): Promise<void> {
  await page.evaluate(async path => {
    await (window as any).jupyterapp.commands.execute('docmanager:open', {
      path,
      factory: 'Notebook'
    });
  }, path);
  await expect
    .poll(
      () =>
        page.evaluate(() => {
          const w = (window as any).jupyterapp.shell.currentWidget;
          return `${w?.context?.path}:${!!w?.sessionContext?.session?.kernel}`;
        }),
      { timeout: 60_000 }
    )
    .toBe(`${path}:true`);
}

/** Collapse the left sidebar (JupyterLab's shell, as View > Show Left Sidebar does). */
export async function closeLeft(page: IJupyterLabPageFixture): Promise<void> {
  await page.evaluate(() => (window as any).jupyterapp.shell.collapseLeft());
}

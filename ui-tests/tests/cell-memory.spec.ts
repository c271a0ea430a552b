import { expect, IJupyterLabPageFixture, test } from '@jupyterlab/galata';
import * as fs from 'fs';
import * as path from 'path';

import { panelBuilt, ROOT } from './utils';

const SCREENSHOT = path.join(ROOT, 'docs', 'images', 'panel.png');

async function openPanel(page: IJupyterLabPageFixture): Promise<void> {
  await page.evaluate(() =>
    (window as any).jupyterapp.shell.activateById('vramscope-panel')
  );
  await expect(page.locator('#vramscope-panel')).toBeVisible();
}

async function runCode(
  page: IJupyterLabPageFixture,
  index: number,
  source: string
) {
  if (index === 0) {
    await page.notebook.setCell(0, 'code', 'pass');
  } else {
    await page.notebook.addCell('code', 'pass');
  }
  // Set the source through the model: typing it would add the editor's auto-indent.
  await page.evaluate(
    ({ index, source }) => {
      const notebook = (window as any).jupyterapp.shell.currentWidget.content;
      notebook.widgets[index].model.sharedModel.setSource(source);
    },
    { index, source }
  );
  await page.notebook.runCell(index, { inplace: true });
}

async function newNotebookWithPanel(
  page: IJupyterLabPageFixture,
  name: string
) {
  await page.notebook.createNew(name);
  await page.sidebar.close('left');
  await openPanel(page);
  await page.sidebar.setWidth(460, 'right');
  const status = page.locator('#vramscope-panel .vramscope-Status');
  await expect(status).toHaveAttribute('data-status', 'connected', {
    timeout: 60_000
  });
  return status;
}

const rows = (page: IJupyterLabPageFixture) =>
  page.locator('#vramscope-panel .vramscope-CellTable-row');

test.describe('per-cell memory (issue 2)', () => {
  // galata mocks the kernels/sessions REST routes and answers every POST with 201, which
  // breaks `POST /api/kernels/<id>/restart` (JupyterLab expects 200): talk to the server.
  test.use({ kernels: null, sessions: null });

  test.skip(
    !panelBuilt(),
    'the front end has no #vramscope-panel yet (src/index.ts)'
  );

  /**
   * A new notebook on the Python kernel: a 64 MiB tensor reads `+64.0 MiB` in the cell
   * footer and in the panel's cell table.
   */
  test('a 64 MiB tensor shows +64.0 MiB in the footer and the panel', async ({
    page
  }) => {
    await newNotebookWithPanel(page, 'memory.ipynb');
    await expect(
      page.locator('#vramscope-panel .vramscope-Device[data-device-id="cpu"]')
    ).toBeVisible();

    // torch's import allocates by itself: import first, then measure the tensor alone.
    await runCode(page, 0, 'import torch');
    await runCode(
      page,
      1,
      'x = torch.ones(16 * 1024 * 1024)  # 64 MiB of float32'
    );
    const footer = (await page.notebook.getCellLocator(1))!.locator(
      '.vramscope-CellFooter-text'
    );
    await expect(footer).toContainText('+64.0 MiB');
    await expect(
      rows(page).and(page.locator('[data-execution-count="2"]'))
    ).toContainText('+64.0 MiB');

    await runCode(page, 2, 'del x');
    await expect(
      rows(page).and(page.locator('[data-execution-count="3"]'))
    ).toContainText('-64.0 MiB');
  });

  /**
   * After a kernel restart (dialog accepted) the panel reconnects, keeps the history from
   * before the restart and measures the new kernel's cells.
   */
  test('the panel reconnects after a kernel restart and keeps history', async ({
    page
  }) => {
    const status = await newNotebookWithPanel(page, 'restart.ipynb');
    await runCode(page, 0, 'import torch');
    await runCode(page, 1, 'x = torch.ones(16 * 1024 * 1024)');
    await expect(rows(page).filter({ hasText: '+64.0 MiB' })).toHaveCount(1);
    const before = await rows(page).count();

    await page.evaluate(() => {
      void (window as any).jupyterapp.commands.execute(
        'notebook:restart-kernel'
      );
    });
    await page.locator('.jp-Dialog .jp-mod-accept').click();
    await expect(status).toHaveAttribute('data-status', 'connected', {
      timeout: 30_000
    });

    // The new kernel is measured too (execution counts start again at 1).
    await runCode(page, 2, 'import torch');
    await runCode(page, 3, 'y = torch.ones(8 * 1024 * 1024)  # 32 MiB');
    const after = (await page.notebook.getCellLocator(3))!.locator(
      '.vramscope-CellFooter-text'
    );
    await expect(after).toContainText('+32.0 MiB');
    await expect(rows(page).filter({ hasText: '+32.0 MiB' })).toHaveCount(1);
    await expect(status).toHaveAttribute('data-status', 'connected');
    // History from before the restart is kept.
    await expect(rows(page).filter({ hasText: '+64.0 MiB' })).toHaveCount(1);
    expect(await rows(page).count()).toBeGreaterThanOrEqual(before + 2);
  });

  /**
   * The README's screenshot (docs/images/panel.png, overwritten on every run): a tensor, a
   * short training loop and a freed tensor, with the panel open next to the notebook.
   */
  test('screenshot of the panel next to a notebook', async ({ page }) => {
    await page.setViewportSize({ width: 1400, height: 1000 });
    await newNotebookWithPanel(page, 'tour.ipynb');
    await runCode(page, 0, 'import torch');
    await runCode(page, 1, 'x = torch.ones(16 * 1024 * 1024)  # 64 MiB');
    await runCode(
      page,
      2,
      [
        'model = torch.nn.Sequential(',
        '    torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)',
        ')',
        'optimizer = torch.optim.Adam(model.parameters())',
        'for _ in range(20):',
        '    loss = model(torch.randn(256, 1024)).pow(2).mean()',
        '    optimizer.zero_grad()',
        '    loss.backward()',
        '    optimizer.step()'
      ].join('\n')
    );
    await runCode(page, 3, 'del x');
    await expect(rows(page)).toHaveCount(4);
    await page.waitForTimeout(1500); // let the live views settle
    fs.mkdirSync(path.dirname(SCREENSHOT), { recursive: true });
    await page.screenshot({ path: SCREENSHOT });
  });
});

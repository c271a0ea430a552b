import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { expect } from '@jupyterlab/galata';
import type { Browser, Page } from '@playwright/test';

import {
  expandSection,
  newNotebookWithPanel,
  runCode,
  test,
  waitForCell
} from './lab';
import { IMPORT_TORCH, panelBuilt, ROOT, screenshotPath } from './utils';

const HOSTILE = '</script><img src=x onerror=alert(1)>';
const VRAMSCOPE = path.join(ROOT, '.venv', 'bin', 'vramscope');
const REPORT_URL = 'http://report.invalid/report.html';

/** A notebook whose model has a submodule named HOSTILE and whose cell starts with it. */
function hostileNotebook(dir: string): string {
  const cell = (id: string, source: string) => ({
    cell_type: 'code',
    id,
    metadata: {},
    execution_count: null,
    outputs: [],
    source
  });
  const nb = {
    nbformat: 4,
    nbformat_minor: 5,
    metadata: {
      kernelspec: {
        name: 'python3',
        display_name: 'Python 3',
        language: 'python'
      }
    },
    cells: [
      cell('imports', 'import torch'),
      cell(
        'hostile',
        [
          `# ${HOSTILE}`,
          'm = torch.nn.Sequential()',
          `m.add_module(${JSON.stringify(HOSTILE)}, torch.nn.Linear(256, 256))`,
          'out = m(torch.randn(4096, 256)).relu()  # keeps its saved input'
        ].join('\n')
      )
    ]
  };
  const file = path.join(dir, 'hostile.ipynb');
  fs.writeFileSync(file, JSON.stringify(nb));
  return file;
}

/**
 * Open `html` in a fresh page of `browser` as the only thing the network can give: every
 * other request is counted and aborted. Returns the page, the requests and the dialogs.
 */
async function openOffline(browser: Browser, html: string) {
  const context = await browser.newContext({
    viewport: { width: 1280, height: 900 }
  });
  const page = await context.newPage();
  const requests: string[] = [];
  const dialogs: string[] = [];
  page.on('dialog', dialog => {
    dialogs.push(dialog.message());
    void dialog.dismiss();
  });
  await context.route('**/*', route => {
    const url = route.request().url();
    if (url === REPORT_URL) {
      return route.fulfill({
        status: 200,
        contentType: 'text/html',
        body: html
      });
    }
    requests.push(url);
    return route.abort();
  });
  // a request for a fetched or referenced resource would show here too
  page.on('request', req => {
    if (req.url() !== REPORT_URL && !requests.includes(req.url())) {
      requests.push(req.url());
    }
  });
  await page.goto(REPORT_URL);
  return { page, context, requests, dialogs };
}

/** Every chart of the report page drawn by plotly (an SVG inside each chart div). */
async function expectPlots(page: Page, names: string[]): Promise<void> {
  for (const name of names) {
    await expect(
      page.locator(`#chart-${name}.js-plotly-plot .main-svg`).first()
    ).toBeVisible({ timeout: 30_000 });
  }
}

test.describe('reports (issue 11)', () => {
  test.use({ kernels: null, sessions: null });

  test.skip(!panelBuilt(), 'the front end has no #vramscope-panel yet');

  /**
   * `vramscope profile` writes an HTML report that draws its plots with no network at all,
   * and shows a module named `</script><img src=x onerror=alert(1)>` as text.
   */
  test('the HTML report opens offline and escapes user strings', async ({
    browser
  }) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'vramscope-report-'));
    const out = path.join(dir, 'hostile.html');
    execFileSync(VRAMSCOPE, ['profile', hostileNotebook(dir), '-o', out], {
      stdio: 'pipe',
      timeout: 150_000
    });
    const html = fs.readFileSync(out, 'utf8');
    const { page, context, requests, dialogs } = await openOffline(
      browser,
      html
    );
    await expectPlots(page, ['timeline', 'cells', 'layers', 'breakdown']);
    // the layer and the cell code are shown as text, in the tables and the plots
    await expect(
      page.locator('table code', { hasText: HOSTILE }).first()
    ).toBeVisible();
    await expect(
      page.locator('#chart-layers text', { hasText: HOSTILE }).first()
    ).toBeAttached();
    expect(await page.locator('img').count()).toBe(0);
    expect(
      await page.evaluate(() => document.querySelectorAll('script').length)
    ).toBe(3);
    await page.waitForTimeout(500); // an onerror handler would have run by now
    expect(dialogs).toEqual([]);
    expect(requests).toEqual([]);
    await context.close();
  });

  /**
   * The panel's Export menu: the HTML report is saved next to the notebook, opened in a new
   * tab (with its plots) and announced; Markdown opens in JupyterLab.
   */
  test('export from the panel and open the HTML', async ({ page }) => {
    await newNotebookWithPanel(page, 'export.ipynb');
    await runCode(page, 0, IMPORT_TORCH);
    await runCode(
      page,
      1,
      [
        'model = torch.nn.Sequential(',
        '    torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)',
        ')',
        'out = model(torch.randn(512, 1024))  # the graph keeps the activations'
      ].join('\n')
    );
    await runCode(page, 2, 'x = torch.ones(16 * 1024 * 1024)  # 64 MiB');
    await runCode(page, 3, 'del x');
    await waitForCell(page, 3);

    await expandSection(page.locator('#vramscope-panel'), 'Export');
    const button = page.locator('#vramscope-panel .vramscope-Export-button');
    await expect(button).toBeEnabled();
    const popup = page.context().waitForEvent('page');
    await button.click();
    await page
      .locator('.vramscope-ExportMenu .lm-Menu-item', { hasText: 'HTML' })
      .click();
    const tab = await popup;
    await tab.waitForURL(/\/files\/.*export\.vramscope\.html$/, {
      timeout: 60_000
    });
    await expect(tab).toHaveTitle('vramscope report: export.ipynb');
    await expectPlots(tab, ['timeline', 'cells', 'layers', 'breakdown']);
    // the summary's parts table opens the report; a per-cell table names the device
    await expect(
      tab.locator('table', { hasText: 'cpu' }).first()
    ).toBeVisible();
    await expect(
      page.locator('.jp-toast-message', { hasText: 'vramscope report saved' })
    ).toBeVisible();
    await expect(
      page.locator('#vramscope-panel .vramscope-Export-status')
    ).toContainText('export.vramscope.html');
    await tab.setViewportSize({ width: 1280, height: 900 });
    await tab.waitForTimeout(500); // the plots' resize after the viewport change
    await tab.screenshot({ path: screenshotPath('report.png') });
    await tab.close();

    // Markdown: saved next to it and opened in JupyterLab
    await button.click();
    await page
      .locator('.vramscope-ExportMenu .lm-Menu-item', { hasText: 'Markdown' })
      .click();
    await expect(
      page.locator('.lm-DockPanel-tabBar .lm-TabBar-tab', {
        hasText: 'export.vramscope.md'
      })
    ).toBeVisible({ timeout: 30_000 });
  });
});

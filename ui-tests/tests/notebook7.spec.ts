/**
 * The same installed extension in Jupyter Notebook 7 (issue 2): plain playwright pages (galata's
 * fixtures are JupyterLab-only) against the `jupyter notebook` server that
 * playwright.config.ts starts next to JupyterLab (`VRAMSCOPE_NB_URL`).
 */
import * as fs from 'fs';
import * as path from 'path';
import { expect, type Page, test as base } from '@playwright/test';

import {
  debuggerAnswered,
  filterDebuggerSources,
  IMPORT_TORCH,
  pageErrorFixtures,
  type PageErrorFixtures,
  panelBuilt,
  ROOT,
  screenshotPath,
  watchDebugRequests
} from './utils';

/**
 * Playwright's `test` with the specs' shared `pageErrors` fixture, and the debugger's kernel
 * sources filtered as in every spec (utils.ts).
 */
const test = base.extend<PageErrorFixtures>({
  ...pageErrorFixtures,
  context: async ({ context }, use) => {
    await filterDebuggerSources(context);
    await use(context);
  }
});

const NB_URL = process.env.VRAMSCOPE_NB_URL as string;
const NAME = 'notebook7.ipynb';

const code = (source: string) => ({
  cell_type: 'code',
  metadata: {},
  source,
  outputs: [],
  execution_count: null
});

/** The vramscope plugins known to the app, each with whether it is activated. */
/**
 * The plugin ids the extension declares, read from its sources (src/**.ts: each plugin's
 * `id: 'jupyterlab-vramscope:...'`, and the main one's PLUGIN_ID).
 */
function declaredPlugins(): string[] {
  const ids = new Set<string>();
  const walk = (dir: string): void => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const file = path.join(dir, entry.name);
      if (entry.isDirectory()) {
        walk(file);
      } else if (file.endsWith('.ts')) {
        const text = fs.readFileSync(file, 'utf8');
        for (const m of text.matchAll(
          /(?:\bid:|PLUGIN_ID =)\s*'(jupyterlab-vramscope:[\w-]+)'/g
        )) {
          ids.add(m[1]);
        }
      }
    }
  };
  walk(path.join(ROOT, 'src'));
  return [...ids].sort();
}

async function vramscopePlugins(page: Page) {
  return page.evaluate(() => {
    const app = (window as any).jupyterapp;
    return app
      .listPlugins()
      .filter((id: string) => id.startsWith('jupyterlab-vramscope:'))
      .map((id: string) => ({ id, activated: app.isPluginActivated(id) }));
  });
}

test.describe('Jupyter Notebook 7 (issue 2)', () => {
  test.use({ baseURL: NB_URL });

  test.skip(
    !panelBuilt(),
    'the front end has no #vramscope-panel yet (src/index.ts)'
  );

  test('the cell footer and the right-sidebar panel show +64.0 MiB', async ({
    page,
    pageErrors,
    request
  }) => {
    await page.setViewportSize({ width: 1400, height: 820 });
    const errors: string[] = []; // the console's
    watchDebugRequests(page);
    page.on('console', msg => {
      if (msg.type() === 'error') {
        errors.push(msg.text());
      }
    });

    const created = await request.put(`/api/contents/${NAME}`, {
      data: {
        type: 'notebook',
        format: 'json',
        content: {
          nbformat: 4,
          nbformat_minor: 5,
          metadata: {
            kernelspec: {
              name: 'python3',
              display_name: 'Python 3 (ipykernel)',
              language: 'python'
            },
            language_info: { name: 'python' }
          },
          cells: [
            code(IMPORT_TORCH),
            code('x = torch.ones(16 * 1024 * 1024)  # 64 MiB of float32')
          ]
        }
      }
    });
    expect(created.ok(), await created.text()).toBeTruthy();

    await page.goto(`/notebooks/${NAME}`);
    await page.waitForFunction(() => !!(window as any).jupyterapp, null, {
      timeout: 60_000
    });
    await page.evaluate(() => (window as any).jupyterapp.restored);
    await expect(page.locator('.jp-Notebook .jp-Cell')).toHaveCount(2, {
      timeout: 60_000
    });

    await test.step('every vramscope plugin is activated', async () => {
      const declared = declaredPlugins();
      expect(declared.length).toBeGreaterThanOrEqual(5);
      await expect
        .poll(
          async () =>
            (await vramscopePlugins(page))
              .map((p: { id: string }) => p.id)
              .sort(),
          { timeout: 30_000 }
        )
        .toEqual(declared);
      // Activation is lazy for plugins nothing requires yet: give it a moment.
      await expect
        .poll(
          async () =>
            (await vramscopePlugins(page)).filter(
              (p: { activated: boolean }) => !p.activated
            ),
          { timeout: 30_000 }
        )
        .toEqual([]);
    });

    await test.step('the panel opens in the right sidebar and connects', async () => {
      const toggle = () =>
        page.evaluate(() =>
          (window as any).jupyterapp.commands.execute('vramscope:toggle-panel')
        );
      const panel = page.locator('#jp-right-stack #vramscope-panel');
      // Notebook 7's own entry: View > Right Sidebar > Show vramscope: memory.
      await page.getByRole('menuitem', { name: 'View' }).click();
      await page.locator('.lm-Menu-item', { hasText: 'Right Sidebar' }).hover();
      await page
        .locator('.lm-Menu-item', { hasText: 'Show vramscope: memory' })
        .click();
      await expect(panel).toBeVisible();
      // The panel's command hides it (Notebook 7's shell.collapseRight) and shows it again.
      await toggle();
      await expect(panel).toBeHidden();
      await toggle();
      await expect(panel).toBeVisible();
      await expect(panel.locator('.vramscope-Status')).toHaveAttribute(
        'data-status',
        'connected',
        { timeout: 90_000 }
      );
      // Widen the sidebar by dragging the split handle left of it, as a user would.
      const handle = page
        .locator(
          '#main-split-panel > .lm-SplitPanel-handle:not(.lm-mod-hidden)'
        )
        .last();
      const box = (await handle.boundingBox())!;
      await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
      await page.mouse.down();
      await page.mouse.move(box.x - 180, box.y + box.height / 2, { steps: 5 });
      await page.mouse.up();
      expect((await panel.boundingBox())!.width).toBeGreaterThan(400);
    });

    await test.step('running the cells gives +64.0 MiB in the footer and the panel', async () => {
      const cell = (i: number) => page.locator('.jp-Notebook .jp-Cell').nth(i);
      const run = (i: number) =>
        page.evaluate(async index => {
          const app = (window as any).jupyterapp;
          app.shell.currentWidget.content.activeCellIndex = index;
          await app.commands.execute('notebook:run-cell');
        }, i);
      // One cell at a time, the next once the kernel has answered the debugger's request
      // that follows each cell (see watchDebugRequests): not "Run All".
      await run(0);
      await expect(cell(0).locator('.vramscope-CellFooter-text')).toBeVisible({
        timeout: 90_000
      });
      await debuggerAnswered(page);
      await run(1);
      const footer = cell(1).locator('.vramscope-CellFooter-text');
      await expect(footer).toContainText('+64.0 MiB', { timeout: 90_000 });
      await expect(
        page.locator(
          '#vramscope-panel .vramscope-CellTable-row[data-execution-count="2"]'
        )
      ).toContainText('+64.0 MiB');
    });

    await page
      .locator('#vramscope-panel .vramscope-Timeline-window')
      .selectOption({ label: '1 min' });
    // The plot redraws on its next (throttled) frame: wait for its x axis to span at most
    // 1 minute (less while the data do not fill it: the window fits the data until full).
    await expect
      .poll(
        () =>
          page.evaluate(() => {
            const gd = document.querySelector(
              '#vramscope-panel .vramscope-Timeline-plot'
            ) as any;
            const range: number[] = gd?._fullLayout?.xaxis?.range ?? [NaN, NaN];
            return (range[1] - range[0]) / 1000; // linear axis in milliseconds
          }),
        { timeout: 10_000 }
      )
      .toBeLessThanOrEqual(60.5);
    await page.screenshot({ path: screenshotPath('notebook7.png') });
    expect(
      [...pageErrors, ...errors].filter(e => /vramscope/i.test(e))
    ).toEqual([]);
  });
});

/**
 * Hostile strings in the real UI (issue 14): a cell whose first line holds markup and a bidi
 * override, a module and a variable named with markup (insight reports them after the cell),
 * in a notebook with odd characters in its name. The panel's cell table and the footer show
 * them as text, and nowhere on the page does an element come from them or anything run (the
 * views' own text rendering is covered for every surface in test/js/hostile.spec.ts).
 */
import { expect } from '@jupyterlab/galata';

import { newNotebookWithPanel, rows, runCode, test } from './lab';

const MARKUP = '<img src=x onerror="window.__pwned=1">';

test('hostile names and sources are shown as text', async ({
  page,
  pageErrors
}) => {
  await newNotebookWithPanel(page, 'hostile «name» \u202e.ipynb');
  await runCode(
    page,
    0,
    [
      `# ${MARKUP} </script> evil\u202etxt`,
      'import torch',
      'model = torch.nn.Sequential()',
      `model.add_module(${JSON.stringify(MARKUP)}, torch.nn.Linear(256, 256))`,
      `globals()[${JSON.stringify('h_' + MARKUP)}] = torch.ones(512 * 1024)`,
      'loss = model(torch.randn(512, 256)).sum()',
      'loss.backward()'
    ].join('\n')
  );
  await expect(rows(page)).toHaveCount(1);
  await expect(rows(page).first()).toContainText(`# ${MARKUP} </script>`);
  const footer = (await page.notebook.getCellLocator(0))!.locator(
    '.vramscope-CellFooter-text'
  );
  await expect(footer).toBeVisible();

  // nothing became markup anywhere on the page, nothing ran
  expect(
    await page.evaluate(() => ({
      pwned: (window as any).__pwned ?? null,
      imgs: Array.from(document.querySelectorAll('img')).filter(
        img => img.getAttribute('src') === 'x'
      ).length
    }))
  ).toEqual({ pwned: null, imgs: 0 });
  expect(pageErrors).toEqual([]);
});

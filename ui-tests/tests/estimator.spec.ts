import { expect } from '@jupyterlab/galata';

import { newNotebookWithPanel, runCode, test } from './lab';
import { panelBuilt } from './utils';

const NET = [
  'import torch',
  'net = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256))',
  'net(torch.randn(8, 256)).sum().backward()'
].join('\n');

test.describe('estimator (issue 11 item 4)', () => {
  test.use({ kernels: null, sessions: null });

  test.skip(!panelBuilt(), 'the front end is not built');

  test('the panel calculator: a typed size, sharding, and a measured model', async ({
    page
  }) => {
    await page.setViewportSize({ width: 1400, height: 900 });
    // the sidebar's default width
    await newNotebookWithPanel(page, 'estimator.ipynb', 280);
    const section = page.locator(
      '#vramscope-panel .vramscope-Section[data-section="Estimator"]'
    );
    const body = section.locator('.vramscope-Estimator');
    await expect(body).toBeHidden(); // collapsed by default
    await section.locator('.vramscope-Section-toggle').click();
    await expect(body).toBeVisible();
    const field = (name: string) => body.locator(`[data-field="${name}"]`);
    const verdict = body.locator('.vramscope-Estimator-verdict');

    // typed 7B, bf16-mixed AdamW: 16 bytes a parameter = 112 GB = 104.3 GiB
    await field('source').selectOption('');
    await field('size').fill('7B');
    await field('size').press('Enter');
    await field('size').blur();
    await expect(verdict).toHaveText('Does not fit in 80.0 GiB: 24.3 GiB over');
    await expect(
      body.locator('[data-part="total"] .vramscope-Estimator-value')
    ).toHaveText('104.3 GiB');

    // 8 GPUs with ZeRO-3: 14 GB each
    await field('gpus').fill('8');
    await field('gpus').press('Tab');
    await field('stage').selectOption('3');
    await field('gpu').selectOption('16');
    await expect(verdict).toHaveAttribute('data-fits', 'true');
    await expect(verdict).toHaveText('Fits in 16.0 GiB: 3.0 GiB free');

    // a model that ran a forward: activations come from its measurement
    await runCode(page, 0, NET);
    await expect(field('source').locator('option[value="net"]')).toHaveCount(1);
    await field('source').selectOption('net');
    await field('stage').selectOption('0');
    await field('gpus').fill('1');
    await field('gpus').press('Tab');
    await field('precision').selectOption('32-true');
    await expect(body.locator('.vramscope-Estimator-meta')).toContainText(
      'activations measured (batch 8)'
    );
    // 8 x (256 + 1024) fp32 values saved: 40 KiB
    await expect(
      body.locator('[data-part="activations"] .vramscope-Estimator-value')
    ).toHaveText('40.0 KiB');
    const box = (await body.boundingBox())!;
    expect(box.width).toBeLessThanOrEqual(280);
    await body.screenshot({ path: test.info().outputPath('estimator.png') });
  });
});

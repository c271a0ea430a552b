import { expect } from '@jupyterlab/galata';

import { expandSection, newNotebookWithPanel, runCode, test } from './lab';
import { COLD_KERNEL } from './notebookfile';
import { panelBuilt } from './utils';

const NET = [
  'import torch',
  'net = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256))',
  'opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)',
  'net(torch.randn(8, 256)).sum().backward()',
  'opt.step()'
].join('\n');

test.describe('estimator (issue 11 item 4)', () => {
  test.use({ kernels: null, sessions: null });

  test.skip(!panelBuilt(), 'the front end is not built');

  test('the panel calculator: a typed size, sharding, and a measured model', async ({
    page
  }) => {
    await page.setViewportSize({ width: 1400, height: 900 });
    // the sidebar's default width
    // a cold kernel: the first cell, `import torch`, takes long enough to be a labelled band
    await newNotebookWithPanel(page, 'estimator.ipynb', 280, COLD_KERNEL);
    const panel = page.locator('#vramscope-panel');
    const section = panel.locator(
      '.vramscope-Section[data-section="Estimator"]'
    );
    const body = section.locator('.vramscope-Estimator');
    await expect(body).toBeHidden(); // collapsed by default
    await expandSection(panel, 'Estimator');
    await expect(body).toBeVisible();
    const field = (name: string) => body.locator(`[data-field="${name}"]`);
    const verdict = body.locator('.vramscope-Estimator-verdict');

    // the empty state: no kernel model, the example size: an explanation, a neutral verdict
    await expect(body.locator('.vramscope-Estimator-empty')).toContainText(
      'Type a parameter count'
    );
    await expect(verdict).toHaveAttribute('data-state', 'info');
    await expect(verdict).toHaveText('Needs more than 80.0 GiB: 24.3 GiB over');
    // small parts stay visible: every part that is not 0 is drawn at least a few px wide
    for (const part of ['parameters', 'gradients', 'master_weights']) {
      const fill = body.locator(
        `[data-part="${part}"] .vramscope-Estimator-fill`
      );
      expect((await fill.boundingBox())!.width).toBeGreaterThanOrEqual(2);
    }
    await body.screenshot({
      path: test.info().outputPath('estimator-empty.png')
    });

    // typed 7B, bf16-mixed AdamW: 16 bytes a parameter = 112 GB = 104.3 GiB
    await field('source').selectOption('');
    await field('size').fill('7B');
    await field('size').press('Enter');
    await field('size').blur();
    await expect(verdict).toHaveText('Does not fit in 80.0 GiB: 24.3 GiB over');
    await expect(verdict).toHaveAttribute('data-state', 'nofit');
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
    // the defaults come from the model: fp32 parameters and activations, SGD with momentum
    await expect(field('precision')).toHaveValue('32-true');
    await expect(field('precision')).toHaveClass(/vramscope-mod-measured/);
    await expect(field('optimizer')).toHaveValue('sgd-momentum');
    await expect(body.locator('.vramscope-Estimator-measured')).toContainText(
      'optimizer opt (SGD + momentum, 4.00 B/param of state)'
    );
    await expect(body.locator('.vramscope-Estimator-meta')).toContainText(
      'activations measured at float32 (batch 8), not scaled'
    );
    // 8 x (256 + 1024) fp32 values saved: 40 KiB
    await expect(
      body.locator('[data-part="activations"] .vramscope-Estimator-value')
    ).toContainText('40.0 KiB');
    // bf16 mixed: the fp32-measured activations scaled to bfloat16, and said so
    await field('precision').selectOption('bf16-mixed');
    await expect(field('precision')).not.toHaveClass(/vramscope-mod-measured/);
    await expect(body.locator('.vramscope-Estimator-meta')).toContainText(
      'activations measured at float32 (batch 8), scaled ×0.50 for bf16 mixed'
    );
    await expect(
      body.locator('[data-part="activations"] .vramscope-Estimator-value')
    ).toContainText('20.0 KiB');
    const box = (await body.boundingBox())!;
    expect(box.width).toBeLessThanOrEqual(280);
    await body.screenshot({ path: test.info().outputPath('estimator.png') });

    // the timeline at this width (src/timeline/figure.ts): plotly's mode bar, shown on hover,
    // sits above the plot area, clear of the newest cell band's label at the top right
    await expandSection(panel, 'Estimator', false); // fold the estimator
    const plot = page.locator('#vramscope-panel .vramscope-Timeline-plot');
    await plot.scrollIntoViewIfNeeded();
    const label = plot.locator('.bartext').last();
    await expect(label).toHaveText('[1]');
    // over the plot's top margin: the mode bar shows, no hover label covers the band's label
    const plotBox = (await plot.boundingBox())!;
    await page.mouse.move(plotBox.x + 80, plotBox.y + 4);
    const modebar = plot.locator('.modebar');
    await expect(modebar).toBeVisible();
    const bar = (await modebar.boundingBox())!;
    const area = (await plot.locator('.nsewdrag').first().boundingBox())!;
    const text = (await label.boundingBox())!;
    expect(bar.y + bar.height).toBeLessThanOrEqual(area.y + 1);
    expect(bar.y + bar.height).toBeLessThanOrEqual(text.y);
    await plot.screenshot({
      path: test.info().outputPath('timeline-modebar.png')
    });
  });
});

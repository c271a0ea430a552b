import { expect, test } from '@jupyterlab/galata';

import { cellOutput, newNotebookWithPanel, runCode } from './lab';
import { panelBuilt, screenshotPath } from './utils';

/** examples/demo.ipynb's model (examples/make_demo.py), with one forward pass kept. */
const DEMO_MODEL = [
  'model = torch.nn.TransformerEncoder(',
  '    torch.nn.TransformerEncoderLayer(',
  '        d_model=512, nhead=8, dim_feedforward=2048, batch_first=True',
  '    ),',
  '    num_layers=2,',
  ')',
  'batch = torch.randn(12, 64, 512)',
  'out = model(batch)  # keeps its graph: the saved activations per layer'
].join('\n');

/** The classic leak of the demo: every step's graph kept alive by the list. */
const LEAK = [
  'losses = []',
  'for _ in range(4):',
  '    loss = model(batch).pow(2).mean()',
  '    losses.append(loss)  # leak: holds the graph of every step'
].join('\n');

test.describe('model insight (issue 4)', () => {
  test.use({ kernels: null, sessions: null });

  test.skip(
    !panelBuilt(),
    'the front end has no #vramscope-panel yet (src/index.ts)'
  );

  test('the layer chart, breakdown and holders of the demo model', async ({
    page
  }) => {
    await page.setViewportSize({ width: 1400, height: 1040 });
    await newNotebookWithPanel(page, 'insight.ipynb', 560);
    const panel = page.locator('#vramscope-panel');
    const insight = panel.locator('.vramscope-Insight');
    // Only model insight: collapse the other sections.
    for (const title of ['Devices', 'Timeline', 'Cells']) {
      await panel
        .locator(
          `.vramscope-Section[data-section="${title}"] .vramscope-Section-toggle`
        )
        .click();
    }

    // A loaded two-core machine can be slower than the default 20 ms holders-scan budget.
    await runCode(
      page,
      0,
      'import torch\nimport vramscope\n\ntorch.manual_seed(0)\n' +
        '_ = vramscope.settings(insight_budget_ms=2000)'
    );
    await runCode(page, 1, DEMO_MODEL);
    await runCode(
      page,
      2,
      'sum(p.numel() * p.element_size() for p in model.parameters())'
    );
    const paramBytes = await cellOutput(page, 2);
    expect(paramBytes).toMatch(/^\d+$/);
    expect(Number(paramBytes)).toBeGreaterThan(20 * 2 ** 20); // ~25 MiB of float32

    await test.step('the model picker and the parameters row', async () => {
      await expect(insight.locator('.vramscope-Insight-model')).toContainText(
        'model · TransformerEncoder'
      );
      await expect(
        insight.locator(
          '.vramscope-Breakdown-device[data-device="cpu"] .vramscope-Breakdown-row[data-key="parameters"]'
        )
      ).toHaveAttribute('data-bytes', paramBytes);
    });

    await test.step('per-layer saved activations of the forward pass', async () => {
      const bar = (p: string) =>
        insight.locator(`.vramscope-Layers-bar[data-path="${p}"]`);
      for (const p of ['layers.0.self_attn', 'layers.1.self_attn']) {
        await expect(bar(p)).toBeVisible();
        await expect(bar(p).locator('.vramscope-Layers-type')).toHaveText(
          'MultiheadAttention'
        );
        await expect(bar(p).locator('.vramscope-Layers-value')).toHaveText(
          /^[1-9][\d.]* (KiB|MiB)/
        );
      }
      await expect(insight.locator('.vramscope-Layers-bar')).toHaveCount(15);
      const paths = await insight
        .locator('.vramscope-Layers-bar')
        .evaluateAll(rows => rows.map(r => (r as HTMLElement).dataset.path));
      for (const p of paths) {
        expect(p).toMatch(/^(|layers(\.[01](\.[a-z_0-9]+)*)?|<other>)$/);
      }
    });

    await test.step('the losses list is listed as holding graphs', async () => {
      await runCode(page, 3, LEAK);
      const losses = insight.locator(
        '.vramscope-Holders-row[data-name="losses"]'
      );
      await expect(losses).toBeVisible();
      await expect(losses).toContainText('graph_retention');
      await expect(losses.locator('.vramscope-Holders-why')).toContainText(
        'losses.append(loss)'
      );
      await expect(losses.locator('.vramscope-Holders-bytes')).toHaveText(
        /^[1-9][\d.]* MiB$/
      );
      await expect(
        insight.locator('.vramscope-Holders-row[data-name="out"]')
      ).toBeVisible();
    });

    await panel.evaluate(node => (node.scrollTop = 0));
    await page.screenshot({ path: screenshotPath('insight.png') });
  });
});

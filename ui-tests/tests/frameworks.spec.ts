import { expect } from '@jupyterlab/galata';

import { expandSection, openPanel, runCode, test } from './lab';
import { panelBuilt, screenshotPath, watchDebugRequests } from './utils';

/**
 * Advice for a Hugging Face `Trainer` in the panel (issue 20 item 2), at the right sidebar's
 * default width: a tiny GPT-2 trained through `trainer.train()`, the Optimize pane opened,
 * the training cell run again (its step measured inside `train()`): the cards are
 * `TrainingArguments` changes, not loop rewrites. The README's Trainer screenshot.
 */

const SETUP = `import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments
torch.manual_seed(0)
lm = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=128, n_positions=64))
data = [
    {"input_ids": torch.randint(0, 128, (64,)), "labels": torch.randint(0, 128, (64,))}
    for _ in range(32)
]
args = TrainingArguments(
    output_dir="trainer-out", per_device_train_batch_size=8, max_steps=1, report_to=[],
    save_strategy="no", use_cpu=True, logging_strategy="no", disable_tqdm=True,
)
trainer = Trainer(model=lm, args=args, train_dataset=data)`;

test.describe('frameworks (issue 20)', () => {
  test.skip(!panelBuilt(), 'the front end has no #vramscope-panel yet');

  test('a Trainer gets TrainingArguments cards at the default width', async ({
    page
  }) => {
    test.setTimeout(300_000);
    watchDebugRequests(page);
    await page.notebook.createNew('trainer.ipynb');
    await page.sidebar.close('left');
    await openPanel(page); // the right sidebar at its default width
    const panel = page.locator('#vramscope-panel');
    await expect(panel.locator('.vramscope-Status')).toHaveAttribute(
      'data-status',
      'connected',
      { timeout: 60_000 }
    );
    await runCode(page, 0, SETUP);
    await runCode(page, 1, 'trainer.train()');
    await expandSection(panel, 'Optimize');
    const card = (id: string) =>
      panel.locator(`.vramscope-Optimize-suggestion[data-id="${id}"]`);
    await expect(card('trainer:gradient_checkpointing')).toBeVisible({
      timeout: 120_000
    });
    await runCode(page, 2, 'trainer.train()  # again: its step is measured');
    await expect(card('trainer:accumulate:2')).toBeVisible({
      timeout: 120_000
    });
    // a Trainer has no loop to rewrite: no autocast/accumulation rewrite is offered
    await expect(
      panel.locator('.vramscope-Optimize-suggestion[data-kind="rewrite"]')
    ).toHaveCount(0);
    const code = await card('trainer:gradient_checkpointing').evaluate(
      el => (el as HTMLElement).innerText
    );
    expect(code).toContain('checkpoint');
    // the cards in view: the panes above them closed
    await expandSection(panel, 'Timeline', false);
    await expandSection(panel, 'Cells', false);
    await panel
      .locator('.vramscope-Optimize-suggestion')
      .first()
      .evaluate(el => el.scrollIntoView({ block: 'start' }));
    await panel.screenshot({ path: screenshotPath('trainer-250.png') });
  });
});

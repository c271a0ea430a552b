import { expect, IJupyterLabPageFixture } from '@jupyterlab/galata';
import type { Locator } from '@playwright/test';

import {
  expandSection,
  newNotebookWithPanel,
  openOptimizePane,
  runCode,
  test
} from './lab';
import { panelBuilt, screenshotPath } from './utils';

/**
 * Advice for a Hugging Face `Trainer` and a PyTorch Lightning `Trainer` in the panel (issue 20
 * item 2), at the right sidebar's default width: a tiny model trained through
 * `trainer.train()` / `trainer.fit()`, the Optimize pane opened, the training run again (its
 * step measured inside `train()`/`fit()`): the cards are the framework's own settings
 * (`TrainingArguments`, `Trainer(precision=..., accumulate_grad_batches=...)`), not loop
 * rewrites. The screenshots of docs/frameworks.md.
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

const LIGHTNING = `import torch
import lightning as L
from torch import nn


class Block(nn.Module):  # a residual feed-forward block
    def __init__(self, d):
        super().__init__()
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        return x + self.ff(x)


class Net(L.LightningModule):
    def __init__(self, d=64, n=3):
        super().__init__()
        self.blocks = nn.Sequential(*(Block(d) for _ in range(n)))
        self.out = nn.Linear(d, 10)

    def forward(self, x):
        return self.out(self.blocks(x))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.cross_entropy(self(x).flatten(0, 1), y.flatten())

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


torch.manual_seed(0)
net = Net()
ds = torch.utils.data.TensorDataset(torch.randn(256, 32, 64), torch.randint(0, 10, (256, 32)))
loader = torch.utils.data.DataLoader(ds, batch_size=32, shuffle=True)`;
const LIGHTNING_TRAINER = `trainer = L.Trainer(max_steps=2, logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False)`;

/**
 * A new notebook with the panel open and connected, the right sidebar at JupyterLab's default
 * width (250 px, as a user first sees it).
 */
async function notebookWithPanel(
  page: IJupyterLabPageFixture,
  name: string
): Promise<Locator> {
  await newNotebookWithPanel(page, name, 250);
  return page.locator('#vramscope-panel');
}

/** The cards in view: the panes above Optimize closed (once the cards are there). */
async function closeAbove(panel: Locator): Promise<void> {
  await expandSection(panel, 'Timeline', false);
  await expandSection(panel, 'Cells', false);
}

test.describe('frameworks (issue 20)', () => {
  test.skip(!panelBuilt(), 'the front end has no #vramscope-panel yet');

  test('a Trainer gets TrainingArguments cards at the default width', async ({
    page
  }) => {
    test.setTimeout(300_000);
    const panel = await notebookWithPanel(page, 'trainer.ipynb');
    await runCode(page, 0, SETUP);
    await runCode(page, 1, 'trainer.train()');
    await openOptimizePane(page);
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
    await closeAbove(panel);
    await panel
      .locator('.vramscope-Optimize-suggestion')
      .first()
      .evaluate(el => el.scrollIntoView({ block: 'start' }));
    await panel.screenshot({ path: screenshotPath('trainer-250.png') });
  });
  test('a Lightning Trainer gets its own settings at the default width', async ({
    page
  }) => {
    test.setTimeout(300_000);
    const panel = await notebookWithPanel(page, 'lightning.ipynb');
    await runCode(page, 0, LIGHTNING);
    await runCode(page, 1, LIGHTNING_TRAINER);
    await runCode(page, 2, 'trainer.fit(net, loader)');
    await openOptimizePane(page);
    const card = (id: string) =>
      panel.locator(`.vramscope-Optimize-suggestion[data-id="${id}"]`);
    await expect(card('lightning:accumulate:2')).toBeVisible({
      timeout: 120_000
    });
    // past max_steps a Lightning Trainer trains no more: its cell runs before each fit
    await runCode(page, 1, LIGHTNING_TRAINER);
    await runCode(
      page,
      2,
      'trainer.fit(net, loader)  # again: its step is measured'
    );
    await expect(card('lightning:bf16-mixed')).toBeVisible({
      timeout: 120_000
    });
    await expect(card('checkpoint:blocks')).toBeVisible();
    // Lightning's own terms: the Trainer's keywords, no torch.autocast or micro-batch loop
    const ids = await panel
      .locator('.vramscope-Optimize-suggestion')
      .evaluateAll(els => els.map(el => el.getAttribute('data-id') ?? ''));
    expect(ids.filter(id => /^(autocast|accumulate):/.test(id))).toEqual([]);
    await expect(card('lightning:bf16-mixed')).toContainText(
      'Trainer(precision="bf16-mixed")'
    );
    await expect(card('lightning:accumulate:2')).toContainText(
      'accumulate_grad_batches=2'
    );
    await closeAbove(panel);
    // Lightning's own card in view (the model's checkpointing card ranks first)
    await card('lightning:accumulate:2').evaluate(el =>
      el.scrollIntoView({ block: 'start' })
    );
    await panel.screenshot({ path: screenshotPath('lightning-250.png') });
  });
});

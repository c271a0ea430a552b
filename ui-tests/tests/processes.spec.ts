import { expect, test } from '@jupyterlab/galata';

import { newNotebookWithPanel, runCode, startCode, waitForCell } from './lab';
import { panelBuilt, screenshotPath } from './utils';

/** Two DataLoader workers over a list of Python objects, for about 8 s. */
const LOADER = [
  'class Words(Dataset):',
  '    def __init__(self, n):',
  '        self.items = [str(i) * 2 for i in range(n)]',
  '    def __len__(self):',
  '        return len(self.items)',
  '    def __getitem__(self, i):',
  '        return len(self.items[i])',
  '',
  'train_words = Words(900_000)',
  'for batch in DataLoader(train_words, batch_size=512, num_workers=2):',
  '    time.sleep(0.004)'
].join('\n');

test.describe('processes (issue 13)', () => {
  test.use({ kernels: null, sessions: null });

  test.skip(
    !panelBuilt(),
    'the front end has no #vramscope-panel yet (src/index.ts)'
  );

  test('DataLoader workers appear live with their lanes, then ended, with the copy-on-access finding', async ({
    page
  }) => {
    await page.setViewportSize({ width: 1400, height: 1000 });
    await newNotebookWithPanel(page, 'processes.ipynb', 300);
    const section = page.locator(
      '#vramscope-panel .vramscope-Section[data-section="Processes"]'
    );
    await expect(section).toContainText('No child processes yet');
    await runCode(
      page,
      0,
      'import time, torch\nfrom torch.utils.data import DataLoader, Dataset'
    );
    const rows = section.locator('.vramscope-Processes-row');
    const names = section.locator('.vramscope-Processes-name');

    await test.step('both workers are listed while the cell runs', async () => {
      const prompt = await startCode(page, 1, LOADER);
      await expect(names).toHaveText(
        ['DataLoader worker 0', 'DataLoader worker 1'],
        { timeout: 30_000 }
      );
      await expect(
        section.locator('.vramscope-Processes-row.vramscope-mod-ended')
      ).toHaveCount(0);
      await expect(rows.first()).toContainText('cell [2]');
      // the lanes grow: more points in the first worker's line over time
      const lane = section
        .locator('.vramscope-Processes-laneRow')
        .first()
        .locator('canvas');
      const points = async () =>
        Number((await lane.getAttribute('data-columns')) ?? 0);
      const before = await points();
      await expect.poll(points, { timeout: 15_000 }).toBeGreaterThan(before);
      await expect(prompt).toHaveText('[*]:');
    });

    await test.step('they end, and the copy-on-access finding names the dataset', async () => {
      await waitForCell(page, 1);
      await expect(
        section.locator('.vramscope-Processes-row.vramscope-mod-ended')
      ).toHaveCount(2, {
        timeout: 20_000
      });
      await expect(rows.first()).toContainText(/exit code 0|exited/);
      const finding = section.locator('.vramscope-Processes-finding');
      await expect(finding).toContainText('train_words', { timeout: 20_000 });
      await expect(finding.locator('li').first()).toContainText('numpy array');
      await section.screenshot({ path: screenshotPath('processes.png') });
    });
  });
});

import { expect } from '@jupyterlab/galata';

import {
  expandSection,
  openWithPanel,
  runCode,
  startCode,
  test,
  waitForCell
} from './lab';
import { layoutProblems, panelWidth } from './layout';
import { panelBuilt, screenshotPath, watchDebugRequests } from './utils';

/** An empty notebook on the Python 3 kernel, opened (not renamed) under its own name. */
const EMPTY = JSON.stringify({
  cells: [],
  metadata: {
    kernelspec: {
      display_name: 'Python 3',
      language: 'python',
      name: 'python3'
    },
    language_info: { name: 'python' }
  },
  nbformat: 4,
  nbformat_minor: 5
});

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

/**
 * Three epochs of a loader without persistent workers: two new workers each epoch, six
 * ended workers of one cell in all.
 */
const EPOCHS = [
  'small = Words(20_000)',
  'for epoch in range(3):',
  '    for batch in DataLoader(small, batch_size=256, num_workers=2):',
  '        time.sleep(0.01)'
].join('\n');

test.describe('processes (issue 13)', () => {
  test.use({ kernels: null, sessions: null });

  test.skip(
    !panelBuilt(),
    'the front end has no #vramscope-panel yet (src/index.ts)'
  );

  test('DataLoader workers appear live with their lanes, then ended, with the copy-on-access finding', async ({
    page,
    tmpPath
  }) => {
    await page.setViewportSize({ width: 1400, height: 1000 });
    watchDebugRequests(page);
    const file = `${tmpPath}/processes.ipynb`;
    await page.contents.uploadContent(EMPTY, 'text', file);
    const panel = await openWithPanel(page, file); // the sidebar at its default width
    await expandSection(panel, 'Processes');
    const section = page.locator(
      '#vramscope-panel .vramscope-Section[data-section="Processes"]'
    );
    const timeline = page.locator(
      '#vramscope-panel .vramscope-Section[data-section="Timeline"]'
    );
    const lanes = timeline.locator('.vramscope-TimelineLanes');
    const toggle = timeline.locator('.vramscope-Timeline-lanesToggle');
    await expect(section).toContainText('No child processes yet');
    // no child process: no lanes in the main timeline, and no toggle for them
    await expect(toggle).toBeHidden();
    await expect(lanes).toBeHidden();
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

    await test.step('the main timeline has a lane per worker, named, growing', async () => {
      const laneNames = lanes.locator('.vramscope-TimelineLanes-name');
      await expect(laneNames).toHaveText(
        ['DataLoader worker 0', 'DataLoader worker 1'],
        { timeout: 15_000 }
      );
      await expect(toggle).toHaveText(/2 processes/);
      await expect(toggle).toHaveAttribute('aria-pressed', 'true');
      await expect(lanes.locator('canvas')).toHaveAttribute('data-lanes', '2');
      const first = lanes.locator('.vramscope-TimelineLanes-lane').first();
      const drawn = async () =>
        Number((await first.getAttribute('data-points')) ?? 0);
      await expect.poll(drawn, { timeout: 15_000 }).toBeGreaterThan(1);
      // the lane's peak is a real RSS: at least the worker's current RSS in the section
      expect(Number(await first.getAttribute('data-peak'))).toBeGreaterThan(
        10 * 2 ** 20
      );
      await toggle.click(); // the legend toggle hides them, and shows them again
      await expect(lanes).toBeHidden();
      await expect(toggle).toHaveAttribute('aria-pressed', 'false');
      await toggle.click();
      await expect(lanes).toBeVisible();
    });

    await test.step('they end, and the copy-on-access finding names the dataset', async () => {
      await waitForCell(page, 1);
      // the two ended workers of the cell fold into one row and lane
      const ended = section.locator(
        '.vramscope-Processes-row.vramscope-mod-ended'
      );
      await expect(ended).toHaveCount(1, { timeout: 20_000 });
      await expect(ended.locator('.vramscope-Processes-name')).toHaveText(
        '2 ended workers of cell [2]'
      );
      await expect(ended).toHaveAttribute('data-count', '2');
      await expect(rows.first()).toContainText(/exit code 0|exited/);
      const finding = section.locator('.vramscope-Processes-finding');
      await expect(finding).toContainText('train_words', { timeout: 20_000 });
      await expect(finding.locator('li').first()).toContainText('numpy array');
      // the ended lanes stay, folded into one as in the table, with how they ended
      const endedLanes = lanes.locator(
        '.vramscope-TimelineLanes-lane.vramscope-mod-ended'
      );
      await expect(endedLanes).toHaveCount(1);
      await expect(
        endedLanes.locator('.vramscope-TimelineLanes-name')
      ).toHaveText('2 ended workers of cell [2]');
      await expect(
        endedLanes.locator('.vramscope-TimelineLanes-value')
      ).toHaveText(/exit code 0|exited/);
      // the lanes sit under the plot, whose height is what they leave it: its time axis
      // is drawn above them, not under
      const axis = timeline.locator(
        '.vramscope-Timeline-plot .xaxislayer-above'
      );
      await expect
        .poll(async () => {
          const [a, l] = await Promise.all([
            axis.boundingBox(),
            lanes.boundingBox()
          ]);
          return a && l ? Math.round(l.y - (a.y + a.height)) : null;
        })
        .toBeGreaterThanOrEqual(-1);
      await section.screenshot({ path: screenshotPath('processes.png') });
      await timeline.screenshot({
        path: screenshotPath('processes-timeline.png')
      });
    });

    await test.step('many ended workers fold per cell; nothing clipped at 250 px', async () => {
      await runCode(page, 2, EPOCHS);
      const ended = section.locator(
        '.vramscope-Processes-row.vramscope-mod-ended'
      );
      // cell [2]'s two and cell [3]'s six: two rows, a lane each
      await expect(ended.locator('.vramscope-Processes-name')).toHaveText(
        ['6 ended workers of cell [3]', '2 ended workers of cell [2]'],
        { timeout: 30_000 }
      );
      await expect(ended.first()).toHaveAttribute('data-count', '6');
      await expect(section.locator('.vramscope-Processes-laneRow')).toHaveCount(
        2
      );
      // the timeline folds them too: a lane per fold, named as its row
      await expect(lanes.locator('.vramscope-TimelineLanes-name')).toHaveText([
        '6 ended workers of cell [3]',
        '2 ended workers of cell [2]'
      ]);
      await expect(lanes.locator('canvas')).toHaveAttribute('data-lanes', '2');
      await expect(toggle).toHaveText(/8 processes/);
      const foldLane = lanes.locator('.vramscope-TimelineLanes-lane').first();
      expect(
        Number(await foldLane.getAttribute('data-points'))
      ).toBeGreaterThan(1);
      // the fold's lane holds the six workers' points
      const lane = section
        .locator('.vramscope-Processes-laneRow')
        .first()
        .locator('canvas');
      expect(Number(await lane.getAttribute('data-columns'))).toBeGreaterThan(
        1
      );
      await page.sidebar.setWidth(250, 'right');
      await expect.poll(() => panelWidth(page)).toBeLessThan(265);
      // the Processes pane and the Timeline with its lanes, nothing clipped or overlapping
      await expandSection(panel, 'Cells', false);
      expect(await layoutProblems(page, ['Processes', 'Timeline'])).toEqual([]);
      await expandSection(panel, 'Timeline', false);
      expect(await layoutProblems(page, ['Processes'])).toEqual([]);
      // Now and Peak side by side, apart
      const first = rows.first();
      const now = (await first
        .locator('.vramscope-Processes-now')
        .boundingBox())!;
      const peak = (await first
        .locator('.vramscope-Processes-peak')
        .boundingBox())!;
      expect(now.x + now.width).toBeLessThanOrEqual(peak.x + 0.5);
      await section.screenshot({ path: screenshotPath('processes-250.png') });
      // and wide
      await page.sidebar.setWidth(620, 'right');
      await expect.poll(() => panelWidth(page)).toBeGreaterThan(600);
      await expandSection(panel, 'Timeline');
      expect(await layoutProblems(page, ['Processes', 'Timeline'])).toEqual([]);
    });
  });
});

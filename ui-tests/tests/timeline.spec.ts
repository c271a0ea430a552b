import { expect, IJupyterLabPageFixture } from '@jupyterlab/galata';

import {
  expandSection,
  newNotebookWithPanel,
  plotTraces,
  runCode,
  startCode,
  test,
  waitForCell
} from './lab';
import { panelBuilt } from './utils';

/** The file whose appearance in the kernel's working directory ends SLOW_CELL. */
const SLOW_STOP = 'stop-slow-cell';

/**
 * A cell that grows memory step by step (60 MiB in all, 1 MiB every 0.1 s) and runs until
 * it has and the test has written SLOW_STOP (at most 2 minutes): a fixed 6 s could end
 * before a slow page had seen what the test checks while it runs.
 */
const SLOW_CELL = [
  'xs = []',
  '_end = time.time() + 120',
  `while (len(xs) < 60 or not os.path.exists('${SLOW_STOP}')) and time.time() < _end:`,
  '    if len(xs) < 60:',
  '        xs.append(torch.ones(256 * 1024))  # 1 MiB more each step',
  '    time.sleep(0.1)'
].join('\n');

/** The file whose appearance in the kernel's working directory ends TRAINING_LOOP. */
const STOP_FILE = 'stop-training';

/**
 * The README's training loop. It trains until the test has taken its screenshot and writes
 * STOP_FILE (at most 2 minutes): a fixed number of steps had to last long enough for the
 * slowest machine, ~20 s of training on two cores where the test needs ~5 s of it.
 */
const TRAINING_LOOP = [
  'import os',
  'model = torch.nn.Sequential(',
  '    torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)',
  ')',
  'optimizer = torch.optim.Adam(model.parameters())',
  'losses = []',
  'end = time.time() + 120',
  `while not os.path.exists('${STOP_FILE}') and time.time() < end:`,
  '    loss = model(torch.randn(256, 1024)).pow(2).mean()',
  '    optimizer.zero_grad()',
  '    loss.backward()',
  '    optimizer.step()',
  '    losses.append(loss.item())',
  '    time.sleep(0.05)'
].join('\n');

/** The time (plot x) of the newest point of the memory lines drawn. */
async function lastPlottedX(page: IJupyterLabPageFixture): Promise<number> {
  const value = await page
    .locator('#vramscope-panel .vramscope-Timeline-lines')
    .getAttribute('data-last-x');
  return Number(value ?? -Infinity);
}

test.describe('live timeline (issue 3)', () => {
  test.use({ kernels: null, sessions: null });

  test.skip(
    !panelBuilt(),
    'the front end has no #vramscope-panel yet (src/index.ts)'
  );

  test('the sample count grows while a cell runs; the plot and its cell band are drawn', async ({
    page,
    tmpPath
  }) => {
    await page.setViewportSize({ width: 1400, height: 900 });
    await newNotebookWithPanel(page, 'timeline.ipynb', 520);
    const timeline = page.locator('#vramscope-panel .vramscope-Timeline');
    const sampleCount = async () =>
      Number(await timeline.getAttribute('data-sample-count'));
    const busy = page.locator(
      '.jp-NotebookPanel-toolbar .jp-Notebook-ExecutionIndicator[data-status="busy"]'
    );

    // A 1 minute window: a few seconds long cell is a band wide enough to hover.
    await page
      .locator('#vramscope-panel .vramscope-Timeline-window')
      .selectOption({ label: '1 min' });
    await runCode(page, 0, 'import os, time, torch');

    await test.step('samples arrive while the cell is still running', async () => {
      const prompt = await startCode(page, 1, SLOW_CELL);
      await expect(busy).toBeVisible({ timeout: 30_000 });
      const first = await sampleCount();
      const firstX = await lastPlottedX(page);
      const t0 = Date.now();
      // At 10 Hz, 15 more samples take 1.5 s: the kernel keeps sending while it is busy.
      await expect
        .poll(sampleCount, { timeout: 30_000 })
        .toBeGreaterThanOrEqual(first + 15);
      const second = await sampleCount();
      const seconds = (Date.now() - t0) / 1000;
      // ... and the plot itself moves: its newest point is later than it was
      await expect
        .poll(() => lastPlottedX(page), { timeout: 10_000 })
        .toBeGreaterThan(firstX);
      // The running cell is a band already, labelled with its execution count.
      const runningBar = async () => {
        const bars = (await plotTraces(page)).find(t => t.type === 'bar');
        const i = bars ? bars.text.indexOf('[2]') : -1;
        return i < 0 ? '' : String(bars.hovertext[i]);
      };
      await expect
        .poll(runningBar, { timeout: 10_000 })
        .toContain('running for');
      expect(await runningBar()).toContain('xs = []');
      // All reads happened during the cell: it is still running now.
      await expect(prompt).toHaveText('[*]:');
      await expect(busy).toBeVisible();
      test.info().annotations.push({
        type: 'samples',
        description: `${first} -> ${second} in ${seconds.toFixed(1)} s while [*]`
      });
      expect(second).toBeGreaterThan(first);
      // the kernel runs in the notebook's folder: there the cell sees the file and ends
      await page.contents.uploadContent('', 'text', `${tmpPath}/${SLOW_STOP}`);
      await waitForCell(page, 1);
    });

    await test.step('the memory line and the cell band are drawn', async () => {
      const plot = page.locator('#vramscope-panel .vramscope-Timeline-plot');
      // The memory lines: a canvas laid exactly over plotly's plot area, with ink on it.
      const canvas = page.locator('#vramscope-panel .vramscope-Timeline-lines');
      await expect(canvas).toBeVisible();
      expect(Number(await canvas.getAttribute('data-points'))).toBeGreaterThan(
        10
      );
      const inked = await canvas.evaluate((c: HTMLCanvasElement) => {
        const data = c
          .getContext('2d')!
          .getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let i = 3; i < data.length; i += 4) {
          n += data[i] > 0 ? 1 : 0;
        }
        return n;
      });
      expect(inked).toBeGreaterThan(100);
      const plotArea = (await plot.locator('.nsewdrag').first().boundingBox())!;
      const canvasBox = (await canvas.boundingBox())!;
      expect(Math.abs(canvasBox.x - plotArea.x)).toBeLessThan(1.5);
      expect(Math.abs(canvasBox.y - plotArea.y)).toBeLessThan(1.5);
      expect(Math.abs(canvasBox.width - plotArea.width)).toBeLessThan(1.5);
      expect(Math.abs(canvasBox.height - plotArea.height)).toBeLessThan(1.5);
      await expect(
        page.locator('#vramscope-panel .vramscope-Timeline-legendItem')
      ).toHaveText(['in use', 'RSS']);

      // Cells are bars of one trace: one per cell, [2] labelled with the cell's first line.
      await expect
        .poll(async () => {
          const bars = (await plotTraces(page)).find(t => t.type === 'bar');
          return bars?.text ?? [];
        })
        .toEqual(['[1]', '[2]']);
      const bars = (await plotTraces(page)).find(t => t.type === 'bar');
      expect(bars.hovertext[1]).toContain('xs = []');
      expect(bars.hovertext[1]).toMatch(/cpu: Δ \+6\d\.\d MiB/);
      await expect(plot.locator('.barlayer .trace .point path')).toHaveCount(2);

      // Hovering the band (low, away from the memory line) shows its cell in the timeline's
      // own tooltip (plotly draws no label: it could not keep one inside the panel) ...
      const band = plot.locator('.barlayer .trace .point path').nth(1);
      // the Timeline pane scrolls inside the accordion: the band's foot in sight first (a
      // pointer moved outside the pane's visible part lands on the next pane)
      await plot.evaluate(el => el.scrollIntoView({ block: 'center' }));
      const box = (await band.boundingBox())!;
      await page.mouse.move(box.x + box.width / 2, box.y + box.height * 0.95);
      const tooltip = page.locator(
        '#vramscope-panel .vramscope-Timeline-tooltip'
      );
      await expect(tooltip).toBeVisible();
      await expect(
        tooltip.locator('.vramscope-Timeline-tooltipCell')
      ).toContainText('[2] xs = []');
      await expect(plot.locator('.hoverlayer .hovertext')).toHaveCount(0);
      // ... with the memory of the lines at that time
      await expect(tooltip).toContainText(/in use: [\d.]+ MiB/);
      await expect(tooltip).toContainText(/^\d\d:\d\d:\d\d/);
      await page.mouse.move(0, 0);
      await expect(tooltip).toBeHidden();
    });

    await test.step('a drag zooms in; a double-click shows all data; the pane stays open', async () => {
      const panel = page.locator('#vramscope-panel');
      const plot = panel.locator('.vramscope-Timeline-plot');
      const toggle = panel.locator(
        '.vramscope-Section-toggle[data-section="Timeline"]'
      );
      await expect(toggle).toHaveAttribute('aria-expanded', 'true');
      const xRange = () =>
        plot.evaluate((gd: any) =>
          (gd._fullLayout?.xaxis?.range ?? []).map(Number)
        );
      const span = async () => ({
        first: Number(await timeline.getAttribute('data-first-x')),
        last: Number(await timeline.getAttribute('data-last-x'))
      });
      await plot.evaluate(el => el.scrollIntoView({ block: 'center' }));
      const area = (await plot.locator('.nsewdrag').first().boundingBox())!;
      const y = area.y + area.height / 2;
      const [before0, before1] = await xRange();
      // a drag inside the pane's body: plotly's zoom box
      await page.mouse.move(area.x + area.width * 0.4, y);
      await page.mouse.down();
      await page.mouse.move(area.x + area.width * 0.5, y, { steps: 5 });
      await page.mouse.move(area.x + area.width * 0.6, y, { steps: 5 });
      await page.mouse.up();
      await expect
        .poll(async () => {
          const [a, b] = await xRange();
          return b - a;
        })
        .toBeLessThan((before1 - before0) * 0.5);
      // the drag did not toggle the pane (issue 22: a pane once collapsed after one)
      await expect(toggle).toHaveAttribute('aria-expanded', 'true');
      await expect(plot).toBeVisible();
      // the follow-live control is not covered by a plotly notice
      await expect(plot.locator('.notifier-note')).toHaveCount(0);
      const data = await span();
      expect(data.last).toBeGreaterThan(data.first);
      await page.mouse.dblclick(area.x + area.width * 0.5, y);
      // every sample known at the double-click is in the range, from the first one on
      await expect
        .poll(async () => {
          const [a, b] = await xRange();
          return a <= data.first + 1 && b >= data.last - 1; // 1 ms of rounding
        })
        .toBe(true);
      const [a, b] = await xRange();
      // all of the data, not a fixed window: at most twice its span (a round step)
      expect(b - a).toBeLessThanOrEqual(2 * (data.last - data.first) + 2000);
      await expect(toggle).toHaveAttribute('aria-expanded', 'true');
      test.info().annotations.push({
        type: 'double-click',
        description: `data ${data.first}..${data.last}, range ${a}..${b}`
      });
      // back to following live for the next step
      await panel.locator('.vramscope-Timeline-follow').click();
    });

    await test.step('screenshot while a training loop runs (a test artifact)', async () => {
      // Only the timeline and the cells: collapse the other sections.
      const panel = page.locator('#vramscope-panel');
      for (const title of ['Devices', 'Model insight']) {
        await expandSection(panel, title, false);
      }
      const prompt = await startCode(page, 2, TRAINING_LOOP);
      await expect(busy).toBeVisible({ timeout: 30_000 });
      const start = await sampleCount();
      await expect
        .poll(sampleCount, { timeout: 60_000 })
        .toBeGreaterThanOrEqual(start + 40);
      await page.screenshot({
        path: test.info().outputPath('timeline-loop.png')
      });
      // The screenshot shows the loop live.
      await expect(prompt).toHaveText('[*]:');
      // the kernel runs in the notebook's folder: there the loop sees the file and ends
      await page.contents.uploadContent('', 'text', `${tmpPath}/${STOP_FILE}`);
      await waitForCell(page, 2, 30_000); // well before the loop's own 2 minutes
    });
  });
});

/**
 * Browser faults (issue 14): a kernel whose environment lacks the bridge (a kernelspec for
 * the same python whose finder says vramscope is not installed) shows the install line and
 * the notebook keeps working. No fixed sleeps: every wait is on a condition.
 */
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { expect } from '@jupyterlab/galata';

import { openPanel, runCode, test, waitForCell } from './lab';
import { ROOT } from './utils';

const PYTHON = path.join(ROOT, '.venv', 'bin', 'python');
const NO_BRIDGE = `vramscope-nobridge-${process.pid}`;
let specDir = '';
let hideDir = '';

// The kernelspec exists only around this test: JupyterLab's default kernel for new
// notebooks could otherwise be it.
test.describe('a kernel without the bridge', () => {
  test.beforeAll(() => {
    // A kernelspec for the same python, with a finder that says vramscope is not installed
    // (what a kernel from an environment without the package answers to the bootstrap).
    const dataDir = execFileSync(PYTHON, [
      '-c',
      'from jupyter_core.paths import jupyter_data_dir; print(jupyter_data_dir())'
    ])
      .toString()
      .trim();
    hideDir = fs.mkdtempSync(path.join(os.tmpdir(), 'vramscope-hide-'));
    fs.writeFileSync(
      path.join(hideDir, 'sitecustomize.py'),
      [
        'import sys',
        'class _NoBridge:',
        '    def find_spec(self, name, path=None, target=None):',
        "        if name == 'vramscope' or name.startswith('vramscope.'):",
        '            raise ModuleNotFoundError(f"No module named {name!r}", name=name)',
        'sys.meta_path.insert(0, _NoBridge())',
        ''
      ].join('\n')
    );
    specDir = path.join(dataDir, 'kernels', NO_BRIDGE);
    fs.mkdirSync(specDir, { recursive: true });
    fs.writeFileSync(
      path.join(specDir, 'kernel.json'),
      JSON.stringify({
        argv: [PYTHON, '-m', 'ipykernel_launcher', '-f', '{connection_file}'],
        display_name: 'Python (no vramscope)',
        language: 'python',
        env: { PYTHONPATH: hideDir }
      })
    );
  });

  test.afterAll(() => {
    fs.rmSync(specDir, { recursive: true, force: true });
    fs.rmSync(hideDir, { recursive: true, force: true });
  });

  test('a kernel without the bridge shows the install line', async ({
    page
  }) => {
    await page.notebook.createNew('no-bridge.ipynb', { kernel: NO_BRIDGE });
    await openPanel(page);
    const status = page.locator('#vramscope-panel .vramscope-Status');
    await expect(status).toHaveAttribute('data-status', 'no-bridge', {
      timeout: 60_000
    });
    await expect(
      page.locator('#vramscope-panel .vramscope-Status-installLine')
    ).toHaveText('%pip install vramscope');
    await expect(
      page.locator('#vramscope-panel .vramscope-Status-message')
    ).toContainText('not installed');
    // the notebook itself keeps working
    await runCode(page, 0, 'print(40 + 2)');
    await waitForCell(page, 0);
  });
});

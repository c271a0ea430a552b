/**
 * Browser faults (issue 14): a page reload while a training cell runs (the panel rebuilds
 * from the kernel: the history with hello, the running cell's record when it ends), one
 * notebook open in two browser tabs (both panels follow the one kernel), and a kernel whose
 * environment lacks the bridge (a kernelspec for the same python whose finder says vramscope
 * is not installed) showing the install line, and a kernel of another language (an echo
 * kernel) told apart without being sent anything. Notebooks are used under the name they were
 * created with (galata's createNew(name) renames Untitled.ipynb, and a page that opens the
 * renamed path can start a second kernel). No fixed sleeps: every wait is on a condition.
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { expect, IJupyterLabPageFixture } from '@jupyterlab/galata';

import {
  openPanel,
  rows,
  runCode,
  serverOf,
  setCode,
  startCode,
  test,
  waitForCell
} from './lab';
import {
  commTargets,
  consoleMessages,
  ROOT,
  watchDebugRequests
} from './utils';

const PYTHON = path.join(ROOT, '.venv', 'bin', 'python');
const NO_BRIDGE = `vramscope-nobridge-${process.pid}`;
const ECHO = `vramscope-echo-${process.pid}`;
let specDir = '';
let hideDir = '';

/** Write kernelspec `name` (kernel.json) into the data dir of this worker's JupyterLab server
 * (the run's own, one per server: playwright.config.ts), where only that server sees it;
 * returns its dir. */
function installKernelspec(name: string, spec: object): string {
  const server = serverOf(test.info().parallelIndex);
  expect(server, 'the JupyterLab server of this worker').not.toBeNull();
  const dir = path.join(server!.dataDir, 'kernels', name);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'kernel.json'), JSON.stringify(spec));
  return dir;
}

async function untitledWithPanel(page: IJupyterLabPageFixture): Promise<void> {
  watchDebugRequests(page);
  await page.notebook.createNew();
  await page.sidebar.close('left');
  await openPanel(page);
  await page.sidebar.setWidth(460, 'right');
  await expect(
    page.locator('#vramscope-panel .vramscope-Status')
  ).toHaveAttribute('data-status', 'connected', { timeout: 60_000 });
}

// A page loaded for each test: they reload it, open it in more tabs, install kernelspecs and
// make new notebooks with JupyterLab's default kernel, which a page remembers as last chosen.
test.use({ sharePage: false });

test('a page reload mid-training rebuilds the panel from the kernel', async ({
  page,
  pageErrors
}) => {
  await untitledWithPanel(page);
  await runCode(page, 0, 'kept = bytearray(16 * 1024 * 1024)');
  await expect(rows(page)).toHaveCount(1);
  await setCode(
    page,
    1,
    'import time\nfor step in range(40):\n    time.sleep(0.1)  # a training loop'
  );
  await page.notebook.save(); // the reloaded page reopens the saved notebook
  page.on('dialog', dialog => void dialog.accept()); // "leave the page?" while it runs
  await startCode(
    page,
    1,
    'import time\nfor step in range(40):\n    time.sleep(0.1)  # a training loop'
  );

  // a plain browser reload (the app comes back, restores the open notebook, reconnects)
  await page.reload({ waitForIsReady: false });
  await page.waitForFunction(
    () =>
      !!(window as any).jupyterapp?.shell &&
      !!document.querySelector('#vramscope-panel') &&
      !!document.querySelector('.jp-NotebookPanel')
  );
  await openPanel(page);
  const status = page.locator('#vramscope-panel .vramscope-Status');
  await expect(status).toHaveAttribute('data-status', 'connected', {
    timeout: 60_000
  });
  // the history comes back with hello, the running cell's record when it ends
  await expect(rows(page)).toHaveCount(2, { timeout: 60_000 }); // newest first
  await expect(rows(page).filter({ hasText: 'kept = bytearray' })).toHaveCount(
    1
  );
  await expect(rows(page).filter({ hasText: 'import time' })).toHaveCount(1);
  expect(pageErrors.filter(e => /vramscope/i.test(e))).toEqual([]);
});

test('one notebook open in two browser tabs: both panels follow the kernel', async ({
  page,
  pageErrors,
  context,
  baseURL,
  tmpPath
}) => {
  const console = consoleMessages(context);
  const comms = commTargets(context);
  await untitledWithPanel(page);
  await runCode(page, 0, 'first = 1');
  await expect(rows(page)).toHaveCount(1);
  await page.notebook.save();

  const second = await context.newPage(); // pageErrors has this page's errors too
  await second.goto(`${baseURL}/lab/tree/${tmpPath}/Untitled.ipynb`);
  await second.waitForFunction(() => {
    const app = (window as any).jupyterapp;
    return !!app && !!app.shell && !!document.querySelector('#vramscope-panel');
  });
  await second.evaluate(() =>
    (window as any).jupyterapp.shell.activateById('vramscope-panel')
  );
  const status2 = second.locator('#vramscope-panel .vramscope-Status');
  await expect(status2).toHaveAttribute('data-status', 'connected', {
    timeout: 60_000
  });
  const rows2 = second.locator('#vramscope-panel .vramscope-CellTable-row');
  await expect(rows2).toHaveCount(1); // the history, from the shared kernel

  // a cell run in the first tab reaches both panels
  await runCode(page, 1, 'second = bytearray(8 * 1024 * 1024)');
  await expect(rows(page)).toHaveCount(2);
  await expect(rows2).toHaveCount(2);
  await expect(rows2.filter({ hasText: 'second = bytearray' })).toHaveCount(1);

  // the same notebook in Notebook 7 on the same server (its own page, the same kernel)
  const third = await context.newPage();
  await third.goto(`${baseURL}/notebooks/${tmpPath}/Untitled.ipynb`);
  // Notebook 7's own entry (this server does not expose window.jupyterapp on /notebooks)
  await third.getByRole('menuitem', { name: 'View' }).click();
  await third.locator('.lm-Menu-item', { hasText: 'Right Sidebar' }).hover();
  await third
    .locator('.lm-Menu-item', { hasText: 'Show vramscope: memory' })
    .click();
  const status3 = third.locator('#vramscope-panel .vramscope-Status');
  await expect(status3).toHaveAttribute('data-status', 'connected', {
    timeout: 60_000
  });
  await runCode(page, 2, 'third = 3');
  await expect(rows(page)).toHaveCount(3);
  await expect(rows2).toHaveCount(3);
  // the other pages go (their comms closed), the first runs on
  await third.close();
  await second.close();
  await runCode(page, 3, 'fourth = 4');
  await expect(rows(page)).toHaveCount(4);
  expect(pageErrors.filter(e => /vramscope/i.test(e))).toEqual([]);
  // No page logged a vramscope comm it never opened (issue 22: "Comm not found" in Lab's
  // console). What is logged comes from jupyterlab_widgets: each page's widget manager opens
  // a `jupyter.widget.control` comm; a kernel without ipywidgets imported closes it with a
  // comm_close on iopub, which every other page on that kernel receives and does not know.
  const notFound = console
    .map(m => /Comm not found for comm id (\S+)/.exec(m)?.[1])
    .filter((id): id is string => !!id);
  expect(notFound.filter(id => comms.get(id) === 'vramscope')).toEqual([]);
  expect(
    notFound.filter(id => comms.get(id) !== 'jupyter.widget.control')
  ).toEqual([]);
  test.info().annotations.push({
    type: 'comm not found',
    description: `${notFound.length} for jupyter.widget.control comms of other pages`
  });
});

/** A new notebook `name` on kernelspec `kernel`, once the panel shows `status`. */
async function newNotebookShowing(
  page: IJupyterLabPageFixture,
  name: string,
  kernel: string,
  status: string
): Promise<void> {
  await page.notebook.createNew(name, { kernel });
  await openPanel(page);
  await expect(
    page.locator('#vramscope-panel .vramscope-Status')
  ).toHaveAttribute('data-status', status, { timeout: 60_000 });
}

// The kernelspec exists only around this test: JupyterLab's default kernel for new
// notebooks could otherwise be it.
test.describe('a kernel without the bridge', () => {
  test.beforeAll(() => {
    // A kernelspec for the same python, with a finder that says vramscope is not installed
    // (what a kernel from an environment without the package answers to the bootstrap).
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
    specDir = installKernelspec(NO_BRIDGE, {
      argv: [PYTHON, '-m', 'ipykernel_launcher', '-f', '{connection_file}'],
      display_name: 'Python (no vramscope)',
      language: 'python',
      env: { PYTHONPATH: hideDir }
    });
  });

  test.afterAll(() => {
    fs.rmSync(specDir, { recursive: true, force: true });
    fs.rmSync(hideDir, { recursive: true, force: true });
  });

  test('a kernel without the bridge shows the install line', async ({
    page
  }) => {
    await newNotebookShowing(page, 'no-bridge.ipynb', NO_BRIDGE, 'no-bridge');
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

// A real kernel of another language: ipykernel's wrapper-kernel base class with an `echo`
// language, which logs every code it is sent (ground truth for "nothing was run").
const ECHO_KERNEL = `
import os
from ipykernel.kernelapp import IPKernelApp
from ipykernel.kernelbase import Kernel


class EchoKernel(Kernel):
    implementation = "echo"
    implementation_version = "1.0"
    language = "echo"
    language_version = "1.0"
    language_info = {"name": "echo", "mimetype": "text/plain", "file_extension": ".txt"}
    banner = "echo"

    async def do_execute(self, code, silent, store_history=True, user_expressions=None,
                         allow_stdin=False, **kwargs):
        with open(os.environ["VRAMSCOPE_ECHO_LOG"], "a") as log:
            log.write(repr(code) + "\\n")
        if not silent:
            self.send_response(self.iopub_socket, "stream", {"name": "stdout", "text": code})
        return {"status": "ok", "execution_count": self.execution_count,
                "payload": [], "user_expressions": {}}


IPKernelApp.launch_instance(kernel_class=EchoKernel)
`;

test.describe('a non-Python kernel', () => {
  let echoDir = '';
  let echoSpec = '';
  test.beforeAll(() => {
    echoDir = fs.mkdtempSync(path.join(os.tmpdir(), 'vramscope-echo-'));
    fs.writeFileSync(path.join(echoDir, 'echo_kernel.py'), ECHO_KERNEL);
    echoSpec = installKernelspec(ECHO, {
      argv: [
        PYTHON,
        path.join(echoDir, 'echo_kernel.py'),
        '-f',
        '{connection_file}'
      ],
      display_name: 'Echo',
      language: 'echo',
      env: { VRAMSCOPE_ECHO_LOG: path.join(echoDir, 'executed.log') }
    });
  });

  test.afterAll(() => {
    fs.rmSync(echoSpec, { recursive: true, force: true });
    fs.rmSync(echoDir, { recursive: true, force: true });
  });

  test('says it needs a Python kernel and sends the kernel nothing', async ({
    page,
    pageErrors
  }) => {
    await newNotebookShowing(page, 'echo.ipynb', ECHO, 'unsupported-kernel');
    await expect(
      page.locator('#vramscope-panel .vramscope-Status-message')
    ).toHaveText('vramscope needs a Python kernel (this one is echo)');
    // the notebook itself works, and the kernel ran only the user's cell (no bootstrap)
    await setCode(page, 0, 'hello from echo');
    await page.notebook.runCell(0, { inplace: true });
    await waitForCell(page, 0);
    await expect(
      (await page.notebook.getCellLocator(0))!.locator('.jp-OutputArea-output')
    ).toHaveText('hello from echo');
    const log = fs.readFileSync(path.join(echoDir, 'executed.log'), 'utf8');
    expect(log).toBe("'hello from echo'\n");
    await expect(rows(page)).toHaveCount(0);
    expect(pageErrors.filter(e => /vramscope/i.test(e))).toEqual([]);
  });
});

/**
 * Playwright/galata configuration for the vramscope UI tests.
 *
 * Starts a real JupyterLab and a Jupyter Notebook 7 server from the repository's .venv, each
 * on a free localhost port (temporary root dirs, no token), and drives Debian's system
 * chromium (never `playwright install`). tests/notebook7.spec.ts uses plain playwright pages
 * against the Notebook 7 server (`VRAMSCOPE_NB_URL`); every other spec uses galata.
 * Run from the repository root: `npx playwright test -c ui-tests/playwright.config.ts`
 * (scripts/test.sh does this after scripts/setup.sh --with-browser).
 */
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import baseConfig from '@jupyterlab/galata/lib/playwright-config';
import { defineConfig } from '@playwright/test';

const ROOT = path.resolve(__dirname, '..');
const VENV_BIN = path.join(ROOT, '.venv', 'bin');
const PYTHON = fs.existsSync(path.join(VENV_BIN, 'python'))
  ? path.join(VENV_BIN, 'python')
  : 'python3';

// The config is evaluated in the runner and again in each worker: pick the ports once and
// hand them down through the environment.
const freePort = (): string =>
  execFileSync(PYTHON, [
    '-c',
    "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"
  ])
    .toString()
    .trim();
if (!process.env.VRAMSCOPE_UI_PORT) {
  process.env.VRAMSCOPE_UI_PORT = freePort();
}
if (!process.env.VRAMSCOPE_NB_PORT) {
  let port = freePort();
  while (port === process.env.VRAMSCOPE_UI_PORT) {
    port = freePort();
  }
  process.env.VRAMSCOPE_NB_PORT = port;
}
if (!process.env.VRAMSCOPE_UI_CONFIG_DIR) {
  process.env.VRAMSCOPE_UI_CONFIG_DIR = fs.mkdtempSync(
    path.join(os.tmpdir(), 'vramscope-ui-config-')
  );
}
const PORT = process.env.VRAMSCOPE_UI_PORT;
const BASE_URL = `http://127.0.0.1:${PORT}`;
process.env.VRAMSCOPE_NB_URL = `http://127.0.0.1:${process.env.VRAMSCOPE_NB_PORT}`;
// Headless Chromium's flags, shared with the browser benchmarks (bench/_bundle.mjs): no sandbox
// (containers run as root), no GPU, no background traffic or first-run work.
const CHROMIUM_ARGS: string[] = JSON.parse(
  fs.readFileSync(path.join(__dirname, 'chromium-args.json'), 'utf8')
);
const SERVER_ENV = {
  PATH: `${VENV_BIN}${path.delimiter}${process.env.PATH ?? ''}`,
  VIRTUAL_ENV: path.join(ROOT, '.venv'),
  JUPYTER_CONFIG_DIR: process.env.VRAMSCOPE_UI_CONFIG_DIR as string
};

export default defineConfig({
  ...baseConfig,
  testDir: path.join(__dirname, 'tests'),
  outputDir: path.join(ROOT, 'test-results', 'playwright'),
  reporter: [['list']],
  timeout: 180_000,
  expect: { timeout: 30_000 },
  retries: 0,
  // One worker: galata's per-test clean-up shuts down the kernels and sessions it did not
  // start, so two workers on one server end each other's kernels ("No such kernel", a
  // restart never back to Idle). VRAMSCOPE_UI_WORKERS=2 only with one server per worker.
  workers: Number(process.env.VRAMSCOPE_UI_WORKERS || 1),
  fullyParallel: false,
  forbidOnly: !!process.env.CI,
  use: {
    ...baseConfig.use,
    baseURL: BASE_URL,
    browserName: 'chromium',
    viewport: { width: 1400, height: 860 },
    video: 'off',
    trace: 'off',
    screenshot: 'only-on-failure',
    launchOptions: {
      executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
      args: CHROMIUM_ARGS
    }
  },
  webServer: [
    {
      command: [
        `"${path.join(VENV_BIN, 'jupyter')}" lab`,
        `--config "${path.join(__dirname, 'jupyter_server_test_config.py')}"`,
        `--port ${PORT} --no-browser`
      ].join(' '),
      cwd: ROOT,
      url: `${BASE_URL}/lab`,
      timeout: 120_000,
      reuseExistingServer: false,
      stdout: 'ignore',
      stderr: 'pipe',
      env: SERVER_ENV
    },
    {
      // Jupyter Notebook 7 with the same installed extension (tests/notebook7.spec.ts).
      command: [
        `"${path.join(VENV_BIN, 'jupyter')}" notebook`,
        `--config "${path.join(__dirname, 'jupyter_notebook_test_config.py')}"`,
        `--port ${process.env.VRAMSCOPE_NB_PORT} --no-browser`
      ].join(' '),
      cwd: ROOT,
      url: `${process.env.VRAMSCOPE_NB_URL}/tree`,
      timeout: 120_000,
      reuseExistingServer: false,
      stdout: 'ignore',
      stderr: 'pipe',
      env: SERVER_ENV
    }
  ]
});

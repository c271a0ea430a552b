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
// One JupyterLab server per worker (VRAMSCOPE_UI_WORKERS, default 2), each with its own
// config and data dirs: each test shuts down the kernels that earlier tests left on its server
// (lab.ts, `settleKernels`), so two workers on one server would end each other's kernels, and
// a kernelspec a test installs (faults.spec) is seen by its own server only. lab.ts points
// each worker's pages and API requests at the server of its `parallelIndex`
// (VRAMSCOPE_UI_URLS). Measured on 2 cores (the whole suite, one run each, side by side in
// one session): one worker 530 s; two 453 s; two with one torch thread per kernel
// (OMP_NUM_THREADS, below) 420 s.
const WORKERS = Math.max(1, Number(process.env.VRAMSCOPE_UI_WORKERS || 2));
/** Specs that time work in the page (scale.spec: every panel message < 50 ms median). */
const ALONE = /scale\.spec\.ts$/;
/**
 * The spec on plain Playwright pages (Notebook 7): its tests need a worker of their own (other
 * fixtures), which Playwright starts for them once every galata test has run when they share
 * a project, so that the run ended with them on one worker while the other core waited.
 */
const OWN_WORKER = /notebook7\.spec\.ts$/;
const taken = new Set<string>();
const portOf = (name: string): string => {
  let port = process.env[name];
  while (!port || taken.has(port)) {
    port = freePort();
  }
  taken.add(port);
  return (process.env[name] = port);
};
// A temporary dir named by environment variable `name`: made once, in the runner, and handed
// down to the workers (the config is evaluated in each).
const tmpDirOf = (name: string, prefix: string): string =>
  (process.env[name] ??= fs.mkdtempSync(path.join(os.tmpdir(), prefix)));
const configDirOf = (name: string): string =>
  tmpDirOf(name, 'vramscope-ui-config-');
// Kernelspecs the tests install (faults.spec) and the servers' runtime files go to a
// per-run data dir for each server, never to the user's own (~/.local/share/jupyter): a run
// stopped between installing and removing one would leave it as a default kernel there. The
// labextension and the python3 kernelspec are found in the venv's share/jupyter as before.
// Server 0's is also the run's own (JUPYTER_DATA_DIR, inherited by the workers and what they
// start: the kernels of `vramscope profile` in export.spec).
const dataDirOf = (name: string): string =>
  tmpDirOf(name, 'vramscope-ui-data-');
const LAB_SERVERS = Array.from({ length: WORKERS }, (_, i) => {
  const suffix = i === 0 ? '' : `_${i}`;
  const port = portOf(`VRAMSCOPE_UI_PORT${suffix}`);
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    configDir: configDirOf(`VRAMSCOPE_UI_CONFIG_DIR${suffix}`),
    dataDir: dataDirOf(
      i === 0 ? 'JUPYTER_DATA_DIR' : `VRAMSCOPE_UI_DATA_DIR${suffix}`
    )
  };
});
portOf('VRAMSCOPE_NB_PORT');
// IPython's folder of the servers' kernels: one of this run's (scripts/test.sh gives one for
// every suite), never the user's ~/.ipython (its history database, startup files and config).
tmpDirOf('IPYTHONDIR', 'vramscope-ui-ipython-');
process.env.VRAMSCOPE_UI_URLS = JSON.stringify(LAB_SERVERS.map(s => s.url));
// for the specs that install a kernelspec on their worker's server (faults.spec)
process.env.VRAMSCOPE_UI_DATA_DIRS = JSON.stringify(
  LAB_SERVERS.map(s => s.dataDir)
);
const BASE_URL = LAB_SERVERS[0].url;
process.env.VRAMSCOPE_NB_URL = `http://127.0.0.1:${process.env.VRAMSCOPE_NB_PORT}`;
// Headless Chromium's flags, shared with the browser benchmarks (bench/_bundle.mjs): no sandbox
// (containers run as root), no GPU, no background traffic or first-run work.
const CHROMIUM_ARGS: string[] = JSON.parse(
  fs.readFileSync(path.join(__dirname, 'chromium-args.json'), 'utf8')
);
// Debian's chromium-headless-shell (what scripts/setup.sh --with-browser installs: the headless-
// only build, as Playwright runs headless tests), else Debian's chromium; CHROMIUM_PATH overrides.
// Over the whole suite the shell's browser, GPU and other helper processes took ~33 CPU-s less
// than the full browser's headless mode.
const CHROMIUM =
  process.env.CHROMIUM_PATH ||
  ['/usr/bin/chromium-headless-shell', '/usr/bin/chromium'].find(p =>
    fs.existsSync(p)
  ) ||
  '/usr/bin/chromium-headless-shell';
// One torch thread per kernel, unless asked otherwise: two workers' kernels computing at once
// on two cores, each with torch's default of a thread per core, took 3x as long over the
// demo's training loop. Set before the zygote starts (it compares OMP_* with each kernel's).
process.env.OMP_NUM_THREADS ??= '1';
// Warm kernels (test/warm_kernels/zygote.py): the servers' python3 kernels are forked with
// torch imported from a zygote that lives as long as this runner, ~4 s of CPU less a kernel.
// Started once, in the runner: the workers inherit the environment it returns.
if (!process.env.VRAMSCOPE_UI_WARM_KERNELS_ENV) {
  const warm =
    process.env.VRAMSCOPE_COLD_KERNELS === '1'
      ? {}
      : JSON.parse(
          execFileSync(PYTHON, [
            path.join(ROOT, 'test', 'warm_kernels', 'zygote.py'),
            '--start',
            fs.mkdtempSync(path.join(os.tmpdir(), 'vramscope-warm-kernels-')),
            '--watch-pid',
            String(process.pid)
          ]).toString()
        );
  process.env.VRAMSCOPE_UI_WARM_KERNELS_ENV = JSON.stringify(warm);
}
const WARM_KERNELS_ENV: Record<string, string> = JSON.parse(
  process.env.VRAMSCOPE_UI_WARM_KERNELS_ENV
);
// `jupyter lab` / `jupyter notebook`, ~3 s of CPU less each (scripts/jupyter_app.py says why)
const JUPYTER_APP = path.join(ROOT, 'scripts', 'jupyter_app.py');
const serverEnv = (server: { configDir: string; dataDir: string }) => ({
  ...WARM_KERNELS_ENV,
  PATH: `${VENV_BIN}${path.delimiter}${process.env.PATH ?? ''}`,
  VIRTUAL_ENV: path.join(ROOT, '.venv'),
  JUPYTER_CONFIG_DIR: server.configDir,
  JUPYTER_DATA_DIR: server.dataDir
});

export default defineConfig({
  ...baseConfig,
  testDir: path.join(__dirname, 'tests'),
  outputDir: path.join(ROOT, 'test-results', 'playwright'),
  reporter: [['list']],
  timeout: 180_000,
  expect: { timeout: 30_000 },
  retries: 0,
  workers: WORKERS, // each with its own JupyterLab server (LAB_SERVERS)
  fullyParallel: false,
  // The specs that bound times measured in the page run alone, after the others: with two
  // workers the other worker's kernel and page would share the two cores with them.
  // The Notebook 7 spec first (its own project, listed first: its worker starts at once,
  // beside the galata tests).
  projects: [
    { name: 'notebook7', testMatch: OWN_WORKER },
    { name: 'shared', testIgnore: [ALONE, OWN_WORKER] },
    { name: 'alone', testMatch: ALONE, dependencies: ['notebook7', 'shared'] }
  ],
  forbidOnly: !!process.env.CI,
  use: {
    ...baseConfig.use,
    baseURL: BASE_URL,
    browserName: 'chromium',
    viewport: { width: 1400, height: 860 },
    video: 'off',
    trace: 'off',
    // One browser context per worker, reset between tests (cookies, storage, pages, routes:
    // Playwright's reuseContext): JupyterLab's scripts stay compiled in it, so a test's page
    // loads in ~2.3 s instead of ~4.1 s (measured on 2 cores, ~30 page loads a run).
    reuseContext: true,
    screenshot: 'only-on-failure',
    launchOptions: {
      executablePath: CHROMIUM,
      args: CHROMIUM_ARGS
    }
  },
  // One process starts every server at once (servers.mjs says why) and says when all answer.
  webServer: {
    command: `node "${path.join(__dirname, 'servers.mjs')}"`,
    cwd: ROOT,
    env: {
      VRAMSCOPE_UI_SERVERS: JSON.stringify([
        ...LAB_SERVERS.map((server, i) => ({
          name: `lab ${i}`,
          command: [
            `"${PYTHON}" "${JUPYTER_APP}" lab`,
            `--config "${path.join(__dirname, 'jupyter_server_test_config.py')}"`,
            `--port ${server.port} --ServerApp.port_retries=0 --no-browser`
          ].join(' '),
          cwd: ROOT,
          url: `${server.url}/lab`,
          env: serverEnv(server)
        })),
        {
          // Jupyter Notebook 7 with the same installed extension (tests/notebook7.spec.ts).
          name: 'notebook',
          command: [
            `"${PYTHON}" "${JUPYTER_APP}" notebook`,
            `--config "${path.join(__dirname, 'jupyter_notebook_test_config.py')}"`,
            `--port ${process.env.VRAMSCOPE_NB_PORT} --no-browser`
          ].join(' '),
          cwd: ROOT,
          url: `${process.env.VRAMSCOPE_NB_URL}/tree`,
          env: serverEnv(LAB_SERVERS[0])
        }
      ])
    },
    wait: { stdout: /vramscope-ui-servers: ready/ },
    timeout: 120_000,
    stdout: 'ignore',
    stderr: 'pipe'
  }
});

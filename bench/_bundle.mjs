// Bundles a browser-side bench entry (TypeScript) with rspack (from @jupyter/builder) for the
// benchmarks that run in headless Chromium (timeline_update, processes_render).
import { existsSync } from 'node:fs';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(join(root, 'package.json'));

/** Bundle `entry` into `outDir/bench.js` (CSS imports as strings). */
export async function bundle(entry, outDir) {
  const { rspack } = require('@rspack/core');
  const config = {
    mode: 'production',
    context: root,
    entry,
    target: 'web',
    devtool: false,
    output: { path: outDir, filename: 'bench.js', asyncChunks: false },
    resolve: { extensions: ['.ts', '.js'] },
    module: {
      rules: [
        {
          test: /\.ts$/,
          exclude: /node_modules/,
          loader: 'builtin:swc-loader',
          options: {
            jsc: { parser: { syntax: 'typescript' }, target: 'es2022' }
          },
          type: 'javascript/auto'
        },
        { test: /\.css$/, type: 'asset/source' }
      ]
    },
    optimization: { minimize: false },
    performance: { hints: false }
  };
  await new Promise((ok, fail) =>
    rspack(config, (err, stats) => {
      if (err) {
        fail(err);
      } else if (stats.hasErrors()) {
        fail(new Error(stats.toString({ all: false, errors: true })));
      } else {
        ok();
      }
    })
  );
}

/**
 * The browser to run in: $CHROMIUM, else Debian's chromium-headless-shell (what
 * `scripts/setup.sh --with-browser` installs, and the UI tests run), else Debian's chromium.
 * Exits with what to install when there is none.
 */
export function chromiumPath() {
  const found =
    process.env.CHROMIUM ||
    ['/usr/bin/chromium-headless-shell', '/usr/bin/chromium'].find(p =>
      existsSync(p)
    );
  if (!found || !existsSync(found)) {
    console.error(
      `${found || 'chromium'} not found: apt-get install -y chromium-headless-shell (or set CHROMIUM)`
    );
    process.exit(2);
  }
  return found;
}

/**
 * Open `outDir/index.html` in headless system Chromium (playwright-core, never a downloaded
 * browser), wait for `window.vramscopeBench` and return what it returns for `opts`.
 */
export async function runBench(outDir, chromium, opts) {
  const { pathToFileURL } = await import('node:url');
  const { chromium: pw } = require('playwright-core');
  const browser = await pw.launch({
    executablePath: chromium,
    args: require(join(root, 'ui-tests', 'chromium-args.json')) // the UI tests' flags
  });
  try {
    const page = await browser.newPage({
      viewport: { width: 1280, height: 800 }
    });
    page.on('pageerror', e => console.error('page error:', e.message));
    await page.goto(pathToFileURL(join(outDir, 'index.html')).href);
    await page.waitForFunction(
      () => typeof window.vramscopeBench === 'function'
    );
    const result = await page.evaluate(o => window.vramscopeBench(o), opts);
    return { result, browserVersion: browser.version() };
  } finally {
    await browser.close();
  }
}

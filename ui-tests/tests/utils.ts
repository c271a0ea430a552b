import * as fs from 'fs';
import * as path from 'path';
import {
  type BrowserContext,
  type Route,
  expect,
  type Page,
  type TestInfo
} from '@playwright/test';

export const ROOT = path.resolve(__dirname, '..', '..');

/**
 * What the debugger's "Kernel Sources" list shows in the tests' pages: vramscope's own
 * modules, not the kernel's ~2,000 (torch imported). JupyterLab's debugger asks a kernel for
 * its loaded modules after every cell and draws every one in its (hidden) sidebar: ~6,800
 * elements, 73% of the page, re-rendered after each cell, each row with a React icon that
 * connects to the icon's signal by a linear search over the others (quadratic). Measured over
 * the whole browser suite (CPU profiles of the page): ~30 s of the renderer's ~300 s in
 * those connects, and every document-wide Playwright query walks the extra elements; the
 * suite took 420 s and ~785 CPU-s (renderers 363) without the filter, 320 s and ~593 (246)
 * with it, one after the other. The kernel is still asked and still answers (what the bridge
 * keeps out of a cell's delta, vramscope.quiet); only the hidden list is shorter.
 */
export const DEBUGGER_SOURCES_FILTER = '^vramscope';

/**
 * Every JupyterLab page of `context` (loaded or reloaded from now on) filters its debugger's
 * kernel sources to `DEBUGGER_SOURCES_FILTER`; other pages are left alone.
 */
export async function filterDebuggerSources(
  context: BrowserContext
): Promise<void> {
  await context.addInitScript(filter => {
    if (window.top !== window) {
      return;
    }
    // Pinned on the sources model once the debugger's sidebar exists: its filter box writes
    // its own (empty) value back once it is drawn. Given up after a minute (not JupyterLab).
    const since = Date.now();
    const timer = setInterval(() => {
      const app = (window as any).jupyterapp;
      const sidebar = app?.shell
        ? Array.from(app.shell.widgets('right') as Iterable<any>).find(
            w => w.id === 'jp-debugger-sidebar'
          )
        : undefined;
      const model = sidebar?.kernelSources?._model;
      if (model) {
        const own = Object.getOwnPropertyDescriptor(
          Object.getPrototypeOf(model),
          'filter'
        );
        if (own?.get && own.set) {
          Object.defineProperty(model, 'filter', {
            configurable: true,
            get: () => own.get!.call(model),
            set: () => {
              if (own.get!.call(model) !== filter) {
                own.set!.call(model, filter);
              }
            }
          });
          model.filter = filter;
        }
      }
      if (model || Date.now() - since > 60_000) {
        clearInterval(timer);
      }
    }, 100);
  }, DEBUGGER_SOURCES_FILTER);
}

/**
 * The JupyterLab workspace API of every page of `context`, answered here and never by the
 * server: an empty workspace to read, and writes dropped. galata mocks it per page and per
 * test only (`mockState`, a page route, which still answers first within a test), so a page
 * between tests (the kept page, its routes removed) or one galata did not set up (a second
 * tab) saved its file browser's folder and recent folders to the server's store and could
 * restore them later, after galata had deleted those folders: a "Directory not found" dialog
 * then took the focus from the test's notebook (seen once, run 82 of stop 44).
 */
export async function isolateWorkspaces(
  context: BrowserContext
): Promise<void> {
  await context.route(/\/api\/workspaces(\/|\?|$)/, route =>
    answerOnce(answerWorkspace(route))
  );
}

function answerWorkspace(route: Route): Promise<void> {
  const request = route.request();
  if (request.method() === 'PUT') {
    return route.fulfill({ status: 204 });
  }
  if (request.method() !== 'GET') {
    return route.continue();
  }
  const id = /\/api\/workspaces\/([^/?]+)/.exec(request.url())?.[1];
  const workspace = { data: {}, metadata: { id: id ?? 'default' } };
  return route.fulfill({
    status: 200,
    contentType: 'application/json',
    body: JSON.stringify(
      id
        ? workspace
        : {
            workspaces: { ids: [workspace.metadata.id], values: [workspace] }
          }
    )
  });
}

/**
 * A route's answer, but for "Route is already handled": the shared page's context has this
 * handler removed and added again after each test (sharedpage.ts, `endTest`), and a request
 * in flight at that moment reached both copies; the second to answer found it answered, by
 * the same handler's same answer (fresh run 92: a test failed on it).
 */
async function answerOnce(answer: Promise<void>): Promise<void> {
  try {
    await answer;
  } catch (error) {
    if (!String(error).includes('Route is already handled')) {
      throw error;
    }
  }
}

/** Whether the served (freshly built) front end contains the vramscope panel. */
export function panelBuilt(): boolean {
  const dir = path.join(
    ROOT,
    'python_bridge',
    'vramscope',
    'labextension',
    'static'
  );
  if (!fs.existsSync(dir)) {
    return false;
  }
  return fs
    .readdirSync(dir)
    .filter(f => f.endsWith('.js'))
    .some(f =>
      fs.readFileSync(path.join(dir, f), 'utf8').includes('vramscope-panel')
    );
}

/**
 * Where a README screenshot goes: test-results/screenshots/<name> on an ordinary test run
 * (the test command leaves the tree clean), docs/images/<name> when
 * VRAMSCOPE_UPDATE_SCREENSHOTS=1 (scripts/update-screenshots.sh).
 */
export function screenshotPath(name: string): string {
  const file =
    process.env.VRAMSCOPE_UPDATE_SCREENSHOTS === '1'
      ? path.join(ROOT, 'docs', 'images', name)
      : path.join(ROOT, 'test-results', 'screenshots', name);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  return file;
}

/**
 * The first cell of a test that measures the next one. torch's first operation sets up its
 * intra-op thread pool and dispatch caches, ~41 KB of CPU memory measured (45 KB in the cell
 * after a bare `import torch`, 4 KB after this), which is real memory but at one decimal of
 * MiB moves a 64 MiB tensor's `+64.0 MiB` close to `+64.1 MiB`. Warm torch up here so the
 * measured cell holds its tensor and nothing else.
 */
export const IMPORT_TORCH = [
  'import torch',
  '',
  "# torch's first operation sets up its thread pool: keep that out of the next cell",
  '_warm = torch.ones(1 << 22)',
  'del _warm'
].join('\n');

const debugWatchers = new WeakMap<Page, Map<object, number>>();

/**
 * Count the debug requests `page` sends to its kernels that have no reply yet, from now on
 * (call it before the notebook's kernel connects). JupyterLab's debugger asks for the
 * kernel's module list after every cell and ipykernel answers on its control thread; with
 * torch imported that builds ~1-2 MiB of CPU memory. The bridge keeps that out of a cell's
 * delta (vramscope.quiet; runall.spec.ts checks it), but an answer given while a cell runs
 * is in that cell's peak: waiting for it keeps the specs' peaks to the cell's own.
 *
 * Requests are counted per websocket, and a closed websocket's are dropped: a notebook
 * closed right after a cell takes its unanswered request with it, and no reply to it will
 * ever come (a flake seen once in four runs of notebooks.spec.ts). So are every websocket's
 * when the page navigates (a reload): Playwright reports no `close` for the old document's
 * sockets (`isClosed()` stays false), and a reload during a Run All left 3-12 requests that
 * no reply would ever answer (soak.spec.ts, 2 of 3 fresh-clone runs).
 */
export function watchDebugRequests(page: Page): void {
  if (debugWatchers.has(page)) {
    return;
  }
  const pending = new Map<object, number>();
  debugWatchers.set(page, pending);
  // a new document (a reload; not JupyterLab's own URL changes, which request nothing)
  // starts a generation; once it commits, older generations' sockets are dropped
  let generation = 0;
  const born = new Map<object, number>();
  page.on('request', request => {
    if (request.isNavigationRequest() && request.frame() === page.mainFrame()) {
      generation += 1;
    }
  });
  page.on('framenavigated', frame => {
    if (frame === page.mainFrame()) {
      for (const [ws, gen] of born) {
        if (gen < generation) {
          pending.delete(ws);
          born.delete(ws);
        }
      }
    }
  });
  page.on('websocket', ws => {
    pending.set(ws, 0);
    born.set(ws, generation);
    const count = (change: number, msgType: RegExp) => (frame: any) => {
      const text =
        typeof frame.payload === 'string'
          ? frame.payload
          : frame.payload.toString('latin1');
      if (msgType.test(text) && pending.has(ws)) {
        // at least 0: a reply to a request sent before the watch began counts nothing
        pending.set(ws, Math.max(0, (pending.get(ws) ?? 0) + change));
      }
    };
    ws.on('framesent', count(1, /"msg_type":\s*"debug_request"/));
    ws.on('framereceived', count(-1, /"msg_type":\s*"debug_reply"/));
    ws.on('close', () => {
      pending.delete(ws);
      born.delete(ws);
    });
  });
}

/**
 * Stop counting for `page` (its listeners are gone: a page kept for the next test,
 * sharedpage.ts): the next `watchDebugRequests` starts again.
 */
export function forgetDebugRequests(page: Page): void {
  debugWatchers.delete(page);
}

/** Wait until the kernel has answered every debug request of `page` (see above). */
export async function debuggerAnswered(page: Page): Promise<void> {
  const pending = debugWatchers.get(page);
  if (pending) {
    const total = () => [...pending.values()].reduce((a, b) => a + b, 0);
    await expect.poll(total, { timeout: 30_000 }).toBe(0);
  }
}

/**
 * The one page error that JupyterLab raises by itself in these tests: its debugger sends a
 * `debug_request` on a notebook's kernel connection after every cell and on activation, and
 * when that connection goes before the reply comes (a notebook closed, a kernel restarted, a
 * page reloaded), JupyterLab cancels the request and leaves the rejection unhandled
 * (@jupyterlab/services, KernelFutureHandler.dispose). It says nothing about vramscope, and
 * it came in 3 runs of 8 of notebooks.spec.ts and once in a fresh-clone soak.spec.ts.
 */
export const JUPYTERLAB_CANCELLED_DEBUG_REQUEST =
  'Canceled future for debug_request message before replies were done';

/** The specs' shared fixture (tests/lab.ts's `test`, notebook7.spec.ts's): see below. */
export type PageErrorFixtures = {
  /**
   * The page errors (uncaught exceptions and unhandled rejections) of every page of the
   * test's browser context, as `String(error)`, in order, but for JupyterLab's cancelled
   * debug request (`JUPYTERLAB_CANCELLED_DEBUG_REQUEST`, that message exactly), which is
   * noted in the test's annotations instead. Specs assert on it: any other page error fails.
   */
  pageErrors: string[];
};

export const pageErrorFixtures = {
  pageErrors: async (
    { context }: { context: BrowserContext },
    use: (errors: string[]) => Promise<void>,
    testInfo: TestInfo
  ): Promise<void> => {
    const errors: string[] = [];
    const watch = (page: Page) =>
      page.on('pageerror', error => {
        if (error.message === JUPYTERLAB_CANCELLED_DEBUG_REQUEST) {
          testInfo.annotations.push({
            type: 'tolerated page error',
            description: `JupyterLab's own: ${error.message}`
          });
        } else {
          errors.push(String(error));
        }
      });
    context.pages().forEach(watch);
    context.on('page', watch);
    await use(errors);
    context.off('page', watch);
  }
};

/**
 * The console messages of every page of `context` from now on (`type: text`), for a spec
 * that asserts what the browser's console showed ("Comm not found for comm id ..." is
 * logged by JupyterLab's kernel connection with console.error, not thrown).
 */
export function consoleMessages(context: BrowserContext): string[] {
  const messages: string[] = [];
  const watch = (page: Page) =>
    page.on('console', msg => messages.push(`${msg.type()}: ${msg.text()}`));
  context.pages().forEach(watch);
  context.on('page', watch);
  return messages;
}

/**
 * The comms the pages of `context` open from now on: comm id -> target name, read from the
 * `comm_open` frames they send on their kernel websockets.
 */
export function commTargets(context: BrowserContext): Map<string, string> {
  const targets = new Map<string, string>();
  const watch = (page: Page) =>
    page.on('websocket', ws =>
      ws.on('framesent', frame => {
        const text =
          typeof frame.payload === 'string'
            ? frame.payload
            : frame.payload.toString('latin1');
        if (/"msg_type":\s*"comm_open"/.test(text)) {
          const id = /"comm_id":\s*"([^"]+)"/.exec(text)?.[1];
          const target = /"target_name":\s*"([^"]+)"/.exec(text)?.[1];
          if (id && target) {
            targets.set(id, target);
          }
        }
      })
    );
  context.pages().forEach(watch);
  context.on('page', watch);
  return targets;
}

/**
 * One JupyterLab page per Playwright worker, kept loaded from one test to the next.
 *
 * Why: loading JupyterLab is ~4.5 s of CPU (Chromium's renderer activating JupyterLab's
 * plugins, the browser, the server), ~30 loads a run, on two cores the browser suite keeps
 * full. Playwright's `reuseContext` keeps the context but sends its page to about:blank
 * between tests, so every test paid a whole load.
 *
 * How a test stays independent of the one before: after it (`reset`), its documents are
 * closed without saving, its dialogs dismissed, the pages it opened closed, the listeners and
 * routes it added removed, and the shell put back as a fresh load leaves it (the file browser
 * open on the left, the right sidebar closed at its default width, the viewport of the
 * config); then the page's state (`fingerprint`: the shell's layout, the sidebars' widths with
 * the vramscope panel shown, every pane's open state, height and every field, the text the
 * panel shows and the data-/aria- attributes its views keep in their DOM, dialogs,
 * notifications, the theme) must equal what it was right after the fresh load. If anything differs, or the test failed, the next test loads JupyterLab afresh
 * (galata's own goto), as every test did before. A test on a page kept gets the kernelspecs
 * read again (a load reads them) and its own folder in the file browser. The kernels are
 * galata's and lab.ts's business (`settleKernels`).
 *
 * `VRAMSCOPE_UI_SHARED_PAGE=0` gives every test a fresh load again; a spec whose test needs
 * one regardless asks with `test.use({ sharePage: false })`: one that bounds what a page
 * holds or counts its errors, reloads it or opens it in other tabs, sets galata's options
 * that act at a load (`mockSettings`, `mockState`, `mockUser`, `appPath`) or exposes
 * functions to the page (`page.exposeFunction`, galata's `runCellByCell`), which stay.
 */
import type {
  Browser,
  BrowserContext,
  Page,
  TestInfo,
  ViewportSize
} from '@playwright/test';

import { filterDebuggerSources, isolateWorkspaces } from './utils';

/** Whether tests share their worker's page unless a spec says otherwise. */
export const SHARE_PAGE_DEFAULT = process.env.VRAMSCOPE_UI_SHARED_PAGE !== '0';

type Listeners = Map<string | symbol, ((...args: any[]) => unknown)[]>;

/** What `fingerprint` reads in the page (see there), as JSON. */
type Fingerprint = string;

export class SharedLab {
  private constructor(
    readonly context: BrowserContext,
    private _page: Page,
    private readonly _viewport: ViewportSize | null
  ) {}

  /** A context and page of `browser` with the project's viewport; JupyterLab not loaded yet. */
  static async open(
    browser: Browser,
    viewport: ViewportSize | null | undefined
  ): Promise<SharedLab> {
    const context = await browser.newContext({ viewport: viewport ?? null });
    await filterDebuggerSources(context);
    await isolateWorkspaces(context);
    return new SharedLab(context, await context.newPage(), viewport ?? null);
  }

  /** The page the tests share (the context's first: Playwright's `page` fixture takes it). */
  get page(): Page {
    return this._page;
  }

  /** Whether JupyterLab is loaded and as fresh: the next test need not load it. */
  get loaded(): boolean {
    return this._fresh !== null;
  }

  /** How many tests had the page as the one before left it, and how many loaded it. */
  readonly counts = { reused: 0, loaded: 0, reloadedAfter: [] as string[] };

  /** Before a test's fixtures use the page: a live page, with nothing of earlier tests on it. */
  async beginTest(): Promise<void> {
    if (this._page.isClosed()) {
      this._page = await this.context.newPage();
      this._fresh = null;
    }
    await this._page.unrouteAll({ behavior: 'ignoreErrors' });
    this._pageListeners = snapshot(this._page);
    this._contextListeners = snapshot(this.context);
  }

  /**
   * Once galata has set the page up for the test: after a fresh load, remember its state
   * (the reference `reset` compares with); on the page as the last test left it, open the
   * test's own folder in the file browser, as galata's load does.
   */
  async ready(page: Page, tmpPath: string): Promise<void> {
    if (page.mainFrame() !== this._page.mainFrame()) {
      // Playwright's `page` fixture took another page (no reuseContext, or video on)
      throw new Error(
        'the shared JupyterLab page needs `reuseContext: true` and video off ' +
          '(playwright.config.ts), or VRAMSCOPE_UI_SHARED_PAGE=0'
      );
    }
    // Until `reset` has put it back and checked it, the page counts as used: a teardown that
    // fails before (a kernel that never settles) leaves the next test a fresh load.
    this._reference = this._fresh;
    this._fresh = null;
    if (this._reference === null) {
      if (!(await page.evaluate(() => !!(window as any).jupyterapp?.shell))) {
        return; // not loaded by galata (autoGoto off): nothing to share
      }
      const { state, sizes, accordion } = await fingerprint(page);
      this._reference = state;
      this._freshSizes = sizes;
      this._freshAccordion = accordion;
      this.counts.loaded += 1;
      return;
    }
    this.counts.reused += 1;
    // the kernelspecs as a load reads them (a test may have installed one since), and the
    // test's folder in the file browser
    await page.evaluate(async path => {
      const app = (window as any).jupyterapp;
      await app.serviceManager.kernelspecs.refreshSpecs();
      await app.commands.execute('filebrowser:go-to-path', {
        path: `/${path}`,
        dontShowBrowser: true
      });
    }, tmpPath);
  }

  /**
   * After the test (its kernels settled), before galata removes its folder: put the page back
   * as a fresh load left it, and check that it is; otherwise the next test loads afresh.
   */
  async reset(page: Page, testInfo: TestInfo): Promise<void> {
    const fresh = this._reference;
    this._reference = null;
    if (
      fresh === null ||
      page.isClosed() ||
      testInfo.status !== testInfo.expectedStatus
    ) {
      return;
    }
    try {
      for (const other of this.context.pages()) {
        if (other !== this._page) {
          await other.close();
        }
      }
      if (this._viewport) {
        await page.setViewportSize(this._viewport);
      }
      // the pointer off the page's content (a plot's hover), no open menu, nothing focused
      await page.mouse.up().catch(() => undefined);
      await page.mouse.move(0, 0);
      await page.keyboard.press('Escape');
      const { panes, fields } = JSON.parse(fresh);
      await page.evaluate(clean, {
        sizes: this._freshSizes,
        accordion: this._freshAccordion,
        panes,
        fields
      });
      const now = (await fingerprint(page)).state;
      if (now === fresh) {
        this._fresh = fresh;
      } else {
        this.counts.reloadedAfter.push(testInfo.title);
        testInfo.annotations.push({
          type: 'shared page',
          description: `not as fresh after this test, the next loads JupyterLab: ${difference(fresh, now)}`
        });
      }
    } catch (error) {
      testInfo.annotations.push({
        type: 'shared page',
        description: `reset failed, the next test loads JupyterLab: ${error}`
      });
    }
  }

  /** After the test's fixtures: the listeners and routes it added go, and its other pages. */
  async endTest(): Promise<void> {
    restore(this._page, this._pageListeners);
    restore(this.context, this._contextListeners);
    await this.context.unrouteAll({ behavior: 'ignoreErrors' });
    await isolateWorkspaces(this.context); // the context's own, kept from test to test
    if (!this._page.isClosed()) {
      await this._page.unrouteAll({ behavior: 'ignoreErrors' });
      if (this._fresh === null) {
        // not kept: its notebooks and kernel connections go now, not at the next load
        // (tests that load their own page may run meanwhile, and shut those kernels down)
        await this._page.goto('about:blank').catch(() => undefined);
      }
    }
    for (const other of this.context.pages()) {
      if (other !== this._page) {
        await other.close();
      }
    }
  }

  async close(): Promise<void> {
    await this.context.close();
  }

  /** The fresh load's state while the page is kept between tests; null: load it again. */
  private _fresh: Fingerprint | null = null;
  /** The fresh load's state for the test that has the page now (see `ready`). */
  private _reference: Fingerprint | null = null;
  private _freshSizes: number[] = [];
  private _freshAccordion: number[] = [];
  private _pageListeners: Listeners = new Map();
  private _contextListeners: Listeners = new Map();
}

/** Every listener of `emitter` now, by event. */
function snapshot(emitter: any): Listeners {
  const listeners: Listeners = new Map();
  for (const name of emitter.eventNames()) {
    listeners.set(name, [...emitter.rawListeners(name)]);
  }
  return listeners;
}

/** Remove the listeners of `emitter` that were not there at `before`. */
function restore(emitter: any, before: Listeners): void {
  for (const name of emitter.eventNames()) {
    const kept = before.get(name) ?? [];
    for (const listener of [...emitter.rawListeners(name)]) {
      if (!kept.includes(listener)) {
        emitter.off(name, listener);
      }
    }
  }
}

/** The first difference between two fingerprints, for the annotation. */
function difference(a: string, b: string): string {
  const x = JSON.parse(a) as Record<string, unknown>;
  const y = JSON.parse(b) as Record<string, unknown>;
  for (const key of Object.keys(x)) {
    const [u, v] = [JSON.stringify(x[key]), JSON.stringify(y[key])];
    if (u !== v) {
      let i = 0;
      while (u[i] === v[i]) {
        i++;
      }
      const at = (w: string) => w.slice(Math.max(0, i - 40), i + 400);
      return `${key}: ...${at(u)} -> ...${at(v)}`;
    }
  }
  return 'none found';
}

/**
 * In the page: close every document (unsaved changes dropped: the test's folder goes next)
 * and dialog, dismiss the notifications, and put the shell as a fresh load has it: the file
 * browser on the left, the vramscope panel at the fresh load's width (`sizes`, the main
 * split's with it shown) with the panes open and closed and the fields filled in as then
 * (`panes`, `fields`: as `fingerprint` reads them; a field set as a user would, with input
 * and change events), the right sidebar closed.
 */
async function clean({
  sizes,
  accordion,
  panes,
  fields
}: {
  sizes: number[];
  accordion: number[];
  panes: string[];
  fields: string[];
}): Promise<void> {
  const app = (window as any).jupyterapp;
  const shell = app.shell;
  const settle = () => new Promise(resolve => setTimeout(resolve, 50));
  const frame = () => new Promise(resolve => requestAnimationFrame(resolve));
  for (let i = 0; i < 5 && document.querySelector('.jp-Dialog'); i++) {
    for (const button of document.querySelectorAll<HTMLButtonElement>(
      '.jp-Dialog .jp-mod-reject'
    )) {
      button.click();
    }
    await settle();
  }
  for (const widget of Array.from(shell.widgets('main')) as any[]) {
    if (widget.hasClass('jp-Launcher')) {
      continue; // as a fresh load opens it
    }
    if (widget.context?.model) {
      widget.context.model.dirty = false;
    }
    widget.dispose();
  }
  // every notification (no id: all), then their toasts' closing animation
  await app.commands
    .execute('apputils:dismiss-notification', {})
    .catch(() => {});
  for (let i = 0; i < 40 && document.querySelector('.Toastify__toast'); i++) {
    await settle();
  }
  await app.commands.execute('filebrowser:go-to-path', {
    path: '/',
    dontShowBrowser: true
  });
  shell.expandLeft();
  shell.activateById('filebrowser');
  shell.activateById('vramscope-panel');
  await frame();
  if (sizes.length && shell._hsplitPanel) {
    shell._hsplitPanel.setRelativeSizes(sizes);
  }
  const panel = document.getElementById('vramscope-panel');
  for (const pane of panes) {
    const [title, expanded] = pane.split('=');
    const toggle = panel?.querySelector<HTMLElement>(
      `.vramscope-Section-toggle[data-section="${title}"]`
    );
    if (toggle && toggle.getAttribute('aria-expanded') !== expanded) {
      toggle.click();
    }
  }
  const now = Array.from(
    panel?.querySelectorAll<HTMLInputElement>('input, select, textarea') ?? []
  );
  fields.forEach((field, i) => {
    const value = field.slice(field.indexOf('=') + 1);
    const element = now[i];
    if (!element) {
      return;
    }
    if (element.type === 'checkbox') {
      if (String(element.checked) === value) {
        return;
      }
      element.checked = value === 'true';
    } else if (element.value !== value) {
      element.value = value;
    } else {
      return;
    }
    element.dispatchEvent(new Event('input', { bubbles: true }));
    element.dispatchEvent(new Event('change', { bubbles: true }));
  });
  // the panes' heights as the fresh load had them (the user drags them, and opening and
  // closing panes moves them)
  await frame();
  if (accordion.length) {
    (Array.from(shell.widgets('right')) as any[])
      .find(w => w.id === 'vramscope-panel')
      ?.accordion?.setRelativeSizes(accordion);
  }
  await frame();
  shell.collapseRight();
  await settle();
}

/**
 * In the page, what a test could find changed from a fresh load: the shell's areas, the
 * sidebars' widths with the vramscope panel shown (its default width, which tests read),
 * every pane's open state and every field of the panel, the documents, dialogs and
 * notifications, the theme. The panel is shown for the measure and the right sidebar closed
 * again, as a fresh load has it.
 */
async function fingerprint(
  page: Page
): Promise<{ state: Fingerprint; sizes: number[]; accordion: number[] }> {
  return page.evaluate(async () => {
    const app = (window as any).jupyterapp;
    const shell = app.shell;
    const frame = () => new Promise(resolve => requestAnimationFrame(resolve));
    const width = (id: string) =>
      Math.round(
        document.getElementById(id)?.getBoundingClientRect().width ?? -1
      );
    const before = {
      leftCollapsed: shell.leftCollapsed,
      rightCollapsed: shell.rightCollapsed,
      leftWidth: width('jp-left-stack'),
      current: document
        .querySelector('.jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current')
        ?.getAttribute('data-id')
    };
    shell.activateById('vramscope-panel');
    // shown, the panel's views draw what they skipped while hidden: the timeline within
    // 100 ms and a frame (src/timeline/schedule.ts)
    await frame();
    await new Promise(resolve => setTimeout(resolve, 250));
    await frame();
    const panel = document.getElementById('vramscope-panel');
    const fields = () =>
      Array.from(
        panel?.querySelectorAll<HTMLInputElement>('input, select, textarea') ??
          []
      );
    const sizes: number[] = shell._hsplitPanel?.relativeSizes() ?? [];
    const accordion: number[] =
      (Array.from(shell.widgets('right')) as any[])
        .find(w => w.id === 'vramscope-panel')
        ?.accordion?.relativeSizes() ?? [];
    const state = {
      ...before,
      main: (Array.from(shell.widgets('main')) as any[]).map(
        w => w.node.className
      ),
      rightWidth: width('jp-right-stack'),
      panes: Array.from(
        panel?.querySelectorAll('.vramscope-Section-toggle') ?? []
      ).map(
        t =>
          `${t.getAttribute('data-section')}=${t.getAttribute('aria-expanded')}`
      ),
      fields: fields().map(
        f =>
          `${f.name || f.className}=${f.type === 'checkbox' ? f.checked : f.value}`
      ),
      text: panel?.innerText ?? '',
      // the panes not shown too (a status line, an error, the estimator's state), but the
      // timeline's, whose process-lanes toggle is filled in once the first update came
      panes_text: Array.from(
        panel?.querySelectorAll<HTMLElement>('.vramscope-Section') ?? []
      )
        .filter(n => n.dataset.section !== 'Timeline')
        .map(n => n.textContent ?? ''),
      menus: document.querySelectorAll('.lm-Menu, .jp-Tooltip').length,
      // the state the panel's views keep in their DOM, shown or not (a pane's mode, its
      // toggles): every element's data-, aria- and hidden attributes
      attributes: Array.from(panel?.querySelectorAll('*') ?? [])
        .map(e =>
          Array.from(e.attributes)
            .filter(a => /^(data-|aria-|hidden$|disabled$)/.test(a.name))
            // where a view's data began and ended, marked for tests once it has had data
            .filter(a => !/^data-(first|last)-x$/.test(a.name))
            // ids made up per page (a page reloaded by the test has others)
            .map(
              a =>
                `${a.name}=${a.value.replace(/[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}/g, 'uuid')}`
            )
            .sort()
            .join(' ')
        )
        .filter(a => a)
        .join('|'),
      sections: Array.from(
        panel?.querySelectorAll<HTMLElement>('.vramscope-Section') ?? []
      ).map(n => Math.round(n.getBoundingClientRect().height)),
      dialogs: document.querySelectorAll('.jp-Dialog').length,
      toasts: document.querySelectorAll('.Toastify__toast').length,
      body: JSON.stringify({ ...document.body.dataset }),
      mode: shell.mode
    };
    shell.collapseRight();
    if (before.leftCollapsed) {
      shell.collapseLeft();
    }
    return { state: JSON.stringify(state), sizes, accordion };
  });
}

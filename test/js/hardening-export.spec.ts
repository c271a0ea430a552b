/**
 * Issue 21: the panel's export never replaces a file without asking. The report's path is
 * looked up first; when a file is there, JupyterLab's dialog asks, and "Keep it" (the
 * default) saves nothing.
 */
import { Contents } from '@jupyterlab/services';

import { exportReport } from '../../src/export/exporter';
import { askOverwrite, fileExists } from '../../src/export/overwrite';
import { IMemorySession } from '../../src/tokens';

const RESULT = {
  format: 'markdown',
  filename: '模型 été.vramscope.md',
  content: '# report',
  mime: 'text/markdown'
};

const session = {
  path: 'runs/模型 été.ipynb',
  request: async () => RESULT
} as unknown as IMemorySession;

/** Files by path, as a server's contents API answers for them (404 when absent). */
function server(files: Record<string, string>, failure?: number) {
  const saved: string[] = [];
  const manager = {
    get: async (path: string) => {
      if (failure) {
        throw { response: { status: failure } };
      }
      if (!(path in files)) {
        throw { response: { status: 404 } };
      }
      return { path, content: null } as unknown as Contents.IModel;
    },
    save: async (path: string, options: Partial<Contents.IModel>) => {
      files[path] = String(options.content);
      saved.push(path);
      return { path } as Contents.IModel;
    }
  } as unknown as Contents.IManager;
  return { manager, files, saved };
}

describe('exportReport asks before it overwrites', () => {
  const PATH = 'runs/模型 été.vramscope.md';

  it('saves a new report without asking, under the non-ASCII name', async () => {
    const { manager, saved } = server({});
    const asked: string[] = [];
    const out = await exportReport(session, 'markdown', manager, async p => {
      asked.push(p);
      return true;
    });
    expect(out?.path).toBe(PATH);
    expect(saved).toEqual([PATH]);
    expect(asked).toEqual([]);
  });

  it('keeps an existing file when the answer is no', async () => {
    const { manager, files, saved } = server({ [PATH]: 'the old report' });
    const asked: string[] = [];
    const out = await exportReport(session, 'markdown', manager, async p => {
      asked.push(p);
      return false;
    });
    expect(out).toBeNull();
    expect(asked).toEqual([PATH]);
    expect(saved).toEqual([]);
    expect(files[PATH]).toBe('the old report');
  });

  it('replaces it on an explicit yes', async () => {
    const { manager, files } = server({ [PATH]: 'the old report' });
    await exportReport(session, 'markdown', manager, async () => true);
    expect(files[PATH]).toBe('# report');
  });

  it('saves nothing when the lookup fails for another reason', async () => {
    const { manager, saved } = server({}, 500);
    await expect(exportReport(session, 'markdown', manager)).rejects.toEqual({
      response: { status: 500 }
    });
    await expect(fileExists(manager, PATH)).rejects.toBeTruthy();
    expect(saved).toEqual([]);
  });
});

describe('askOverwrite: JupyterLab dialog', () => {
  beforeAll(() => {
    // jsdom has no requestIdleCallback; JupyterLab's React widgets render through it
    const g = globalThis as { requestIdleCallback?: unknown };
    g.requestIdleCallback ??= (cb: () => void) => setTimeout(cb, 0);
  });

  async function answer(label: string): Promise<boolean> {
    const asked = askOverwrite('runs/r.vramscope.html');
    let button: HTMLButtonElement | undefined;
    for (let i = 0; i < 50 && !button; i++) {
      await new Promise(resolve => setTimeout(resolve, 10));
      button = [...document.querySelectorAll('.jp-Dialog button')].find(
        b => b.textContent === label
      ) as HTMLButtonElement | undefined;
    }
    expect(document.querySelector('.jp-Dialog')!.textContent).toContain(
      'runs/r.vramscope.html already exists'
    );
    button!.click();
    return asked;
  }

  it('is no on "Keep it" and yes only on "Replace"', async () => {
    await expect(answer('Keep it')).resolves.toBe(false);
    await expect(answer('Replace')).resolves.toBe(true);
  });
});

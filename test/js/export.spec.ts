/**
 * The panel's export (protocol 1.1 `export_report`): the result is validated before anything
 * is saved, and the file lands next to the notebook under the kernel's plain file name.
 */
import { Contents } from '@jupyterlab/services';
import { CommandRegistry } from '@lumino/commands';

import { FakeSession } from '../../bench/timeline_update.fake';
import { exportReport, reportPath } from '../../src/export/exporter';
import { ExportView } from '../../src/export/view';
import { IExportResult } from '../../src/protocol';
import { IMemorySession } from '../../src/tokens';
import { validateExportResult } from '../../src/validate';

function result(extra: Partial<IExportResult> = {}): IExportResult {
  return {
    format: 'html',
    filename: 'train.vramscope.html',
    content: '<!DOCTYPE html><title>r</title>',
    mime: 'text/html',
    ...extra
  };
}

/** A session whose kernel answers `export_report` with `answer`; records the params. */
function session(answer: unknown, path = 'work/runs/train.ipynb') {
  const asked: unknown[] = [];
  const s = {
    path,
    request: async (method: string, params: unknown) => {
      asked.push({ method, params });
      return answer;
    }
  } as unknown as IMemorySession;
  return { s, asked };
}

/** A contents manager keeping what is saved (the UI test saves through the real one). */
function contents() {
  const saved: { path: string; options: Partial<Contents.IModel> }[] = [];
  const manager = {
    get: async () => {
      throw { response: { status: 404 } }; // nothing there yet
    },
    save: async (path: string, options: Partial<Contents.IModel>) => {
      saved.push({ path, options });
      return { path } as Contents.IModel;
    }
  } as unknown as Contents.IManager;
  return { manager, saved };
}

describe('validateExportResult', () => {
  it('accepts a well-formed result of the format asked for', () => {
    expect(validateExportResult(result(), 'html')).toEqual(result());
  });

  it.each([
    [{ format: 'json' }, 'result.format'],
    [{ content: 3 }, 'result.content: expected a string'],
    [{ mime: null }, 'result.mime'],
    [
      { filename: '../../etc/x.html' },
      'result.filename: expected a plain file name'
    ],
    [{ filename: 'a\\b.html' }, 'result.filename'],
    [{ filename: '.bashrc' }, 'result.filename'],
    [{ filename: '' }, 'result.filename']
  ])('rejects %j', (extra, message) => {
    const error = validateExportResult(result(extra as any), 'html');
    expect(typeof error).toBe('string');
    expect(error).toContain(message);
  });

  it('rejects a non-object', () => {
    expect(validateExportResult('nope', 'csv')).toContain('expected an object');
  });
});

describe('exportReport', () => {
  it('saves the kernel file next to the notebook', async () => {
    const { s, asked } = session(result());
    const { manager, saved } = contents();
    const out = (await exportReport(s, 'html', manager))!;
    expect(asked).toEqual([
      {
        method: 'export_report',
        params: { format: 'html', notebook: 'work/runs/train.ipynb' }
      }
    ]);
    expect(out.path).toBe('work/runs/train.vramscope.html');
    expect(saved).toEqual([
      {
        path: 'work/runs/train.vramscope.html',
        options: { type: 'file', format: 'text', content: result().content }
      }
    ]);
  });

  it('saves nothing when the result is malformed', async () => {
    const { s } = session(result({ filename: '../escape.html' }));
    const { manager, saved } = contents();
    await expect(exportReport(s, 'html', manager)).rejects.toThrow(
      "the kernel's export is malformed (result.filename"
    );
    expect(saved).toEqual([]);
  });

  it('puts a notebook at the root next to itself', () => {
    expect(reportPath('train.ipynb', 'train.vramscope.md')).toBe(
      'train.vramscope.md'
    );
  });
});

describe('ExportView across notebooks', () => {
  it("says the last export's outcome for its notebook only", () => {
    const commands = new CommandRegistry();
    const view = new ExportView({
      commands,
      command: 'vramscope:export-report'
    });
    const status = () =>
      view.node.querySelector('.vramscope-Export-status')!.textContent;
    const first = new FakeSession();
    view.setSession(first);
    view.setStatus('Saved a/report.vramscope.html');
    view.setSession(first); // the same notebook again: kept
    expect(status()).toBe('Saved a/report.vramscope.html');
    view.setSession(new FakeSession()); // another notebook
    expect(status()).toBe('');
    view.dispose();
  });
});

/**
 * MemoryTracker: one session per notebook (each with its own kernel bridge and history), the
 * active session follows the current notebook, a closed notebook's session is disposed, and a
 * click on a cell reveals it in its own notebook.
 */
import { Signal } from '@lumino/signaling';

import { MemoryTracker } from '../../src/model/tracker';
import { FakeContext, FakeKernel, flush } from './fakekernel';
import { hello, record } from './fixtures';

class FakeNotebook {
  constructor(ids: string[]) {
    this.widgets = ids.map(id => ({ model: { id } }));
  }
  widgets: { model: { id: string } }[];
  activeCellIndex = -1;
  scrolledTo: number[] = [];
  deselectAll(): void {
    /* nothing selected in the fake */
  }
  scrollToItem(index: number): Promise<void> {
    this.scrolledTo.push(index);
    return Promise.resolve();
  }
}

class FakePanel {
  constructor(path: string, kernel: FakeKernel, cellIds: string[]) {
    this.kernel = kernel;
    this.context = { path, pathChanged: new Signal<any, string>(this) };
    this.sessionContext = new FakeContext(kernel);
    this.content = new FakeNotebook(cellIds);
  }
  kernel: FakeKernel;
  context: { path: string; pathChanged: Signal<any, string> };
  sessionContext: FakeContext;
  content: FakeNotebook;
  isDisposed = false;
  disposed = new Signal<this, void>(this);
  dispose(): void {
    this.isDisposed = true;
    this.disposed.emit();
  }
}

class FakeNotebookTracker {
  widgetAdded = new Signal<this, FakePanel>(this);
  currentChanged = new Signal<this, FakePanel | null>(this);
  currentWidget: FakePanel | null = null;
  panels: FakePanel[] = [];
  forEach(fn: (p: FakePanel) => void): void {
    this.panels.forEach(fn);
  }
  add(panel: FakePanel): void {
    this.panels.push(panel);
    this.widgetAdded.emit(panel);
  }
  activate(panel: FakePanel | null): void {
    this.currentWidget = panel;
    this.currentChanged.emit(panel);
  }
}

/** Bootstrap answered, comms open, hello received, then the given cell records. */
async function connect(kernel: FakeKernel, cells: string[]): Promise<void> {
  await flush();
  const [stream] = kernel.open('stream');
  expect(stream).toBeDefined();
  stream.receive(hello({ session_id: kernel.id }));
  cells.forEach((id, i) =>
    stream.receive({
      type: 'cell',
      record: record({ cell_id: id, execution_count: i + 1 }),
      devices: []
    })
  );
}

describe('MemoryTracker', () => {
  it('keeps a session per notebook and follows the current one', async () => {
    const notebooks = new FakeNotebookTracker();
    const activated: FakePanel[] = [];
    const tracker = new MemoryTracker({
      notebookTracker: notebooks as any,
      activate: p => activated.push(p as any)
    });
    const a = new FakePanel('a.ipynb', new FakeKernel('ka'), ['a1', 'a2']);
    const b = new FakePanel('b.ipynb', new FakeKernel('kb'), ['b1']);
    const changes: (string | null)[] = [];
    tracker.activeChanged.connect((_, s) => changes.push(s?.path ?? null));
    notebooks.add(a);
    notebooks.add(b);
    expect(tracker.activeSession).toBeNull();

    await connect(a.kernel, ['a1', 'a2']);
    await connect(b.kernel, ['b1']);
    const sa = tracker.sessionFor('a.ipynb')!;
    const sb = tracker.sessionFor('b.ipynb')!;
    expect(sa).not.toBe(sb);
    // each notebook has its own history, from its own kernel
    expect(sa.cells.map(c => c.record.cell_id)).toEqual(['a1', 'a2']);
    expect(sb.cells.map(c => c.record.cell_id)).toEqual(['b1']);
    expect(sa.status).toBe('connected');

    notebooks.activate(a);
    expect(tracker.activeSession).toBe(sa);
    notebooks.activate(b);
    expect(tracker.activeSession).toBe(sb);
    notebooks.activate(a);
    expect(tracker.activeSession).toBe(sa);
    expect(changes).toEqual(['a.ipynb', 'b.ipynb', 'a.ipynb']);

    // a click on a cell of notebook b reveals it in b, even while a is current
    sb.revealCell('b1');
    expect(activated).toEqual([b]);
    expect(b.content.activeCellIndex).toBe(0);
    expect(b.content.scrolledTo).toEqual([0]);
    expect(a.content.scrolledTo).toEqual([]);

    // renaming follows the notebook; closing disposes its session and clears the panel
    a.context.pathChanged.emit('renamed.ipynb');
    expect(sa.path).toBe('renamed.ipynb');
    a.dispose();
    expect(tracker.sessionFor('renamed.ipynb')).toBeNull();
    expect(tracker.activeSession).toBeNull();
    expect(tracker.sessionFor('b.ipynb')).toBe(sb);
    tracker.dispose();
    expect(tracker.entries()).toHaveLength(0);
  });

  it('adopts notebooks that were open before it started', async () => {
    const notebooks = new FakeNotebookTracker();
    const a = new FakePanel('a.ipynb', new FakeKernel('ka'), []);
    notebooks.panels.push(a);
    notebooks.currentWidget = a;
    const tracker = new MemoryTracker({ notebookTracker: notebooks as any });
    expect(tracker.activeSession?.path).toBe('a.ipynb');
    tracker.dispose();
  });
});

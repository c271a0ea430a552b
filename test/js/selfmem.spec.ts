import { MessageLoop } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { MemorySession } from '../../src/model/session';
import { StatusView } from '../../src/panel/status';
import { selfMemoryOf } from '../../src/selfmem';
import { validateKernelMessage } from '../../src/validate';
import { FakeTracker } from './faketracker';
import { hello, MIB, record } from './fixtures';

function setup() {
  const tracker = new FakeTracker();
  const session = new MemorySession({ path: 'a.ipynb' });
  tracker.activeSession = session;
  const view = new StatusView(tracker);
  view.setSession(session);
  Widget.attach(view, document.body);
  MessageLoop.flush();
  return { session, view };
}

const line = () =>
  document.querySelector('.vramscope-Status-self') as HTMLElement | null;

afterEach(() => {
  document.body.innerHTML = '';
});

describe('vramscope itself (self_bytes, since 1.1)', () => {
  it('validates self_bytes on hello and cell as an optional byte count', () => {
    expect(typeof validateKernelMessage(hello({ self_bytes: 3 * MIB }))).toBe(
      'object'
    );
    expect(typeof validateKernelMessage(hello())).toBe('object');
    for (const bad of [-1, 1.5, '3', null, Number.NaN]) {
      expect(validateKernelMessage(hello({ self_bytes: bad as any }))).toMatch(
        /self_bytes/
      );
      const cell = {
        type: 'cell',
        record: record(),
        devices: [],
        self_bytes: bad
      };
      expect(validateKernelMessage(cell)).toMatch(/self_bytes/);
    }
  });

  it('shows one quiet line from hello, updated by cell messages', () => {
    const { session, view } = setup();
    expect(line()).toBeNull();
    session.handleMessage(hello({ self_bytes: Math.round(2.5 * MIB) }));
    MessageLoop.flush();
    expect(line()!.textContent).toBe('vramscope itself: 2.5 MiB');
    expect(line()!.classList).toContain('vramscope-Status-kernel');

    session.handleMessage({
      type: 'cell',
      record: record(),
      devices: [],
      self_bytes: 24 * MIB
    });
    MessageLoop.flush();
    expect(line()!.textContent).toBe('vramscope itself: 24.0 MiB');
    // a cell without the field keeps the last figure
    session.handleMessage({ type: 'cell', record: record(), devices: [] });
    MessageLoop.flush();
    expect(line()!.textContent).toBe('vramscope itself: 24.0 MiB');
    view.dispose();
  });

  it('re-renders only when the shown text changes', () => {
    const { session } = setup();
    const model = selfMemoryOf(session);
    let changes = 0;
    model.changed.connect(() => changes++);
    session.handleMessage(hello({ self_bytes: 10 * MIB }));
    session.handleMessage({
      type: 'cell',
      record: record(),
      devices: [],
      self_bytes: 10 * MIB + 10
    });
    expect(changes).toBe(1);
    expect(model.bytes).toBe(10 * MIB + 10);
  });

  it('shows nothing for a 1.0 bridge (no self_bytes)', () => {
    const { session } = setup();
    session.handleMessage(hello());
    MessageLoop.flush();
    expect(line()).toBeNull();
    expect(selfMemoryOf(session).text).toBeNull();
  });
});

/**
 * A notebook tracker the test drives by hand, and the real panel on top of it (shared by the
 * panel, self-memory and hostile-string tests).
 */
import { MessageLoop } from '@lumino/messaging';
import { Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import { MemorySession } from '../../src/model/session';
import { DEFAULT_SETTINGS } from '../../src/model/settings';
import { MemoryPanel } from '../../src/panel/panel';
import { PaneState } from '../../src/panel/panestate';
import {
  IFrontendSettings,
  IMemorySession,
  IMemorySessionAdded,
  IMemoryTracker
} from '../../src/tokens';

/** An `IMemoryTracker` whose active session is set by the test (`setActive`). */
export class FakeTracker implements IMemoryTracker {
  activeSession: IMemorySession | null = null;
  activeChanged: Signal<IMemoryTracker, IMemorySession | null> = new Signal(
    this
  );
  sessionAdded: Signal<IMemoryTracker, IMemorySessionAdded> = new Signal(this);
  settings: IFrontendSettings = { ...DEFAULT_SETTINGS };
  settingsChanged: Signal<IMemoryTracker, IFrontendSettings> = new Signal(this);
  sessionFor(): IMemorySession | null {
    return this.activeSession;
  }
  sessionForWidget(): IMemorySession | null {
    return this.activeSession;
  }
  /** Make `session` the active one and say so, as switching notebooks does. */
  setActive(session: IMemorySession | null): void {
    this.activeSession = session;
    this.activeChanged.emit(session);
  }
}

/**
 * The real panel attached to the document, following a new session of `path` (the cells it
 * asks to reveal are collected in `revealed`).
 */
export function panelWithSession(
  path = 'a.ipynb',
  panes?: PaneState
): {
  tracker: FakeTracker;
  panel: MemoryPanel;
  session: MemorySession;
  revealed: string[];
} {
  const tracker = new FakeTracker();
  const panel = new MemoryPanel({ tracker, panes });
  Widget.attach(panel, document.body);
  const revealed: string[] = [];
  const session = new MemorySession({
    path,
    revealCell: id => revealed.push(id)
  });
  tracker.setActive(session);
  MessageLoop.flush();
  return { tracker, panel, session, revealed };
}

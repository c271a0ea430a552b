/**
 * `MemoryTracker`: one `MemorySession` (+ its `KernelBridge`) per open notebook, following
 * `INotebookTracker`; the active session is the current notebook's.
 */
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { ISignal, Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import {
  IFrontendSettings,
  IMemorySession,
  IMemorySessionAdded,
  IMemoryTracker
} from '../tokens';
import { KernelBridge } from './bridge';
import { MemorySession } from './session';
import {
  DEFAULT_SETTINGS,
  kernelSettings,
  kernelSettingsDiffer
} from './settings';

export class MemoryTracker implements IMemoryTracker {
  constructor(options: MemoryTracker.IOptions) {
    this._notebooks = options.notebookTracker;
    this._activate = options.activate ?? null;
    this._notebooks.widgetAdded.connect(this._onWidgetAdded, this);
    this._notebooks.currentChanged.connect(this._onCurrentChanged, this);
    this._notebooks.forEach(panel => this._add(panel));
    this._onCurrentChanged();
  }

  get activeSession(): IMemorySession | null {
    return this._active;
  }
  get activeChanged(): ISignal<this, IMemorySession | null> {
    return this._activeChanged;
  }
  get sessionAdded(): ISignal<this, IMemorySessionAdded> {
    return this._sessionAdded;
  }
  get settings(): IFrontendSettings {
    return this._settings;
  }
  get settingsChanged(): ISignal<this, IFrontendSettings> {
    return this._settingsChanged;
  }
  get isDisposed(): boolean {
    return this._isDisposed;
  }

  sessionFor(path: string): IMemorySession | null {
    for (const entry of this._entries.values()) {
      if (entry.session.path === path) {
        return entry.session;
      }
    }
    return null;
  }

  sessionForWidget(widget: Widget): IMemorySession | null {
    return this._entries.get(widget as NotebookPanel)?.session ?? null;
  }

  /** All sessions with their notebook widgets. */
  entries(): ReadonlyArray<{ session: MemorySession; widget: NotebookPanel }> {
    return Array.from(this._entries, ([widget, e]) => ({
      session: e.session,
      widget
    }));
  }

  /** Apply new front-end settings; kernel-side ones are pushed to every connected kernel. */
  setSettings(settings: IFrontendSettings): void {
    const old = this._settings;
    this._settings = settings;
    if (kernelSettingsDiffer(old, settings)) {
      for (const e of this._entries.values()) {
        void e.bridge.pushSettings();
      }
    }
    this._settingsChanged.emit(settings);
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this._notebooks.widgetAdded.disconnect(this._onWidgetAdded, this);
    this._notebooks.currentChanged.disconnect(this._onCurrentChanged, this);
    for (const panel of Array.from(this._entries.keys())) {
      this._remove(panel);
    }
    Signal.clearData(this);
  }

  private _onWidgetAdded(_: INotebookTracker, panel: NotebookPanel): void {
    this._add(panel);
  }

  private _add(panel: NotebookPanel): void {
    if (this._entries.has(panel) || panel.isDisposed) {
      return;
    }
    const session = new MemorySession({
      path: panel.context.path,
      revealCell: cellId => this._reveal(panel, cellId)
    });
    const bridge = new KernelBridge({
      sessionContext: panel.sessionContext,
      session,
      getSettings: () => kernelSettings(this._settings)
    });
    const onPath = (_: unknown, path: string) => {
      session.path = path;
    };
    const onDisposed = () => this._remove(panel);
    panel.context.pathChanged.connect(onPath);
    panel.disposed.connect(onDisposed);
    this._entries.set(panel, { session, bridge, onPath, onDisposed });
    this._sessionAdded.emit({ session, widget: panel });
    // The notebook may have become current before the tracker announced it.
    this._onCurrentChanged();
  }

  private _remove(panel: NotebookPanel): void {
    const entry = this._entries.get(panel);
    if (!entry) {
      return;
    }
    this._entries.delete(panel);
    panel.context.pathChanged.disconnect(entry.onPath);
    panel.disposed.disconnect(entry.onDisposed);
    entry.bridge.dispose();
    if (this._active === entry.session) {
      this._setActive(null);
    }
    entry.session.dispose();
    this._onCurrentChanged();
  }

  private _onCurrentChanged(): void {
    const current = this._notebooks.currentWidget;
    const session = current
      ? (this._entries.get(current)?.session ?? null)
      : null;
    this._setActive(session);
  }

  private _setActive(session: MemorySession | null): void {
    if (session !== this._active) {
      this._active = session;
      this._activeChanged.emit(session);
    }
  }

  private _reveal(panel: NotebookPanel, cellId: string): void {
    const notebook = panel.content;
    const index = notebook.widgets.findIndex(cell => cell.model.id === cellId);
    if (index < 0) {
      return;
    }
    this._activate?.(panel);
    notebook.activeCellIndex = index;
    notebook.deselectAll();
    void notebook.scrollToItem(index, 'smart');
  }

  private _notebooks: INotebookTracker;
  private _activate: ((panel: NotebookPanel) => void) | null;
  private _entries = new Map<NotebookPanel, Private.IEntry>();
  private _active: MemorySession | null = null;
  private _settings: IFrontendSettings = { ...DEFAULT_SETTINGS };
  private _isDisposed = false;
  private _activeChanged = new Signal<this, IMemorySession | null>(this);
  private _sessionAdded = new Signal<this, IMemorySessionAdded>(this);
  private _settingsChanged = new Signal<this, IFrontendSettings>(this);
}

export namespace MemoryTracker {
  export interface IOptions {
    notebookTracker: INotebookTracker;
    /** Bring a notebook to the front (e.g. `app.shell.activateById(panel.id)`). */
    activate?: (panel: NotebookPanel) => void;
  }
}

namespace Private {
  export interface IEntry {
    session: MemorySession;
    bridge: KernelBridge;
    onPath: (_: unknown, path: string) => void;
    onDisposed: () => void;
  }
}

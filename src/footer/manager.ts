/**
 * `CellFooterManager`: for one notebook, writes each `cell` record into the matching cell's
 * metadata (`vramscope`) and keeps a `CellFooter` under every code cell rendered from that
 * metadata. Follows cells being added, moved and deleted, and settings changes.
 */
import { Cell, ICellModel } from '@jupyterlab/cells';
import { NotebookPanel } from '@jupyterlab/notebook';
import { IDisposable } from '@lumino/disposable';
import { Signal } from '@lumino/signaling';
import { PanelLayout } from '@lumino/widgets';

import {
  ICellEntry,
  IFrontendSettings,
  IMemorySession,
  IMemoryTracker
} from '../tokens';
import { METADATA_KEY, metadataFromRecord, readMetadata } from './metadata';
import { footerContent } from './text';
import { CellFooter } from './widget';

export class CellFooterManager implements IDisposable {
  constructor(options: CellFooterManager.IOptions) {
    this._panel = options.panel;
    this._session = options.session;
    this._tracker = options.tracker;
    this._session.cellRecorded.connect(this._onCellRecorded, this);
    this._session.changed.connect(this._schedule, this);
    this._tracker.settingsChanged.connect(this._onSettings, this);
    this._panel.content.modelChanged.connect(this._onModelChanged, this);
    this._onModelChanged();
    void this._panel.context.ready.then(() => this._schedule());
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  /** Write a record into the metadata of the cell it ran in (if that cell is here). */
  writeRecord(entry: ICellEntry): boolean {
    const id = entry.record.cell_id;
    const cells = this._panel.content.model?.cells;
    if (!id || !cells) {
      return false;
    }
    for (const model of cells) {
      if (model.id === id && model.type === 'code') {
        model.setMetadata(METADATA_KEY, metadataFromRecord(entry.record));
        return true;
      }
    }
    return false;
  }

  /**
   * Bring back the kernel's records (the session's history, e.g. from `hello` after a page
   * reload) into the cells they ran in, matched by cell id: the newest record of each cell
   * that is newer than what its metadata holds. An unsaved notebook reloaded from disk gets
   * its footers back.
   */
  restoreRecords(): number {
    const cells = this._panel.content.model?.cells;
    if (!cells || !this._session.cells.length) {
      return 0;
    }
    const newest = new Map<string, ICellEntry>();
    for (const entry of this._session.cells) {
      const id = entry.record.cell_id;
      const seen = id ? newest.get(id) : undefined;
      if (id && (!seen || isNewer(entry, seen))) {
        newest.set(id, entry);
      }
    }
    let restored = 0;
    for (const model of cells) {
      const entry = model.type === 'code' ? newest.get(model.id) : undefined;
      if (!entry) {
        continue;
      }
      const meta = readMetadata(model.getMetadata(METADATA_KEY));
      if (!meta || entry.record.start_time > meta.start_time) {
        model.setMetadata(METADATA_KEY, metadataFromRecord(entry.record));
        restored++;
      }
    }
    return restored;
  }

  /** Make sure every code cell has an up-to-date footer (and only code cells). */
  sync(): void {
    if (this._isDisposed) {
      return;
    }
    this.restoreRecords();
    const seen = new Set<ICellModel>();
    for (const cell of this._panel.content.widgets) {
      seen.add(cell.model);
      if (!this._models.has(cell.model)) {
        cell.model.metadataChanged.connect(this._onMetadataChanged, this);
        this._models.add(cell.model);
      }
      this._renderCell(cell);
    }
    for (const model of Array.from(this._models)) {
      if (!seen.has(model)) {
        model.metadataChanged.disconnect(this._onMetadataChanged, this);
        this._models.delete(model);
      }
    }
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this._session.cellRecorded.disconnect(this._onCellRecorded, this);
    this._session.changed.disconnect(this._schedule, this);
    this._tracker.settingsChanged.disconnect(this._onSettings, this);
    this._panel.content.modelChanged.disconnect(this._onModelChanged, this);
    this._model?.cells.changed.disconnect(this._schedule, this);
    for (const model of this._models) {
      model.metadataChanged.disconnect(this._onMetadataChanged, this);
    }
    this._models.clear();
    for (const cell of this._panel.content.widgets) {
      this._footers.get(cell)?.dispose();
    }
    Signal.clearData(this);
  }

  private _renderCell(cell: Cell): void {
    let footer: CellFooter | null | undefined = this._footers.get(cell);
    if (cell.model.type !== 'code') {
      if (footer) {
        footer.dispose();
        this._footers.delete(cell);
      }
      return;
    }
    if (!footer || footer.isDisposed) {
      footer = this._attach(cell);
      if (!footer) {
        // Not rendered yet (windowed notebook): try again once it is.
        void cell.ready.then(() => {
          if (!this._isDisposed && !cell.isDisposed) {
            this._renderCell(cell);
          }
        });
        return;
      }
    }
    const settings = this._tracker.settings;
    const meta = settings.showFooter
      ? readMetadata(cell.model.getMetadata(METADATA_KEY))
      : null;
    footer.render(meta ? footerContent(meta, settings) : null);
  }

  /** Insert a footer right after the cell's input wrapper; null if the cell has none yet. */
  private _attach(cell: Cell): CellFooter | null {
    const layout = cell.layout;
    if (!(layout instanceof PanelLayout)) {
      return null;
    }
    const index = layout.widgets.findIndex(w =>
      w.hasClass('jp-Cell-inputWrapper')
    );
    if (index < 0) {
      return null;
    }
    const footer = new CellFooter();
    layout.insertWidget(index + 1, footer);
    this._footers.set(cell, footer);
    return footer;
  }

  private _onCellRecorded(_: IMemorySession, entry: ICellEntry): void {
    this.writeRecord(entry);
  }

  private _onMetadataChanged(model: ICellModel, change: { key: string }): void {
    if (change.key !== METADATA_KEY) {
      return;
    }
    const cell = this._panel.content.widgets.find(c => c.model === model);
    if (cell) {
      this._renderCell(cell);
    }
  }

  private _onSettings(_: IMemoryTracker, __: IFrontendSettings): void {
    this.sync();
  }

  private _onModelChanged(): void {
    this._model?.cells.changed.disconnect(this._schedule, this);
    this._model = this._panel.content.model;
    this._model?.cells.changed.connect(this._schedule, this);
    this._schedule();
  }

  /** Sync after the notebook has created/moved its cell widgets for this change. */
  private _schedule(): void {
    if (this._scheduled || this._isDisposed) {
      return;
    }
    this._scheduled = true;
    void Promise.resolve().then(() => {
      this._scheduled = false;
      this.sync();
    });
  }

  private _panel: NotebookPanel;
  private _session: IMemorySession;
  private _tracker: IMemoryTracker;
  private _model: NotebookPanel['content']['model'] = null;
  private _models = new Set<ICellModel>();
  private _footers = new WeakMap<Cell, CellFooter>();
  private _scheduled = false;
  private _isDisposed = false;
}

export namespace CellFooterManager {
  export interface IOptions {
    panel: NotebookPanel;
    session: IMemorySession;
    tracker: IMemoryTracker;
  }
}

/** Whether `a` ran after `b` (a later kernel epoch, or later in the same one). */
function isNewer(a: ICellEntry, b: ICellEntry): boolean {
  return (
    a.epoch > b.epoch ||
    (a.epoch === b.epoch && a.record.start_time > b.record.start_time)
  );
}

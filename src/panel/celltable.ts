import { deleteIcon, ToolbarButton } from '@jupyterlab/ui-components';
import { ISignal } from '@lumino/signaling';

import { formatDelta, formatDuration } from '../format';
import { peakLabel } from '../footer/text';
import {
  devicesBySignificance,
  sizeMagnitude,
  statusLabel
} from '../footer/text';
import { IDeviceDelta } from '../protocol';
import {
  ICellEntry,
  IMemorySession,
  IMemoryTracker,
  ISectionToolbarItem
} from '../tokens';
import { h, SessionView } from './base';

/** Sortable columns. */
export type SortKey = 'order' | 'delta' | 'peak' | 'duration' | 'status';

/** A row of the table: a cell, or a kernel restart marker. */
export type TableItem =
  { kind: 'cell'; entry: ICellEntry } | { kind: 'restart'; epoch: number };

/** `''` shows, for each row, the device with the largest |delta|. */
export type DeviceChoice = string;

/** The device a row shows: the chosen one, or the most significant one. */
export function rowDevice(
  entry: ICellEntry,
  choice: DeviceChoice
): { id: string; delta: IDeviceDelta } | null {
  const devices = entry.record.devices;
  const id = choice ? choice : devicesBySignificance(devices)[0];
  return id && devices[id] ? { id, delta: devices[id] } : null;
}

/**
 * The rows in display order. In execution order a restart marker separates epochs (and one
 * follows the last cell when the kernel restarted since); other sorts list cells only.
 */
export function tableItems(
  cells: ReadonlyArray<ICellEntry>,
  currentEpoch: number,
  key: SortKey,
  ascending: boolean,
  choice: DeviceChoice
): TableItem[] {
  const sorted = cells.slice();
  const cmp = Private.comparator(key, choice);
  sorted.sort((a, b) => cmp(a, b) || Private.orderCmp(a, b));
  if (!ascending) {
    sorted.reverse();
  }
  if (key !== 'order') {
    return sorted.map(entry => ({ kind: 'cell', entry }));
  }
  const items: TableItem[] = [];
  const asc = ascending ? sorted : sorted.slice().reverse();
  for (let i = 0; i < asc.length; i++) {
    if (i > 0 && asc[i].epoch !== asc[i - 1].epoch) {
      items.push({ kind: 'restart', epoch: asc[i].epoch });
    }
    items.push({ kind: 'cell', entry: asc[i] });
  }
  if (asc.length && currentEpoch > asc[asc.length - 1].epoch) {
    items.push({ kind: 'restart', epoch: currentEpoch });
  }
  return ascending ? items : items.reverse();
}

/**
 * The per-cell history table. Rows are `.vramscope-CellTable-row` with `data-cell-id`,
 * `data-execution-count` and `data-epoch`; clicking one reveals the cell. Restart markers are
 * `.vramscope-CellTable-restart`. UI state: sort column/direction and the device choice.
 */
export class CellTableView extends SessionView {
  constructor(tracker: IMemoryTracker) {
    super(tracker);
    this.addClass('vramscope-CellTable');
    this._clear = new ToolbarButton({
      icon: deleteIcon,
      label: 'Clear',
      className: 'vramscope-CellTable-clear',
      tooltip: 'Clear the memory history of this notebook',
      enabled: false,
      onClick: () => void this.session?.clearHistory?.()
    });
    this.update();
  }

  /** The buttons of the pane's header: Clear (the notebook's history). */
  get toolbarItems(): ISectionToolbarItem[] {
    return [{ name: 'clear', widget: this._clear }];
  }

  get sortKey(): SortKey {
    return this._sortKey;
  }
  get ascending(): boolean {
    return this._ascending;
  }
  get deviceChoice(): DeviceChoice {
    return this._device;
  }

  /** Sort by `key`; the same key again flips the direction. */
  sortBy(key: SortKey, ascending?: boolean): void {
    if (ascending === undefined) {
      ascending = key === this._sortKey ? !this._ascending : key === 'order';
    }
    this._sortKey = key;
    this._ascending = ascending;
    this.update();
  }

  /** Show this device in every row (`''`: the most significant device of each row). */
  setDeviceChoice(choice: DeviceChoice): void {
    this._device = choice;
    this.update();
  }

  protected signalsOf(
    session: IMemorySession
  ): ISignal<IMemorySession, unknown>[] {
    return [session.cellRecorded, session.changed, session.devicesChanged];
  }

  protected render(session: IMemorySession | null): void {
    this.node.textContent = '';
    const cells = session?.cells ?? [];
    this._clear.enabled = !!session?.clearHistory && cells.length > 0;
    this.node.appendChild(this._toolbar(session));
    if (!cells.length) {
      this.node.appendChild(
        h(
          'p',
          'vramscope-CellTable-empty',
          session
            ? 'Run a cell to see its memory change and peak here.'
            : 'Open a notebook to see its cells.'
        )
      );
      return;
    }
    const table = h('table', 'vramscope-CellTable-table');
    table.appendChild(this._head());
    const body = h('tbody');
    const items = tableItems(
      cells,
      session!.epoch,
      this._sortKey,
      this._ascending,
      this._device
    );
    for (const item of items.slice(0, Private.MAX_ROWS)) {
      body.appendChild(
        item.kind === 'restart'
          ? Private.restartRow()
          : this._row(session!, item.entry)
      );
    }
    table.appendChild(body);
    this.node.appendChild(table);
  }

  private _toolbar(session: IMemorySession | null): HTMLElement {
    const bar = h('div', 'vramscope-CellTable-toolbar');
    const label = h('label', 'vramscope-CellTable-deviceLabel', 'Device ');
    const select = h('select', 'vramscope-CellTable-device');
    const ids = new Set<string>(session?.devices.map(d => d.id) ?? []);
    for (const c of session?.cells ?? []) {
      Object.keys(c.record.devices).forEach(id => ids.add(id));
    }
    if (this._device) {
      ids.add(this._device);
    }
    select.appendChild(h('option', '', 'largest change', { value: '' }));
    for (const id of Array.from(ids).sort()) {
      select.appendChild(h('option', '', id, { value: id }));
    }
    select.value = this._device;
    select.addEventListener('change', () => this.setDeviceChoice(select.value));
    label.appendChild(select);
    bar.appendChild(label);
    return bar;
  }

  private _head(): HTMLElement {
    const thead = h('thead');
    const tr = h('tr');
    for (const col of Private.COLUMNS) {
      const th = h('th', `vramscope-CellTable-col-${col.key ?? 'code'}`);
      if (col.key) {
        const key = col.key;
        const active = key === this._sortKey;
        th.setAttribute(
          'aria-sort',
          active ? (this._ascending ? 'ascending' : 'descending') : 'none'
        );
        const btn = h(
          'button',
          'vramscope-CellTable-sort',
          col.label + (active ? (this._ascending ? ' ▲' : ' ▼') : ''),
          { type: 'button', 'data-sort': key, title: `Sort by ${col.title}` }
        );
        th.appendChild(btn);
        // the whole header cell sorts (the button inside fills it and takes the keyboard)
        th.classList.add('vramscope-CellTable-sortable');
        th.addEventListener('click', () => this.sortBy(key));
      } else {
        th.textContent = col.label;
      }
      tr.appendChild(th);
    }
    thead.appendChild(tr);
    return thead;
  }

  private _row(session: IMemorySession, entry: ICellEntry): HTMLElement {
    const r = entry.record;
    const settings = this.tracker.settings;
    const units = settings.units;
    const shown = rowDevice(entry, this._device);
    const tr = h('tr', 'vramscope-CellTable-row', undefined, {
      'data-cell-id': r.cell_id ?? '',
      'data-execution-count':
        r.execution_count === null ? '' : String(r.execution_count),
      'data-epoch': String(entry.epoch)
    });
    if (entry.epoch !== session.epoch) {
      tr.classList.add('vramscope-mod-stale');
    }
    const count = h(
      'td',
      'vramscope-CellTable-count',
      `[${r.execution_count ?? ' '}]`
    );
    tr.appendChild(count);
    // each figure coloured by its own size (a large peak does not colour a small change)
    const mag = (bytes: number | undefined) =>
      bytes === undefined ? 'none' : sizeMagnitude(bytes, settings);
    tr.appendChild(
      h(
        'td',
        `vramscope-CellTable-delta vramscope-mod-${mag(shown?.delta.delta_bytes)}`,
        shown ? formatDelta(shown.delta.delta_bytes, units) : '–',
        { title: shown ? shown.id : '' }
      )
    );
    tr.appendChild(
      h(
        'td',
        `vramscope-CellTable-peak vramscope-mod-${mag(shown?.delta.peak_delta_bytes)}`,
        shown ? formatDelta(shown.delta.peak_delta_bytes, units) : '–',
        // CPU: counted op by op ("exact peak") or sampled
        { title: shown ? peakLabel(shown.delta) : '' }
      )
    );
    tr.appendChild(
      h('td', 'vramscope-CellTable-duration', formatDuration(r.duration))
    );
    const status = h('td', 'vramscope-CellTable-status');
    const label = statusLabel(r) || 'ok';
    const badgeMod = r.oom
      ? 'vramscope-mod-oom'
      : r.ok
        ? 'vramscope-mod-ok'
        : 'vramscope-mod-error';
    status.appendChild(h('span', `vramscope-Badge ${badgeMod}`, label));
    tr.appendChild(status);
    if (!r.ok || r.oom) {
      // shown instead of the Status column at the sidebar's default width
      count.appendChild(
        h(
          'span',
          `vramscope-Badge vramscope-CellTable-mark ${badgeMod}`,
          r.oom ? 'OOM' : '✕',
          { title: label }
        )
      );
    }
    // At the sidebar's default width the Time and Status columns are hidden (style/base.css):
    // a cell that failed is marked after its count, and the duration is in the tooltip.
    const code = h('td', 'vramscope-CellTable-code', undefined, {
      title: `${r.code_head}\n${formatDuration(r.duration)}, ${label}`
    });
    code.textContent = r.code_head;
    tr.appendChild(code);
    if (r.cell_id) {
      const cellId = r.cell_id;
      tr.tabIndex = 0;
      tr.title = 'Show this cell';
      tr.addEventListener('click', () => session.revealCell(cellId));
      tr.addEventListener('keydown', (e: KeyboardEvent) => {
        if (e.key === 'Enter' || e.key === ' ') {
          e.preventDefault();
          session.revealCell(cellId);
        }
      });
    }
    return tr;
  }

  private _clear: ToolbarButton;
  private _sortKey: SortKey = 'order';
  private _ascending = false;
  private _device: DeviceChoice = '';
}

namespace Private {
  export const MAX_ROWS = 1000;

  export const COLUMNS: ReadonlyArray<{
    key: SortKey | null;
    label: string;
    title: string;
  }> = [
    { key: 'order', label: '[n]', title: 'execution order' },
    { key: 'delta', label: 'Δ', title: 'memory change' },
    { key: 'peak', label: 'Peak', title: 'peak rise during the cell' },
    { key: 'duration', label: 'Time', title: 'duration' },
    { key: 'status', label: 'Status', title: 'status' },
    { key: null, label: 'Cell', title: 'code' }
  ];

  export function orderCmp(a: ICellEntry, b: ICellEntry): number {
    return a.epoch - b.epoch || a.record.start_time - b.record.start_time;
  }

  function statusRank(e: ICellEntry): number {
    return e.record.oom ? 2 : e.record.ok ? 0 : 1;
  }

  export function comparator(
    key: SortKey,
    choice: DeviceChoice
  ): (a: ICellEntry, b: ICellEntry) => number {
    const value = (e: ICellEntry): number => {
      switch (key) {
        case 'delta':
          return rowDevice(e, choice)?.delta.delta_bytes ?? -Infinity;
        case 'peak':
          return rowDevice(e, choice)?.delta.peak_delta_bytes ?? -Infinity;
        case 'duration':
          return e.record.duration;
        case 'status':
          return statusRank(e);
        default:
          return 0;
      }
    };
    if (key === 'order') {
      return orderCmp;
    }
    return (a, b) => {
      const x = value(a);
      const y = value(b);
      return x === y ? 0 : x < y ? -1 : 1;
    };
  }

  export function restartRow(): HTMLElement {
    const tr = h('tr', 'vramscope-CellTable-restart');
    tr.appendChild(
      h('td', '', 'Kernel restarted', { colspan: String(COLUMNS.length) })
    );
    return tr;
  }
}

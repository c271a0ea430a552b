/**
 * The Processes section: DataLoader workers, ranks and other children of the notebook's
 * kernel with their current and peak memory per device and a lane each; ended ones marked with
 * their exit reason; copy-on-access findings with their fixes. Renders the model only
 * (coalesced through Lumino's update request, and only while shown). Rows are kept by process
 * key and updated in place, so an update with many ranks costs little more than their lanes.
 */
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { formatBytes } from '../format';
import { h } from '../panel/base';
import type { IProcessFinding } from '../protocol';
import type { IMemorySession, IMemorySessionView } from '../tokens';
import { foldProcesses, IProcessRow, rowFigures, rowLane } from './fold';
import { drawLane, ILaneRange, laneColors } from './lane';
import { ICellPeaks, ProcessesModel } from './model';
import { acquireProcesses, releaseProcesses } from './shared';

/** Lane size in CSS pixels (the canvas is stretched to the row's width by CSS). */
const LANE_WIDTH = 240;
const LANE_HEIGHT = 18;

export class ProcessesView extends Widget implements IMemorySessionView {
  constructor() {
    super();
    this.addClass('vramscope-Processes');
    this._findings = h('div', 'vramscope-Processes-findings');
    this._summary = h('div', 'vramscope-Processes-summary');
    this._table = h('table', 'vramscope-Processes-table');
    const head = h('tr');
    for (const label of ['Process', 'Now', 'Peak']) {
      head.appendChild(h('th', '', label));
    }
    this._table.appendChild(h('thead')).appendChild(head);
    this._body = this._table.appendChild(h('tbody'));
    this._cells = h('div', 'vramscope-Processes-cells');
    this.node.append(this._findings, this._summary, this._table, this._cells);
    if (typeof IntersectionObserver !== 'undefined') {
      // lanes scrolled out of sight are not redrawn (64 ranks: most of them)
      this._observer = new IntersectionObserver(entries => {
        let shown = false;
        for (const entry of entries) {
          const key = (entry.target as HTMLElement).dataset.key ?? '';
          if (entry.isIntersecting) {
            shown = this._hidden.delete(key) || shown;
          } else {
            this._hidden.add(key);
          }
        }
        if (shown) {
          this.update();
        }
      });
    }
    this.update();
  }

  get model(): ProcessesModel | null {
    return this._model;
  }

  setSession(session: IMemorySession | null): void {
    if (session === (this._model?.session ?? null)) {
      return;
    }
    this._release();
    this._model = session ? acquireProcesses(session) : null;
    this._model?.changed.connect(this._onModelChanged, this);
    this.update();
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._release();
    this._observer?.disconnect();
    super.dispose();
  }

  private _release(): void {
    if (this._model) {
      this._model.changed.disconnect(this._onModelChanged, this);
      releaseProcesses(this._model);
      this._model = null;
    }
  }

  private _onModelChanged(): void {
    this.update();
  }

  protected onUpdateRequest(msg: Message): void {
    if (!this.isVisible && this.isAttached) {
      this._stale = true;
      return;
    }
    this._stale = false;
    this.render();
  }

  protected onAfterShow(msg: Message): void {
    if (this._stale) {
      this.update();
    }
  }

  /** Bring the DOM up to date with the model. */
  render(): void {
    const model = this._model;
    const processes = model?.processes ?? [];
    if (!model || processes.length === 0) {
      this._findings.textContent = '';
      this._rows.forEach(row => row.remove());
      this._rows.clear();
      this._table.hidden = true;
      this._cells.textContent = '';
      this._summary.className = 'vramscope-Processes-empty';
      this._summary.textContent =
        'No child processes yet. DataLoader workers and fork-started ranks appear here ' +
        'by themselves; other processes call vramscope.attach().';
      return;
    }
    this._table.hidden = false;
    this._renderFindings(model.findings);
    this._summary.className = 'vramscope-Processes-summary';
    this._summary.textContent = Private.summary(model);
    const range: ILaneRange = {
      t0: Infinity,
      t1: -Infinity,
      max: 0,
      maxUss: 0
    };
    for (const proc of processes) {
      const lane = model.lane(proc.key);
      if (lane.length) {
        range.t0 = Math.min(range.t0, lane[0][0]);
        range.t1 = Math.max(range.t1, lane[lane.length - 1][0]);
      }
      range.max = Math.max(range.max, proc.peak_rss);
      range.maxUss = Math.max(range.maxUss, proc.peak_uss);
    }
    const colors = laneColors(this.node);
    const seen = new Set<string>();
    let previous: Element | null = null;
    for (const item of foldProcesses(processes)) {
      seen.add(item.key);
      let row = this._rows.get(item.key);
      if (!row) {
        row = new Private.Row(item.key);
        this._rows.set(item.key, row);
      }
      if (row.created) {
        row.created = false;
        row.canvas.dataset.key = item.key;
        this._observer?.observe(row.canvas);
      }
      row.update(item);
      if (!this._hidden.has(item.key)) {
        drawLane(
          row.canvas,
          rowLane(item, key => model.lane(key)),
          range,
          LANE_WIDTH,
          LANE_HEIGHT,
          colors
        );
      }
      // keep the model's order, moving only rows that are out of place
      const expected: Element | null = previous
        ? previous.nextElementSibling
        : this._body.firstElementChild;
      if (expected !== row.tr) {
        this._body.insertBefore(row.tr, expected);
        this._body.insertBefore(row.laneRow, row.tr.nextSibling);
      } else if (row.tr.nextElementSibling !== row.laneRow) {
        this._body.insertBefore(row.laneRow, row.tr.nextSibling);
      }
      previous = row.laneRow;
    }
    for (const [key, row] of this._rows) {
      if (!seen.has(key)) {
        this._observer?.unobserve(row.canvas);
        this._hidden.delete(key);
        row.remove();
        this._rows.delete(key);
      }
    }
    this._renderCells(model);
  }

  /** "Peaks per cell": each recent cell's child processes and their peaks (CellRecord). */
  private _renderCells(model: ProcessesModel): void {
    const cells = model.cellPeaks();
    const signature = JSON.stringify(cells);
    if (signature === this._cellsSignature) {
      return;
    }
    this._cellsSignature = signature;
    this._cells.textContent = '';
    if (!cells.length) {
      return;
    }
    this._cells.appendChild(
      h('div', 'vramscope-Processes-cellsTitle', 'Peaks per cell')
    );
    for (const cell of cells) {
      this._cells.appendChild(Private.cellPeaks(cell));
    }
  }

  private _renderFindings(findings: ReadonlyArray<IProcessFinding>): void {
    const signature = JSON.stringify(findings);
    if (signature === this._findingsSignature) {
      return;
    }
    this._findingsSignature = signature;
    this._findings.textContent = '';
    for (const finding of findings) {
      this._findings.appendChild(Private.finding(finding));
    }
  }

  private _model: ProcessesModel | null = null;
  private _stale = false;
  private _findings: HTMLElement;
  private _findingsSignature = '';
  private _summary: HTMLElement;
  private _table: HTMLTableElement;
  private _body: HTMLElement;
  private _rows = new Map<string, Private.Row>();
  private _observer: IntersectionObserver | null = null;
  /** Keys of the lanes the observer saw leave the view. */
  private _hidden = new Set<string>();
  private _cells: HTMLElement;
  private _cellsSignature = '';
}

namespace Private {
  /** One process: its figures, and its lane on a full-width row below. */
  export class Row {
    constructor(key: string) {
      this.tr = h('tr', 'vramscope-Processes-row');
      this.tr.dataset.key = key;
      const role = h('td', 'vramscope-Processes-role');
      this._name = role.appendChild(h('span', 'vramscope-Processes-name'));
      this._state = role.appendChild(h('span', 'vramscope-Processes-state'));
      this._now = h('td', 'vramscope-Processes-now');
      this._peak = h('td', 'vramscope-Processes-peak');
      this.tr.append(role, this._now, this._peak);
      this.laneRow = h('tr', 'vramscope-Processes-laneRow');
      this.laneRow.dataset.key = key;
      const cell = h('td', 'vramscope-Processes-laneCell', undefined, {
        colspan: '3'
      });
      cell.title =
        'RSS (grey) and private memory, USS (blue), over time; each on a scale shared ' +
        'by all processes';
      this.canvas = cell.appendChild(h('canvas', 'vramscope-Processes-lane'));
      this.laneRow.appendChild(cell);
    }

    readonly tr: HTMLElement;
    readonly laneRow: HTMLElement;
    readonly canvas: HTMLCanvasElement;
    /** Not yet laid out by the view (observer registration pending). */
    created = true;

    update(item: IProcessRow): void {
      setText(this._name, item.role);
      setText(this._state, item.state);
      this.tr.dataset.kind = item.kind;
      this.tr.dataset.count = String(item.processes.length);
      const first = item.processes[0];
      this.tr.title =
        item.processes.length === 1
          ? `pid ${first.pid} (parent ${first.ppid}) on ${first.host}`
          : `pids ${item.processes.map(p => p.pid).join(', ')}`;
      figures(this._now, item, 'now');
      figures(this._peak, item, 'peak');
      for (const row of [this.tr, this.laneRow]) {
        row.classList.toggle('vramscope-mod-ended', item.ended);
        row.classList.toggle('vramscope-mod-oom', item.oom);
      }
    }

    remove(): void {
      this.tr.remove();
      this.laneRow.remove();
    }

    private _name: HTMLElement;
    private _state: HTMLElement;
    private _now: HTMLElement;
    private _peak: HTMLElement;
  }

  function setText(node: HTMLElement, text: string): void {
    if (node.textContent !== text) {
      node.textContent = text;
    }
  }

  /** RSS and USS on the CPU, then one line per device the process used. */
  function figures(
    td: HTMLElement,
    item: IProcessRow,
    which: 'now' | 'peak'
  ): void {
    const { rss, uss, devices } = rowFigures(item, which);
    // [class, label, value]: the label wraps above its value where the column is narrow
    const lines: Array<[string, string, string]> = [
      ['vramscope-Processes-figure', '', formatBytes(rss)]
    ];
    if (uss !== null && uss > 0) {
      lines.push(['vramscope-Processes-uss', 'USS', formatBytes(uss)]);
    }
    for (const [id, bytes] of Object.entries(devices)) {
      lines.push(['vramscope-Processes-figure', id, formatBytes(bytes)]);
    }
    const signature = lines.map(l => l.join(':')).join('|');
    if (td.dataset.signature === signature) {
      return;
    }
    td.dataset.signature = signature;
    td.textContent = '';
    for (const [className, label, value] of lines) {
      const line = td.appendChild(h('div', className));
      if (label) {
        line.append(h('span', 'vramscope-Processes-label', label), ' ');
      }
      line.append(h('span', 'vramscope-Processes-value', value));
    }
    td.title =
      `cpu RSS ${formatBytes(rss)}` +
      (uss !== null ? `, private (USS) ${formatBytes(uss)}` : '');
  }

  export function summary(model: ProcessesModel): string {
    const alive = model.processes.filter(p => p.ended === null).length;
    const stats = model.stats;
    const parts = [
      `${alive} running · ${model.processes.length - alive} ended`
    ];
    if (stats?.dropped) {
      parts.push(`${stats.dropped} reports dropped`);
    }
    if (stats?.refused || stats?.malformed || stats?.stale) {
      const refused = stats.refused + stats.malformed + (stats.stale ?? 0);
      parts.push(`${refused} refused`);
    }
    if (stats?.processes_dropped) {
      parts.push(
        `${stats.processes_dropped} reports of processes over the cap dropped`
      );
    }
    if (stats?.history_dropped) {
      const n = stats.history_dropped;
      parts.push(
        `${n.toLocaleString('en-US')} oldest lane ${n === 1 ? 'point' : 'points'} cut (history cap)`
      );
    }
    if (model.remote) {
      parts.push(`remote ranks: ${model.remote}`);
    }
    return parts.join(' · ');
  }

  /** `[5] torch.multiprocessing...: rank 0 1.2 GiB · rank 1 1.5 GiB (spread 300.0 MiB)` */
  export function cellPeaks(cell: ICellPeaks): HTMLElement {
    const line = h('div', 'vramscope-Processes-cell');
    const count = cell.executionCount ?? ' ';
    line.appendChild(h('span', 'vramscope-Processes-cellCount', `[${count}]`));
    line.title = cell.codeHead;
    const peaks = cell.peaks.map(p => p.peak_rss);
    const spread = Math.max(...peaks) - Math.min(...peaks);
    const text =
      cell.peaks
        .map(p => {
          const device = Object.entries(p.peak_device)
            .map(([id, bytes]) => `, ${id} ${formatBytes(bytes)}`)
            .join('');
          return `${p.role} ${formatBytes(p.peak_rss)}${device}`;
        })
        .join(' · ') +
      (cell.peaks.length > 1 ? ` (spread ${formatBytes(spread)})` : '');
    line.appendChild(h('span', 'vramscope-Processes-cellPeaks', text));
    return line;
  }

  export function finding(finding: IProcessFinding): HTMLElement {
    const box = h('div', 'vramscope-Processes-finding');
    box.dataset.kind = finding.kind;
    box.appendChild(
      h('div', 'vramscope-Processes-findingTitle', finding.message)
    );
    const fixes = box.appendChild(h('ul', 'vramscope-Processes-fixes'));
    for (const fix of finding.fixes) {
      fixes.appendChild(h('li', '', fix));
    }
    return box;
  }
}

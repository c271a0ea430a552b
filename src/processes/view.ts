/**
 * The Processes section: DataLoader workers, ranks and other children of the notebook's
 * kernel with their current and peak memory per device and a lane each; ended ones marked with
 * their exit reason; copy-on-access findings with their fixes. Renders the model only
 * (coalesced through Lumino's update request, and only while shown).
 */
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { formatBytes } from '../format';
import { h } from '../panel/base';
import type { IProcessFinding, IProcessInfo } from '../protocol';
import type { IMemorySession, IMemorySessionView } from '../tokens';
import { laneSvg } from './lane';
import { ProcessesModel } from './model';

export class ProcessesView extends Widget implements IMemorySessionView {
  constructor() {
    super();
    this.addClass('vramscope-Processes');
    this.update();
  }

  get model(): ProcessesModel | null {
    return this._model;
  }

  setSession(session: IMemorySession | null): void {
    if (session === (this._model?.session ?? null)) {
      return;
    }
    this._model?.dispose();
    this._model = session ? new ProcessesModel(session) : null;
    this._model?.changed.connect(() => this.update(), this);
    this.update();
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._model?.dispose();
    this._model = null;
    super.dispose();
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

  /** Rebuild the DOM from the model. */
  render(): void {
    const model = this._model;
    const node = this.node;
    node.textContent = '';
    if (!model || model.processes.length === 0) {
      node.appendChild(
        h(
          'div',
          'vramscope-Processes-empty',
          'No child processes yet. DataLoader workers and fork-started ranks appear here ' +
            'by themselves; other processes call vramscope.attach().'
        )
      );
      return;
    }
    for (const finding of model.findings) {
      node.appendChild(Private.finding(finding));
    }
    const alive = model.processes.filter(p => p.ended === null).length;
    const stats = model.stats;
    const summary = `${alive} running · ${model.processes.length - alive} ended`;
    const extra: string[] = [];
    if (stats?.dropped) {
      extra.push(`${stats.dropped} reports dropped`);
    }
    if (stats?.refused || stats?.malformed) {
      extra.push(`${stats.refused + stats.malformed} refused`);
    }
    if (model.remote) {
      extra.push(`remote ranks: ${model.remote}`);
    }
    node.appendChild(
      h('div', 'vramscope-Processes-summary', [summary, ...extra].join(' · '))
    );
    node.appendChild(this._table(model));
  }

  private _table(model: ProcessesModel): HTMLTableElement {
    const table = h('table', 'vramscope-Processes-table');
    const head = h('tr');
    for (const label of ['Process', 'Now', 'Peak', 'Lane']) {
      head.appendChild(h('th', '', label));
    }
    table.appendChild(h('thead')).appendChild(head);
    const body = table.appendChild(h('tbody'));
    let t0 = Infinity;
    let t1 = -Infinity;
    let max = 0;
    for (const proc of model.processes) {
      const lane = model.lane(proc.key);
      if (lane.length) {
        t0 = Math.min(t0, lane[0][0]);
        t1 = Math.max(t1, lane[lane.length - 1][0]);
      }
      max = Math.max(max, proc.peak_rss);
    }
    for (const proc of model.processes) {
      body.appendChild(
        Private.row(proc, laneSvg(model.lane(proc.key), { t0, t1, max }))
      );
    }
    return table;
  }

  private _model: ProcessesModel | null = null;
  private _stale = false;
}

namespace Private {
  export function row(proc: IProcessInfo, lane: SVGSVGElement): HTMLElement {
    const tr = h('tr', 'vramscope-Processes-row');
    tr.dataset.key = proc.key;
    tr.dataset.kind = proc.kind;
    if (proc.ended !== null) {
      tr.classList.add('vramscope-mod-ended');
    }
    if (proc.oom) {
      tr.classList.add('vramscope-mod-oom');
    }
    const name = h('td', 'vramscope-Processes-role');
    name.appendChild(h('span', 'vramscope-Processes-name', proc.role));
    const where = proc.cell !== null ? `cell [${proc.cell}] · ` : '';
    const state =
      proc.ended !== null ? (proc.exit ?? 'ended') : `pid ${proc.pid}`;
    name.appendChild(
      h('span', 'vramscope-Processes-state', `${where}${state}`)
    );
    name.title = `pid ${proc.pid} (parent ${proc.ppid}) on ${proc.host}`;
    tr.appendChild(name);
    tr.appendChild(figures(proc, 'now'));
    tr.appendChild(figures(proc, 'peak'));
    const laneCell = h('td', 'vramscope-Processes-laneCell');
    laneCell.appendChild(lane);
    tr.appendChild(laneCell);
    return tr;
  }

  /** RSS (and USS) on the CPU, then one line per device the process used. */
  function figures(proc: IProcessInfo, which: 'now' | 'peak'): HTMLElement {
    const td = h('td', `vramscope-Processes-${which}`);
    const rss = which === 'now' ? proc.rss : proc.peak_rss;
    const uss = which === 'now' ? proc.uss : proc.peak_uss;
    const cpu = h('div', 'vramscope-Processes-figure', formatBytes(rss));
    cpu.title =
      `cpu RSS ${formatBytes(rss)}` +
      (uss !== null ? `, private (USS) ${formatBytes(uss)}` : '');
    td.appendChild(cpu);
    const devices =
      which === 'now'
        ? Object.entries(proc.devices).map(([id, d]) => [id, d.allocated])
        : Object.entries(proc.peak_devices);
    for (const [id, bytes] of devices) {
      td.appendChild(
        h(
          'div',
          'vramscope-Processes-figure',
          `${id} ${formatBytes(bytes as number)}`
        )
      );
    }
    return td;
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

/**
 * Per-device memory breakdown: a stacked horizontal bar (parameters, gradients, optimizer
 * state, activations, other; on CUDA also reserved-but-free and outside PyTorch) with a legend
 * of values and percentages. The parts add up to the total shown. Indented rows split "Other"
 * (tensors in no model, the runtime baseline of the torch import, the rest) and, on CUDA,
 * "Outside PyTorch" (the context measured at the first init, the rest) where measured.
 */
import { Widget } from '@lumino/widgets';

import { formatBytes } from '../format';
import type { IBreakdown } from '../protocol';

export type BreakdownKey =
  | 'parameters'
  | 'gradients'
  | 'optimizer_state'
  | 'activations'
  | 'other'
  | 'reserved_free'
  | 'outside_pytorch';

export interface IBreakdownPart {
  key: BreakdownKey;
  label: string;
  bytes: number;
  /** Share of `total` in percent. */
  percent: number;
}

const PARTS: ReadonlyArray<[BreakdownKey, string]> = [
  ['parameters', 'Parameters'],
  ['gradients', 'Gradients'],
  ['optimizer_state', 'Optimizer state'],
  ['activations', 'Activations'],
  ['other', 'Other'],
  ['reserved_free', 'Reserved, free (allocator cache)'],
  ['outside_pytorch', 'Outside PyTorch']
];

/** What each part is (the legend rows' and the bar segments' tooltips). */
export const PART_HELP: { [key in BreakdownKey]: string } = {
  parameters: "The watched models' parameters and buffers.",
  gradients: "The parameters' .grad tensors.",
  optimizer_state:
    "The optimizers' state (e.g. Adam's two moments per parameter).",
  activations:
    'Tensors saved for backward by the forward passes still alive (per layer below).',
  other:
    'In use on this device and claimed by no category above: tensors that belong to no ' +
    'model (your variables: see "What is holding memory"), the PyTorch runtime itself ' +
    '(on CPU: the libraries and caches loaded with torch; what "import torch" added is ' +
    "measured and shown below), the allocator's own bookkeeping, and Python objects.",
  reserved_free:
    "Held by PyTorch's CUDA caching allocator but not allocated to a tensor (reserved " +
    'minus allocated): reused by the next allocations; torch.cuda.empty_cache() returns it.',
  outside_pytorch:
    'Used on the device outside PyTorch: the CUDA context, other libraries and other ' +
    'processes (device used minus reserved).'
};

/**
 * The parts of a breakdown and the total they add up to: `total_bytes` (the measured in-use
 * bytes) plus, on CUDA, the reserved-but-free cache and memory outside PyTorch.
 */
export function breakdownParts(b: IBreakdown): {
  parts: IBreakdownPart[];
  total: number;
  allocated: number;
} {
  const raw: [BreakdownKey, string, number][] = [];
  for (const [key, label] of PARTS) {
    const v = (b as unknown as Record<string, unknown>)[key];
    if (typeof v === 'number' && isFinite(v)) {
      raw.push([key, label, Math.max(0, v)]);
    }
  }
  const total = raw.reduce((s, [, , v]) => s + v, 0);
  return {
    total,
    allocated: b.total_bytes,
    parts: raw.map(([key, label, bytes]) => ({
      key,
      label,
      bytes,
      percent: total > 0 ? (100 * bytes) / total : 0
    }))
  };
}

export class BreakdownView extends Widget {
  constructor() {
    super();
    this.addClass('vramscope-Breakdown');
    this._render();
  }

  get breakdown(): Readonly<{ [id: string]: IBreakdown }> {
    return this._breakdown;
  }
  set breakdown(value: Readonly<{ [id: string]: IBreakdown }>) {
    this._breakdown = value;
    this._render();
  }

  private _render(): void {
    this.node.textContent = '';
    const title = document.createElement('div');
    title.className = 'vramscope-Breakdown-title';
    title.textContent = 'Memory by category';
    this.node.appendChild(title);
    const ids = Object.keys(this._breakdown).sort(Private.deviceOrder);
    if (!ids.length) {
      const empty = document.createElement('div');
      empty.className = 'vramscope-Breakdown-empty';
      empty.textContent = 'No breakdown yet.';
      this.node.appendChild(empty);
      return;
    }
    for (const id of ids) {
      this.node.appendChild(Private.device(id, this._breakdown[id]));
    }
  }

  private _breakdown: Readonly<{ [id: string]: IBreakdown }> = {};
}

namespace Private {
  /** One indented row under a part; a part that was not measured has a `note`, no bytes. */
  interface ISubRow {
    key: string;
    label: string;
    bytes: number | { note: string };
    help: string;
  }

  const RUNTIME_LABEL = 'runtime (torch import)';
  const CONTEXT_LABEL = 'CUDA context (first init)';

  /**
   * "Other" split where it is measured (since 1.1): the namespace's tensors that belong to
   * no model, the runtime baseline measured when torch was imported, and the rest.
   */
  function otherRows(b: IBreakdown, other: number, cpu: boolean): ISubRow[] {
    const tensors =
      typeof b.other_tensors === 'number' ? b.other_tensors : null;
    // on CUDA the runtime baseline is a part of "Outside PyTorch" instead
    const runtime =
      cpu && typeof b.runtime_bytes === 'number' ? b.runtime_bytes : null;
    const note =
      cpu && typeof b.runtime_note === 'string' ? b.runtime_note : null;
    if (tensors === null && runtime === null && note === null) {
      return [];
    }
    const rows: ISubRow[] = [];
    let left = other;
    if (tensors !== null) {
      rows.push({
        key: 'other-tensors',
        label: 'tensors in no model',
        bytes: Math.min(tensors, left),
        help:
          'Tensors of your namespace that belong to no model (a variable, or a list, ' +
          'tuple or dict of them); "What is holding memory" names the larger ones.'
      });
      left = Math.max(0, left - tensors);
    }
    if (runtime !== null) {
      rows.push({
        key: 'other-runtime',
        label: RUNTIME_LABEL,
        bytes: Math.min(runtime, left),
        help:
          'The PyTorch runtime baseline, measured when torch was imported: what "import ' +
          'torch" added (its libraries\' data, caches and Python modules), read just ' +
          'before and just after the import.'
      });
      left = Math.max(0, left - runtime);
    } else if (note !== null) {
      rows.push({
        key: 'other-runtime',
        label: RUNTIME_LABEL,
        bytes: { note },
        help:
          `Not measured: ${note}. It is measured when vramscope is loaded before torch ` +
          'is imported; here it is part of the row below.'
      });
    }
    rows.push(
      runtime !== null
        ? {
            key: 'other-rest',
            label: 'allocator, Python objects',
            bytes: left,
            help:
              "The rest: the allocator's bookkeeping, Python objects, and what the " +
              'runtime allocated after the import (thread pools, kernel caches).'
          }
        : {
            key: 'other-rest',
            label: 'runtime, allocator, Python',
            bytes: left,
            help:
              'The rest: the PyTorch runtime (on CPU the libraries and caches loaded ' +
              "with torch), the allocator's bookkeeping and Python objects."
          }
    );
    return rows;
  }

  /** "Outside PyTorch" on CUDA (since 1.1): the context measured after CUDA's first init. */
  function outsideRows(b: IBreakdown, outside: number): ISubRow[] {
    if (typeof b.runtime_bytes === 'number') {
      const context = Math.min(b.runtime_bytes, outside);
      return [
        {
          key: 'outside-context',
          label: CONTEXT_LABEL,
          bytes: context,
          help:
            'Device memory used outside PyTorch when CUDA was first initialised: the ' +
            'CUDA context and the libraries it loaded (and what other processes held then).'
        },
        {
          key: 'outside-rest',
          label: 'libraries, other processes',
          bytes: outside - context,
          help:
            'What grew outside PyTorch since: libraries (cuBLAS, cuDNN) and other ' +
            'processes.'
        }
      ];
    }
    if (typeof b.runtime_note === 'string') {
      const note = b.runtime_note;
      return [
        {
          key: 'outside-context',
          label: CONTEXT_LABEL,
          bytes: { note },
          help: `Not measured: ${note}.`
        }
      ];
    }
    return [];
  }

  /** The indented rows under part `key` of device `id`'s legend. */
  export function subRows(
    legend: HTMLTableElement,
    id: string,
    b: IBreakdown,
    key: BreakdownKey,
    bytes: number,
    total: number
  ): void {
    const cuda = id.startsWith('cuda');
    const rows =
      key === 'other' && bytes > 0
        ? otherRows(b, bytes, !cuda)
        : key === 'outside_pytorch' && cuda
          ? outsideRows(b, bytes)
          : [];
    for (const sub of rows) {
      const row = legend.insertRow();
      row.className = 'vramscope-Breakdown-subrow';
      row.dataset.key = sub.key;
      row.title = sub.help;
      row.insertCell();
      row.insertCell().textContent = sub.label;
      const v = row.insertCell();
      v.className = 'vramscope-Breakdown-bytes';
      if (typeof sub.bytes !== 'number') {
        v.colSpan = 2;
        v.classList.add('vramscope-mod-unmeasured');
        v.textContent = `not measured (${sub.bytes.note})`;
        continue;
      }
      row.dataset.bytes = String(sub.bytes);
      v.textContent = formatBytes(sub.bytes);
      const pc = row.insertCell();
      pc.className = 'vramscope-Breakdown-percent';
      pc.textContent = `${(total > 0 ? (100 * sub.bytes) / total : 0).toFixed(1)}%`;
    }
  }

  function cls(key: BreakdownKey): string {
    return `vramscope-Breakdown-${key.replace(/_/g, '-')}`;
  }

  export function deviceOrder(a: string, b: string): number {
    const rank = (id: string) =>
      id.startsWith('cuda') ? 0 : id.startsWith('mps') ? 1 : 2;
    return rank(a) - rank(b) || a.localeCompare(b);
  }

  export function device(id: string, b: IBreakdown): HTMLElement {
    const { parts, total, allocated } = breakdownParts(b);
    const box = document.createElement('div');
    box.className = 'vramscope-Breakdown-device';
    box.dataset.device = id;

    const head = document.createElement('div');
    head.className = 'vramscope-Breakdown-head';
    const name = document.createElement('span');
    name.className = 'vramscope-Breakdown-name';
    name.textContent = id;
    const sum = document.createElement('span');
    sum.className = 'vramscope-Breakdown-total';
    sum.dataset.bytes = String(total);
    sum.textContent =
      total !== allocated
        ? `${formatBytes(total)} (PyTorch allocated ${formatBytes(allocated)})`
        : formatBytes(total);
    head.append(name, sum);

    const bar = document.createElement('div');
    bar.className = 'vramscope-Breakdown-bar';
    bar.setAttribute('role', 'img');
    bar.setAttribute(
      'aria-label',
      parts.map(p => `${p.label} ${p.percent.toFixed(1)}%`).join(', ')
    );
    const legend = document.createElement('table');
    legend.className = 'vramscope-Breakdown-legend';
    for (const p of parts) {
      if (p.bytes > 0) {
        const seg = document.createElement('span');
        seg.className = `vramscope-Breakdown-segment ${cls(p.key)}`;
        seg.style.width = `${p.percent}%`;
        seg.title = `${p.label}: ${formatBytes(p.bytes)} (${p.percent.toFixed(1)}%)\n${PART_HELP[p.key]}`;
        bar.appendChild(seg);
      }
      const row = legend.insertRow();
      row.className = 'vramscope-Breakdown-row';
      row.dataset.key = p.key;
      row.dataset.bytes = String(p.bytes);
      row.title = PART_HELP[p.key];
      const sw = row.insertCell();
      const swatch = document.createElement('span');
      swatch.className = `vramscope-Breakdown-swatch ${cls(p.key)}`;
      sw.appendChild(swatch);
      row.insertCell().textContent = p.label;
      const v = row.insertCell();
      v.className = 'vramscope-Breakdown-bytes';
      v.textContent = formatBytes(p.bytes);
      const pc = row.insertCell();
      pc.className = 'vramscope-Breakdown-percent';
      pc.textContent = `${p.percent.toFixed(1)}%`;
      subRows(legend, id, b, p.key, p.bytes, total);
    }
    box.append(head, bar, legend);
    const clamped = (b as unknown as Record<string, unknown>)['clamped_bytes'];
    if (typeof clamped === 'number' && clamped > 0) {
      const note = document.createElement('div');
      note.className = 'vramscope-Breakdown-note';
      note.textContent = `The categories exceeded the measured total by ${formatBytes(clamped)} (another allocator?); "Other" shows 0.`;
      box.appendChild(note);
    }
    return box;
  }
}

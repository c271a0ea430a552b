/**
 * Per-device memory breakdown: a stacked horizontal bar (parameters, gradients, optimizer
 * state, activations, other; on CUDA also reserved-but-free and outside PyTorch) with a legend
 * of values and percentages. The parts add up to the total shown.
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
    '(on CPU: the libraries and caches loaded with torch, measured from the moment torch ' +
    "is imported), the allocator's own bookkeeping, and Python objects.",
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
  /**
   * "Other" split where it is measured (since 1.1): the namespace's tensors that belong to
   * no model, and the rest (runtime, allocator, Python objects), as two indented rows.
   */
  export function otherSplit(
    legend: HTMLTableElement,
    b: IBreakdown,
    other: number,
    total: number
  ): void {
    const tensors = b.other_tensors;
    if (typeof tensors !== 'number' || !(other > 0)) {
      return;
    }
    const rows: [string, string, number, string][] = [
      [
        'other-tensors',
        'tensors in no model',
        Math.min(tensors, other),
        'Tensors of your namespace that belong to no model (a variable, or a list, tuple ' +
          'or dict of them): "What is holding memory" names them.'
      ],
      [
        'other-rest',
        'runtime, allocator, Python',
        Math.max(0, other - tensors),
        'The rest: the PyTorch runtime (on CPU the libraries and caches loaded with torch), ' +
          "the allocator's bookkeeping and Python objects."
      ]
    ];
    for (const [key, label, bytes, help] of rows) {
      const row = legend.insertRow();
      row.className = 'vramscope-Breakdown-subrow';
      row.dataset.key = key;
      row.dataset.bytes = String(bytes);
      row.title = help;
      row.insertCell();
      row.insertCell().textContent = label;
      const v = row.insertCell();
      v.className = 'vramscope-Breakdown-bytes';
      v.textContent = formatBytes(bytes);
      const pc = row.insertCell();
      pc.className = 'vramscope-Breakdown-percent';
      pc.textContent = `${(total > 0 ? (100 * bytes) / total : 0).toFixed(1)}%`;
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
      if (p.key === 'other') {
        otherSplit(legend, b, p.bytes, total);
      }
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

import { Widget } from '@lumino/widgets';

import { BreakdownView } from '../../src/insight/breakdown';
import type { IBreakdown } from '../../src/protocol';
import { validateKernelMessage } from '../../src/validate';
import { insight as makeInsight } from './fixtures';

const MiB = 2 ** 20;

const CPU: IBreakdown = {
  total_bytes: 400 * MiB,
  parameters: 100 * MiB,
  gradients: 0,
  optimizer_state: 0,
  activations: 0,
  other: 300 * MiB,
  other_tensors: 64 * MiB
};

const CUDA: IBreakdown = {
  total_bytes: 1000 * MiB,
  parameters: 600 * MiB,
  gradients: 0,
  optimizer_state: 0,
  activations: 0,
  other: 400 * MiB,
  other_tensors: 100 * MiB,
  reserved_free: 200 * MiB,
  outside_pytorch: 700 * MiB
};

function subrows(view: BreakdownView, device: string): HTMLElement[] {
  return Array.from(
    view.node.querySelectorAll<HTMLElement>(
      `[data-device="${device}"] .vramscope-Breakdown-subrow`
    )
  );
}

function render(breakdown: { [id: string]: IBreakdown }): BreakdownView {
  const view = new BreakdownView();
  Widget.attach(view, document.body);
  view.breakdown = breakdown;
  return view;
}

describe('Breakdown: the runtime baseline (since 1.1)', () => {
  it('shows "runtime (torch import)" as its own part of Other, the rest after it', () => {
    const view = render({ cpu: { ...CPU, runtime_bytes: 82 * MiB } });
    const rows = subrows(view, 'cpu');
    expect(rows.map(r => r.dataset.key)).toEqual([
      'other-tensors',
      'other-runtime',
      'other-rest'
    ]);
    expect(rows.map(r => Number(r.dataset.bytes))).toEqual([
      64 * MiB,
      82 * MiB,
      (300 - 64 - 82) * MiB
    ]);
    // the three sub-parts add up to Other exactly
    const other = view.node.querySelector<HTMLElement>(
      '.vramscope-Breakdown-row[data-key="other"]'
    )!;
    expect(rows.reduce((s, r) => s + Number(r.dataset.bytes), 0)).toBe(
      Number(other.dataset.bytes)
    );
    expect(rows[1].textContent).toBe('runtime (torch import)82.0 MiB20.5%');
    expect(rows[1].title).toContain('measured when torch was imported');
    expect(rows[2].textContent).toContain('allocator, Python objects');
    view.dispose();
  });

  it('says "not measured" when torch was imported before vramscope, no guess', () => {
    const note = 'torch was imported before vramscope';
    const view = render({ cpu: { ...CPU, runtime_note: note } });
    const rows = subrows(view, 'cpu');
    expect(rows.map(r => r.dataset.key)).toEqual([
      'other-tensors',
      'other-runtime',
      'other-rest'
    ]);
    const runtime = rows[1];
    expect(runtime.dataset.bytes).toBeUndefined();
    expect(runtime.textContent).toBe(
      'runtime (torch import)not measured (torch was imported before vramscope)'
    );
    expect(runtime.title).toContain(note);
    // the runtime stays inside the rest, which keeps its old name
    expect(Number(rows[2].dataset.bytes)).toBe((300 - 64) * MiB);
    expect(rows[2].textContent).toContain('runtime, allocator, Python');
    view.dispose();
  });

  it('shows the CUDA context as a part of Outside PyTorch, not of Other', () => {
    const view = render({ 'cuda:0': { ...CUDA, runtime_bytes: 500 * MiB } });
    const rows = subrows(view, 'cuda:0');
    expect(rows.map(r => [r.dataset.key, Number(r.dataset.bytes)])).toEqual([
      ['other-tensors', 100 * MiB],
      ['other-rest', 300 * MiB],
      ['outside-context', 500 * MiB],
      ['outside-rest', 200 * MiB]
    ]);
    expect(rows[2].title).toContain('CUDA context');
    view.dispose();
  });

  it('validates runtime_bytes as a byte count and runtime_note as a string', () => {
    const msg = (b: object) => ({
      type: 'insight',
      insight: makeInsight({ breakdown: { cpu: b as IBreakdown } })
    });
    expect(
      typeof validateKernelMessage(msg({ ...CPU, runtime_bytes: 5 }))
    ).toBe('object');
    expect(
      typeof validateKernelMessage(msg({ ...CPU, runtime_note: 'why' }))
    ).toBe('object');
    expect(validateKernelMessage(msg({ ...CPU, runtime_bytes: -1 }))).toContain(
      'runtime_bytes'
    );
    expect(validateKernelMessage(msg({ ...CPU, runtime_note: 3 }))).toContain(
      'runtime_note'
    );
  });
});

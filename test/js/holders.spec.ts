/**
 * The holders list's words: a label for every kind the kernel sends (read from the kernel's
 * source), no kind that repeats the name, names that wrap between identifier parts.
 */
import * as fs from 'fs';
import * as path from 'path';

import {
  breakableName,
  HoldersView,
  holderKindLabel,
  holderKindText,
  KIND_LABELS
} from '../../src/insight/holders';

/** The kinds holder_scan.py can send: `return ("kind", ...` and `_holder(name, "kind", ...`. */
function kernelKinds(): string[] {
  const source = fs.readFileSync(
    path.join(
      __dirname,
      '../../python_bridge/vramscope/insight/holder_scan.py'
    ),
    'utf8'
  );
  const kinds = new Set<string>();
  for (const m of source.matchAll(/return \(\s*"([a-z_]+)",/g)) {
    kinds.add(m[1]);
  }
  for (const m of source.matchAll(/_holder\(\s*"[^"]*",\s*"([a-z_]+)",/g)) {
    kinds.add(m[1]);
  }
  return [...kinds].sort();
}

describe('holder kinds', () => {
  it('has words for every kind the kernel sends', () => {
    const kinds = kernelKinds();
    // the scan's eight kinds: a regex that finds fewer means the source moved
    expect(kinds).toEqual([
      'container',
      'graph_retention',
      'module',
      'object',
      'optimizer',
      'output_cache',
      'tensor',
      'traceback'
    ]);
    for (const kind of kinds) {
      expect(Object.keys(KIND_LABELS)).toContain(kind);
      expect(holderKindLabel(kind)).not.toContain('_');
    }
    expect(holderKindLabel('graph_retention')).toBe('keeps an autograd graph');
    expect(holderKindLabel('some_new_kind')).toBe('some new kind');
  });

  it('leaves out a kind that repeats the name', () => {
    expect(holderKindText('optimizer', 'optimizer')).toBe('');
    expect(holderKindText('model', 'module')).toBe('');
    expect(holderKindText('opt', 'optimizer')).toBe('optimizer state');
    expect(holderKindText('layer', 'module')).toBe('model (nn.Module)');
    expect(holderKindText('losses', 'graph_retention')).toBe(
      'keeps an autograd graph'
    );
    expect(holderKindText('Out / _ (output cache)', 'output_cache')).toBe(
      "IPython's output cache"
    );
  });

  it('breaks names only after . _ [ and /', () => {
    const parts = breakableName('model.layers[0].self_attn');
    const text = parts.map(p => (typeof p === 'string' ? p : '|')).join('');
    expect(text).toBe('model.|layers[|0].|self_|attn');
    expect(breakableName('x')).toEqual(['x']);
  });

  it('renders labels, the full name as a tooltip and no repeated kind', () => {
    const view = new HoldersView();
    view.holders = [
      {
        name: 'optimizer',
        kind: 'optimizer',
        bytes: 2 ** 20,
        explanation: 'AdamW `optimizer`: per-parameter state',
        fix: 'del optimizer'
      },
      {
        name: 'history.losses_by_step',
        kind: 'graph_retention',
        bytes: 2 ** 21,
        explanation: 'a list keeps graphs',
        fix: 'history.losses_by_step.append(loss.item())'
      }
    ];
    const rows = Array.from(
      view.node.querySelectorAll<HTMLElement>('.vramscope-Holders-row')
    );
    const kind = (row: HTMLElement) =>
      row.querySelector<HTMLElement>('.vramscope-Holders-kind')!;
    const name = (row: HTMLElement) =>
      row.querySelector<HTMLElement>('.vramscope-Holders-name')!;
    expect(name(rows[0]).textContent).toBe('history.losses_by_step');
    expect(name(rows[0]).title).toBe('history.losses_by_step');
    expect(name(rows[0]).querySelectorAll('wbr')).toHaveLength(3);
    expect(kind(rows[0]).textContent).toBe('keeps an autograd graph');
    expect(kind(rows[1]).textContent).toBe('');
    expect(kind(rows[1]).title).toBe('optimizer state');
    expect(name(rows[1]).textContent! + kind(rows[1]).textContent).toBe(
      'optimizer'
    );
    view.dispose();
  });
});

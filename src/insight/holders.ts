/**
 * "What is holding memory": one row per holder (variable, output cache, traceback) with its
 * bytes, why it holds them and a copyable fix.
 */
import { Widget } from '@lumino/widgets';

import { formatBytes } from '../format';
import type { IHolder } from '../protocol';
import { appendParts, codeSpans } from '../words';

/**
 * What each holder kind the kernel sends means, in words (python_bridge/vramscope/insight/
 * holder_scan.py names them).
 */
export const KIND_LABELS: { readonly [kind: string]: string } = {
  graph_retention: 'keeps an autograd graph',
  tensor: 'tensor',
  module: 'model (nn.Module)',
  optimizer: 'optimizer state',
  container: 'container of tensors',
  object: 'object holding tensors',
  output_cache: "IPython's output cache",
  traceback: "a failed cell's traceback"
};

/** The words for a holder kind; an unknown kind with its underscores as spaces. */
export function holderKindLabel(kind: string): string {
  return KIND_LABELS[kind] ?? kind.replace(/_/g, ' ');
}

/**
 * The kind as shown beside the name: '' when it would repeat the name (a variable named
 * `optimizer` that is an optimizer, `model` a model).
 */
export function holderKindText(name: string, kind: string): string {
  const label = holderKindLabel(kind);
  const norm = (text: string) => text.toLowerCase().replace(/[\s_]+/g, ' ');
  const n = norm(name).trim();
  const first = norm(label).split(' ')[0];
  return n && (n === norm(kind) || n === first) ? '' : label;
}

/**
 * A holder's name with a line-break opportunity after each `.`, `_`, `[` and `/` so that it
 * wraps between the parts of an identifier, never inside one.
 */
export function breakableName(name: string): (string | HTMLElement)[] {
  const parts: (string | HTMLElement)[] = [];
  for (const piece of name.split(/(?<=[._[/])/)) {
    if (parts.length) {
      parts.push(document.createElement('wbr'));
    }
    parts.push(piece);
  }
  return parts;
}

/** Holders by bytes, largest first (name breaks ties). */
export function sortHolders(holders: ReadonlyArray<IHolder>): IHolder[] {
  return [...holders].sort(
    (a, b) => b.bytes - a.bytes || a.name.localeCompare(b.name)
  );
}

export class HoldersView extends Widget {
  constructor() {
    super();
    this.addClass('vramscope-Holders');
    const title = document.createElement('div');
    title.className = 'vramscope-Holders-title';
    title.textContent = 'What is holding memory';
    this._table = document.createElement('table');
    this._table.className = 'vramscope-Holders-table';
    const head = this._table.createTHead().insertRow();
    for (const h of ['Name', 'Kind', 'Bytes', 'Why', 'Fix']) {
      const th = document.createElement('th');
      th.textContent = h;
      head.appendChild(th);
    }
    this._body = this._table.createTBody();
    this._empty = document.createElement('div');
    this._empty.className = 'vramscope-Holders-empty';
    this.node.append(title, this._table, this._empty);
    this.node.addEventListener('click', this);
    this._render();
  }

  get holders(): ReadonlyArray<IHolder> {
    return this._holders;
  }
  set holders(value: ReadonlyArray<IHolder>) {
    this._holders = value;
    this._render();
  }

  handleEvent(event: Event): void {
    const button = (event.target as HTMLElement).closest?.(
      '.vramscope-Holders-copy'
    ) as HTMLButtonElement | null;
    if (event.type === 'click' && button) {
      void this._copy(button);
    }
  }

  private async _copy(button: HTMLButtonElement): Promise<void> {
    const text = button.dataset.fix ?? '';
    try {
      await navigator.clipboard.writeText(text);
      button.textContent = 'Copied';
    } catch {
      button.textContent = 'Select and copy';
      const code = button.previousElementSibling;
      if (code) {
        const range = document.createRange();
        range.selectNodeContents(code);
        const sel = window.getSelection();
        sel?.removeAllRanges();
        sel?.addRange(range);
      }
    }
    window.setTimeout(() => {
      button.textContent = 'Copy';
    }, 1500);
  }

  private _render(): void {
    this._body.textContent = '';
    for (const h of sortHolders(this._holders)) {
      const row = this._body.insertRow();
      row.className = 'vramscope-Holders-row';
      row.dataset.name = h.name;
      row.dataset.bytes = String(h.bytes);
      const name = row.insertCell();
      name.className = 'vramscope-Holders-name';
      name.append(...breakableName(h.name));
      name.title = h.name;
      const kind = row.insertCell();
      kind.className = 'vramscope-Holders-kind';
      kind.dataset.kind = h.kind;
      kind.textContent = holderKindText(h.name, h.kind);
      kind.title = holderKindLabel(h.kind);
      const bytes = row.insertCell();
      bytes.className = 'vramscope-Holders-bytes';
      bytes.textContent = formatBytes(h.bytes);
      const why = row.insertCell();
      why.className = 'vramscope-Holders-why';
      // the kernel's Markdown code spans (`name`) as code, never raw backticks
      appendParts(why, codeSpans(h.explanation));
      const fix = row.insertCell();
      fix.className = 'vramscope-Holders-fix';
      if (h.fix) {
        const code = document.createElement('code');
        code.textContent = h.fix;
        const copy = document.createElement('button');
        copy.type = 'button';
        copy.className = 'vramscope-Holders-copy';
        copy.textContent = 'Copy';
        copy.title = 'Copy the fix to the clipboard';
        copy.dataset.fix = h.fix;
        // one flex box (a table cell cannot be one): the code takes the room, the button its own
        const box = document.createElement('div');
        box.className = 'vramscope-Holders-fixBox';
        box.append(code, copy);
        fix.append(box);
      }
    }
    this._table.hidden = !this._holders.length;
    this._empty.hidden = !!this._holders.length;
    this._empty.textContent = 'Nothing large is being held.';
  }

  private _holders: ReadonlyArray<IHolder> = [];
  private _table: HTMLTableElement;
  private _body: HTMLTableSectionElement;
  private _empty: HTMLDivElement;
}

/**
 * "What is holding memory": one row per holder (variable, output cache, traceback) with its
 * bytes, why it holds them and a copyable fix.
 */
import { Widget } from '@lumino/widgets';

import { formatBytes } from '../format';
import type { IHolder } from '../protocol';

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
      name.textContent = h.name;
      row.insertCell().textContent = h.kind;
      const bytes = row.insertCell();
      bytes.className = 'vramscope-Holders-bytes';
      bytes.textContent = formatBytes(h.bytes);
      const why = row.insertCell();
      why.className = 'vramscope-Holders-why';
      why.textContent = h.explanation;
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
        fix.append(code, copy);
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

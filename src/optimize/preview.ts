/**
 * The preview before an insertion: a JupyterLab dialog showing the exact code of the cell and
 * where it will go, with a picker when there is more than one cell to choose from. Accepting
 * returns the chosen cell; nothing runs.
 */
import { Dialog, showDialog } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import { h } from '../panel/base';
import type { IInsertable } from './insert';

/** The dialog body: picker, placement line and code. `getValue()` is the chosen item. */
export class PreviewBody
  extends Widget
  implements Dialog.IBodyWidget<IInsertable>
{
  constructor(options: PreviewBody.IOptions) {
    super();
    this.addClass('vramscope-OptimizePreview');
    this._items = options.items;
    this._placement = options.placement;
    this._select = h('select', 'vramscope-OptimizePreview-pick', undefined, {
      'aria-label': 'Cell to insert'
    });
    for (const item of this._items) {
      const opt = h('option', '', item.label);
      opt.value = item.key;
      this._select.appendChild(opt);
    }
    this._select.value = options.selected;
    this._select.hidden = this._items.length < 2;
    this._select.addEventListener('change', this);
    this._where = h('div', 'vramscope-OptimizePreview-where');
    this._code = h('pre', 'vramscope-OptimizePreview-code');
    const note = h(
      'div',
      'vramscope-OptimizePreview-note',
      'The cell is inserted, not run: run it yourself when ready.'
    );
    this.node.append(this._select, this._where, this._code, note);
    this._render();
  }

  getValue(): IInsertable {
    return this._chosen();
  }

  handleEvent(event: Event): void {
    if (event.type === 'change') {
      this._render();
    }
  }

  private _chosen(): IInsertable {
    return (
      this._items.find(i => i.key === this._select.value) ?? this._items[0]
    );
  }

  private _render(): void {
    const item = this._chosen();
    this._code.textContent = item.code;
    this._code.dataset.key = item.key;
    this._where.textContent = `Goes below ${this._placement(item)}.`;
  }

  private _items: IInsertable[];
  private _placement: (item: IInsertable) => string;
  private _select: HTMLSelectElement;
  private _where: HTMLDivElement;
  private _code: HTMLPreElement;
}

export namespace PreviewBody {
  export interface IOptions {
    /** Candidates (at least one). */
    items: IInsertable[];
    /** Key of the one shown first. */
    selected: string;
    /** Where an item goes, in words ("the training cell ([7])"). */
    placement: (item: IInsertable) => string;
  }
}

/** Show the preview; resolves with the item to insert, or null when cancelled. */
export async function previewInsert(
  options: PreviewBody.IOptions
): Promise<IInsertable | null> {
  const result = await showDialog<IInsertable>({
    title: 'Insert a cell below',
    body: new PreviewBody(options),
    buttons: [
      Dialog.cancelButton(),
      Dialog.okButton({ label: 'Insert cell below' })
    ]
  });
  return result.button.accept ? result.value : null;
}

import { Widget } from '@lumino/widgets';

import { IFooterContent } from './text';

/**
 * The memory line under a code cell's input: `.vramscope-CellFooter` with the text in
 * `.vramscope-CellFooter-text`, modifier classes for magnitude/error/oom, and a tooltip.
 */
export class CellFooter extends Widget {
  constructor() {
    super();
    this.addClass('vramscope-CellFooter');
    this._text = document.createElement('span');
    this._text.className = 'vramscope-CellFooter-text';
    this.node.appendChild(this._text);
    this.hide();
  }

  /** Show `content`, or hide the footer when null. */
  render(content: IFooterContent | null): void {
    for (const cls of this._classes) {
      this.removeClass(cls);
    }
    this._classes = [];
    if (!content) {
      this._text.textContent = '';
      this.node.removeAttribute('title');
      this.hide();
      return;
    }
    this._text.textContent = content.text;
    this.node.title = content.tooltip;
    if (content.primary) {
      this.node.dataset.device = content.primary;
    } else {
      delete this.node.dataset.device;
    }
    for (const cls of content.classes) {
      this.addClass(cls);
    }
    this._classes = content.classes.slice();
    this.show();
  }

  private _text: HTMLElement;
  private _classes: string[] = [];
}

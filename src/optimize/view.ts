/**
 * The panel's Optimize section: the kernel's ranked suggestions (predicted saving, cost, why,
 * insert buttons), the mistakes found, and predicted vs measured once a change has run. It
 * renders the active session's `OptimizeModel` and marks it active only while shown.
 */
import { refreshIcon, ToolbarButton } from '@jupyterlab/ui-components';
import { Message, MessageLoop } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import type { Units } from '../format';
import { h } from '../panel/base';
import type {
  IMemorySession,
  IMemorySessionView,
  ISectionToolbarItem
} from '../tokens';
import { appendParts, labelled, TextPart } from '../words';
import { markdown, mistakeCard, outcomeCard, suggestionCard } from './cards';
import { FINDER_KEY } from './insert';
import type { OptimizeModel, OptimizeModels } from './model';
import type { IAdvice } from '../protocol';
import { searchView } from './search';

export class OptimizeView extends Widget implements IMemorySessionView {
  constructor(options: OptimizeView.IOptions) {
    super();
    this.addClass('vramscope-Optimize');
    this._models = options.models;
    this._units = options.units ?? (() => 'binary');
    this._onInsert = options.onInsert;

    const head = h('div', 'vramscope-Optimize-head');
    this._refresh = new ToolbarButton({
      icon: refreshIcon,
      label: 'Refresh',
      className: 'vramscope-Optimize-refresh',
      tooltip: 'Ask the kernel for fresh advice now',
      onClick: () => void this._model?.refresh()
    });
    this._meta = h('span', 'vramscope-Optimize-meta');
    head.append(this._meta);
    this._message = h('div', 'vramscope-Optimize-message');
    this._names = h('div', 'vramscope-Optimize-names');
    this._outcomes = this._list('outcomes', 'Predicted vs measured', 'ol');
    this._suggestions = this._list('suggestions', 'Suggestions', 'ol');
    this._mistakes = this._list('mistakes', 'Mistakes found', 'ul');
    this._notes = this._list('notes', 'Notes', 'ul');
    this._finder = this._finderBlock();
    this.node.prepend(head, this._message, this._names);
    this.node.addEventListener('click', this);
    this._render();
  }

  get session(): IMemorySession | null {
    return this._session;
  }

  /** The buttons of the pane's header: Refresh. */
  get toolbarItems(): ISectionToolbarItem[] {
    return [{ name: 'refresh', widget: this._refresh }];
  }

  /**
   * Scroll the card of suggestion or mistake `id` into view and focus it (the answer line's
   * link); false when no such card is shown.
   */
  revealCard(id: string): boolean {
    MessageLoop.sendMessage(this, Widget.Msg.UpdateRequest);
    const card = Array.from(
      this.node.querySelectorAll<HTMLElement>('.vramscope-Optimize-card')
    ).find(c => c.dataset.id === id);
    if (!card) {
      return false;
    }
    card.tabIndex = -1;
    // scroll the pane only (scrollIntoView would also scroll the accordion around it)
    const pane = (this.node.closest('.vramscope-Section') ??
      this.node) as HTMLElement;
    pane.scrollTop +=
      card.getBoundingClientRect().top - pane.getBoundingClientRect().top;
    card.focus({ preventScroll: true });
    return true;
  }

  /** The active session's model (null without a session). */
  get model(): OptimizeModel | null {
    return this._model;
  }

  setSession(session: IMemorySession | null): void {
    if (session === this._session) {
      return;
    }
    if (this._model) {
      this._model.changed.disconnect(this._onChanged, this);
      this._model.active = false;
    }
    this._session = session;
    this._model = session ? this._models.modelFor(session) : null;
    if (this._model) {
      this._model.changed.connect(this._onChanged, this);
    }
    this._syncActive();
    this.update();
  }

  handleEvent(event: Event): void {
    if (event.type !== 'click') {
      return;
    }
    const target = event.target as HTMLElement;
    const button = target.closest?.(
      '.vramscope-Optimize-button'
    ) as HTMLButtonElement | null;
    if (button?.dataset.key) {
      this._onInsert(button.dataset.key);
    }
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this.setSession(null);
    super.dispose();
  }

  protected onAfterShow(msg: Message): void {
    this._syncActive();
    this.update();
  }

  protected onAfterHide(msg: Message): void {
    this._syncActive();
  }

  protected onAfterAttach(msg: Message): void {
    this._syncActive();
  }

  protected onBeforeDetach(msg: Message): void {
    if (this._model) {
      this._model.active = false;
    }
  }

  protected onUpdateRequest(msg: Message): void {
    if (this.isVisible || !this.isAttached) {
      this._render();
    }
  }

  /** The model is active (asks the kernel after cells) only while this section is seen. */
  private _syncActive(): void {
    if (this._model) {
      this._model.active = this.isAttached && this.isVisible;
    }
  }

  private _onChanged(): void {
    this.update();
  }

  private _list(
    name: string,
    title: string,
    tag: 'ol' | 'ul'
  ): HTMLUListElement | HTMLOListElement {
    const block = h(
      'div',
      `vramscope-Optimize-block vramscope-Optimize-${name}`
    );
    block.append(
      h('div', 'vramscope-Optimize-heading', title),
      h(tag, 'vramscope-Optimize-list')
    );
    this.node.appendChild(block);
    return block.lastElementChild as HTMLUListElement;
  }

  private _render(): void {
    const model = this._model;
    const advice = model?.advice ?? null;
    const units = this._units();
    this._refresh.enabled = !!model && !model.busy;
    Private.fill(this._meta, Private.meta(model, advice));
    this._message.textContent = Private.message(this._session, model, advice);
    this._message.hidden = !this._message.textContent;
    Private.fill(this._names, advice ? Private.names(advice) : []);
    this._names.hidden = !this._names.textContent;

    const fill = (list: HTMLElement, items: HTMLElement[]): void => {
      list.textContent = '';
      list.append(...items);
      (list.parentElement as HTMLElement).hidden = !items.length;
    };
    fill(
      this._outcomes,
      (advice?.outcomes ?? []).map(o => outcomeCard(o, units))
    );
    fill(
      this._suggestions,
      (advice?.suggestions ?? []).map((s, i) => suggestionCard(s, i + 1, units))
    );
    fill(
      this._mistakes,
      (advice?.mistakes ?? []).map(m => mistakeCard(m))
    );
    fill(
      this._notes,
      (advice?.notes ?? []).map(n =>
        markdown(h('li', 'vramscope-Optimize-note'), n)
      )
    );
    this._renderFinder(model, advice, units);
    this.node.dataset.state = !advice
      ? 'empty'
      : model?.busy
        ? 'busy'
        : 'ready';
  }

  /** "Batch size": the finder cell's button and the search's progress. */
  private _finderBlock(): HTMLElement {
    const block = h(
      'div',
      'vramscope-Optimize-block vramscope-Optimize-finder'
    );
    const button = h(
      'button',
      'vramscope-Optimize-button vramscope-Optimize-findBatch',
      'Insert batch-size finder cell',
      {
        type: 'button',
        title:
          'Preview a cell that runs vramscope.find_batch_size with your model and optimizer, then insert it'
      }
    );
    button.dataset.key = FINDER_KEY;
    block.append(
      h('div', 'vramscope-Optimize-heading', 'Batch size'),
      h(
        'div',
        'vramscope-Optimize-finderHelp',
        'Tries training steps of growing batch size and keeps the largest whose peak fits the budget.'
      ),
      h('div', 'vramscope-Optimize-actions'),
      h('div', 'vramscope-Optimize-progress')
    );
    (block.children[2] as HTMLElement).appendChild(button);
    this.node.appendChild(block);
    return block;
  }

  private _renderFinder(
    model: OptimizeModel | null,
    advice: IAdvice | null,
    units: Units
  ): void {
    const search = model?.search ?? null;
    const hasCode = !!advice?.finder_code;
    const [, help, actions, progress] = Array.from(
      this._finder.children
    ) as HTMLElement[];
    help.hidden = !hasCode;
    actions.hidden = !hasCode;
    progress.textContent = '';
    if (search) {
      progress.appendChild(searchView(search, units));
    }
    this._finder.hidden = !hasCode && !search;
  }

  private _models: OptimizeModels;
  private _units: () => Units;
  private _onInsert: (key: string) => void;
  private _session: IMemorySession | null = null;
  private _model: OptimizeModel | null = null;
  private _refresh: ToolbarButton;
  private _meta: HTMLSpanElement;
  private _message: HTMLDivElement;
  private _names: HTMLDivElement;
  private _outcomes: HTMLElement;
  private _suggestions: HTMLElement;
  private _mistakes: HTMLElement;
  private _notes: HTMLElement;
  private _finder: HTMLElement;
}

export namespace OptimizeView {
  export interface IOptions {
    models: OptimizeModels;
    /** The byte units setting (default binary). */
    units?: () => Units;
    /** An insert button was clicked: the key of the `IInsertable` to preview and insert. */
    onInsert: (key: string) => void;
  }
}

namespace Private {
  /** Text where a part is a string; a user's variable name (shown in code style) where not. */
  export type Part = TextPart;

  /** Replace `el`'s content by `parts` (text nodes and `<code>` elements, never HTML). */
  export function fill(el: HTMLElement, parts: Part[]): void {
    el.textContent = '';
    appendParts(el, parts, 'vramscope-Optimize-varName');
  }

  /** How long the advice took: "61 ms", "4.2 ms", "<0.1 ms". */
  export function formatMs(ms: number): string {
    if (ms < 0.1) {
      return '<0.1 ms';
    }
    return ms < 10 ? `${ms.toFixed(1)} ms` : `${Math.round(ms)} ms`;
  }

  /** "model `net` (or just `model`) · advice in 61 ms"; nothing timed before any advice was computed. */
  export function meta(
    model: OptimizeModel | null,
    advice: IAdvice | null
  ): Part[] {
    if (model?.busy) {
      return ['updating…'];
    }
    if (!advice) {
      return [];
    }
    const parts: Part[] = [];
    if (advice.model) {
      parts.push(...labelled('model', advice.model));
    }
    // an empty answer (no torch, no model yet) was not an analysis: no timing to show
    const analysed =
      !!advice.model ||
      advice.suggestions.length > 0 ||
      advice.mistakes.length > 0;
    if (analysed && advice.compute_ms > 0) {
      if (parts.length) {
        parts.push(' · ');
      }
      parts.push(`advice in ${formatMs(advice.compute_ms)}`);
    }
    return parts;
  }

  export function message(
    session: IMemorySession | null,
    model: OptimizeModel | null,
    advice: IAdvice | null
  ): string {
    if (!session || !model) {
      return 'No notebook selected.';
    }
    const parts: string[] = [];
    if (model.error) {
      parts.push(model.error);
    }
    if (!advice) {
      if (session.status !== 'connected') {
        parts.push('Advice comes once the kernel is connected.');
      } else if (!model.busy && !model.error) {
        parts.push('No advice yet: press Refresh.');
      }
    } else if (
      !advice.suggestions.length &&
      !advice.mistakes.length &&
      !advice.outcomes.length
    ) {
      parts.push(
        'Nothing to suggest yet: run a training step (forward, backward, optimizer step) ' +
          'on a torch.nn.Module, then Refresh.'
      );
    }
    return parts.join(' ');
  }

  /** "In your code: model `net`, optimizer `opt`, `loss_fn`, training cell [7]" (a name that says what it is stands alone). */
  export function names(advice: IAdvice): Part[] {
    const n = advice.names;
    const found: Part[][] = [];
    const add = (what: string, name: string | null) => {
      if (name) {
        found.push(labelled(what, name));
      }
    };
    add('model', n.model);
    add('optimizer', n.optimizer);
    add('loss', n.loss_fn);
    add('data', n.data);
    add('batch', n.batch);
    const cell = advice.training_cell;
    if (cell?.execution_count !== null && cell?.execution_count !== undefined) {
      found.push([`training cell [${cell.execution_count}]`]);
    }
    if (!found.length) {
      return [];
    }
    const parts: Part[] = ['In your code: '];
    found.forEach((item, i) => {
      parts.push(...(i ? [', '] : []), ...item);
    });
    return parts;
  }
}

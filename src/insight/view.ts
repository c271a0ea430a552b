/**
 * Model insight: per-layer saved activations, per-device breakdown and holders, for the
 * session's current `insight`, with a model picker and a refresh button.
 */
import { Panel, Widget } from '@lumino/widgets';

import type { IInsight } from '../protocol';
import type { IMemorySession } from '../tokens';
import { BreakdownView } from './breakdown';
import { HoldersView } from './holders';
import { LayersView } from './layers';

/** Value of the model picker's "let the kernel choose" entry. */
const AUTO = '';

export class InsightView extends Panel {
  constructor(options: InsightView.IOptions = {}) {
    super();
    this.addClass('vramscope-Insight');

    const head = new Widget();
    head.addClass('vramscope-Insight-head');
    this._modelSelect = document.createElement('select');
    this._modelSelect.className = 'vramscope-Insight-model';
    this._modelSelect.setAttribute('aria-label', 'Model');
    this._modelSelect.title = 'The nn.Module (namespace name) to inspect';
    this._modelSelect.addEventListener('change', this);
    this._refreshButton = document.createElement('button');
    this._refreshButton.type = 'button';
    this._refreshButton.className = 'vramscope-Insight-refresh';
    this._refreshButton.textContent = 'Refresh';
    this._refreshButton.title = 'Scan the kernel now';
    this._refreshButton.addEventListener('click', this);
    this._meta = document.createElement('span');
    this._meta.className = 'vramscope-Insight-meta';
    head.node.append(this._modelSelect, this._refreshButton, this._meta);

    this._message = new Widget();
    this._message.addClass('vramscope-Insight-message');

    this.layers = new LayersView({ topN: options.topN });
    this.breakdown = new BreakdownView();
    this.holders = new HoldersView();
    this.addWidget(head);
    this.addWidget(this._message);
    this.addWidget(this.breakdown);
    this.addWidget(this.layers);
    this.addWidget(this.holders);
    this._render(null);
  }

  readonly layers: LayersView;
  readonly breakdown: BreakdownView;
  readonly holders: HoldersView;

  get session(): IMemorySession | null {
    return this._session;
  }

  /** Show a session's insight; `null` clears the view. */
  setSession(session: IMemorySession | null): void {
    if (session === this._session) {
      return;
    }
    this._session?.insightChanged.disconnect(this._onInsight, this);
    this._session = session;
    this._models.clear();
    this._selected = AUTO;
    session?.insightChanged.connect(this._onInsight, this);
    this._render(session?.insight ?? null);
  }

  /** Ask the kernel for a fresh insight of the selected model. */
  async refresh(): Promise<void> {
    const session = this._session;
    if (!session) {
      return;
    }
    this._refreshButton.disabled = true;
    this._error = '';
    try {
      const params = this._selected === AUTO ? {} : { model: this._selected };
      const { insight } = await session.request('get_insight', params);
      if (session === this._session) {
        this._render(insight);
      }
    } catch (err) {
      this._error = `Refresh failed: ${(err as Error)?.message ?? String(err)}`;
      this._render(this._insight);
    } finally {
      this._refreshButton.disabled = false;
    }
  }

  handleEvent(event: Event): void {
    if (event.currentTarget === this._refreshButton) {
      void this.refresh();
    } else if (event.currentTarget === this._modelSelect) {
      this._selected = this._modelSelect.value;
      void this.refresh();
    }
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this.setSession(null);
    super.dispose();
  }

  private _onInsight(_: IMemorySession, insight: IInsight | null): void {
    this._render(insight);
  }

  private _render(insight: IInsight | null): void {
    this._insight = insight;
    if (insight?.model) {
      this._models.add(insight.model);
    }
    this._renderPicker(insight);
    const message: string[] = [];
    if (this._error) {
      message.push(this._error);
    }
    if (!this._session) {
      message.push('No notebook selected.');
    } else if (!insight) {
      message.push(
        'No model insight yet: it appears after a cell runs with a torch.nn.Module in the ' +
          'namespace (setting "insight" on), or press Refresh.'
      );
    } else if (insight.skipped) {
      message.push(`Holders scan incomplete: ${insight.skipped}`);
    }
    this._message.node.textContent = message.join(' ');
    this._message.setHidden(!message.length);
    this._meta.textContent = insight
      ? `scan ${insight.scan_ms.toFixed(1)} ms`
      : '';
    this._refreshButton.disabled = !this._session;
    this.layers.layers = insight?.layers ?? [];
    this.breakdown.breakdown = insight?.breakdown ?? {};
    this.holders.holders = insight?.holders ?? [];
  }

  private _renderPicker(insight: IInsight | null): void {
    const select = this._modelSelect;
    select.textContent = '';
    const auto = document.createElement('option');
    auto.value = AUTO;
    auto.textContent = insight?.model
      ? `auto (${insight.model})`
      : 'auto (largest model)';
    select.appendChild(auto);
    for (const name of [...this._models].sort()) {
      const opt = document.createElement('option');
      opt.value = name;
      opt.textContent = name;
      select.appendChild(opt);
    }
    select.value = this._selected;
    select.disabled = !this._session;
  }

  private _session: IMemorySession | null = null;
  private _insight: IInsight | null = null;
  private _models = new Set<string>();
  private _selected = AUTO;
  private _error = '';
  private _modelSelect: HTMLSelectElement;
  private _refreshButton: HTMLButtonElement;
  private _meta: HTMLSpanElement;
  private _message: Widget;
}

export namespace InsightView {
  export interface IOptions {
    /** Layers shown in the per-layer chart (default 15). */
    topN?: number;
  }
}

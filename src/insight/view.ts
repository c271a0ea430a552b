/**
 * Model insight: per-layer saved activations, per-device breakdown and holders, for the
 * session's current `insight`, with a model picker and a refresh button.
 */
import { Panel, Widget } from '@lumino/widgets';

import { formatBytes } from '../format';
import type { IInsight, IModelInfo } from '../protocol';
import type { IMemorySession } from '../tokens';
import { BreakdownView } from './breakdown';
import { HoldersView } from './holders';
import { LayersView } from './layers';

/** Value of the model picker's placeholder entry (no model known yet). */
const NONE = '';

export class InsightView extends Panel {
  constructor(options: InsightView.IOptions = {}) {
    super();
    this.addClass('vramscope-Insight');

    const head = new Widget();
    head.addClass('vramscope-Insight-head');
    this._modelSelect = document.createElement('select');
    this._modelSelect.className = 'vramscope-Insight-model';
    this._modelSelect.setAttribute('aria-label', 'Model');
    this._modelSelect.title =
      'The nn.Module (namespace name) to inspect; the kernel keeps watching the one chosen';
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
    this._pending = null;
    this._error = ''; // a failed refresh of another notebook
    session?.insightChanged.connect(this._onInsight, this);
    this._render(session?.insight ?? null);
  }

  /**
   * Ask the kernel for a fresh insight: of `model` when given (the kernel then keeps
   * watching it), else of the model shown now (or the kernel's choice when none is).
   */
  async refresh(model?: string): Promise<void> {
    const session = this._session;
    if (!session) {
      return;
    }
    const name = model ?? this._insight?.model ?? NONE;
    this._pending = model ?? null;
    this._refreshButton.disabled = true;
    this._error = '';
    try {
      const params = name === NONE ? {} : { model: name };
      const { insight } = await session.request('get_insight', params);
      if (session === this._session) {
        this._pending = null;
        this._render(insight);
      }
    } catch (err) {
      if (session === this._session) {
        this._pending = null;
        this._error = `Refresh failed: ${(err as Error)?.message ?? String(err)}`;
        this._render(this._insight);
      }
    } finally {
      this._refreshButton.disabled = !this._session;
    }
  }

  handleEvent(event: Event): void {
    if (event.currentTarget === this._refreshButton) {
      void this.refresh();
    } else if (event.currentTarget === this._modelSelect) {
      const name = this._modelSelect.value;
      if (name !== NONE) {
        void this.refresh(name);
      }
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
      ? `${Private.metaNote(insight)}scan ${insight.scan_ms.toFixed(1)} ms`
      : '';
    this._refreshButton.disabled = !this._session;
    this.layers.layers = insight?.layers ?? [];
    this.breakdown.breakdown = insight?.breakdown ?? {};
    this.holders.holders = insight?.holders ?? [];
  }

  /** One option per model the kernel listed (name · type · size), the shown one selected. */
  private _renderPicker(insight: IInsight | null): void {
    const select = this._modelSelect;
    const models: IModelInfo[] = [...(insight?.models ?? [])];
    const current = this._pending ?? insight?.model ?? null;
    if (current && !models.some(m => m.name === current)) {
      // Watched but not (yet) in the namespace, or an older bridge without `models`.
      models.push({ name: current, type: '', param_bytes: -1 });
    }
    // Insight messages come several per cell: rebuild the options only when they change.
    const key = JSON.stringify([models, !!this._session]);
    if (key !== this._pickerKey) {
      this._pickerKey = key;
      this._fillPicker(models);
    }
    select.value = current ?? NONE;
    select.disabled = !this._session || !models.length;
  }

  private _fillPicker(models: IModelInfo[]): void {
    const select = this._modelSelect;
    select.textContent = '';
    if (!models.length) {
      const none = document.createElement('option');
      none.value = NONE;
      none.textContent = this._session ? 'no nn.Module found' : 'no model';
      select.appendChild(none);
    }
    for (const m of models) {
      const opt = document.createElement('option');
      opt.value = m.name;
      opt.textContent = Private.modelLabel(m);
      opt.title = opt.textContent;
      select.appendChild(opt);
    }
  }

  private _session: IMemorySession | null = null;
  private _insight: IInsight | null = null;
  /** The model just picked, shown selected until the kernel answers. */
  private _pending: string | null = null;
  private _pickerKey = '';
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

namespace Private {
  export function modelLabel(m: IModelInfo): string {
    if (m.param_bytes < 0) {
      return `${m.name} (not found)`;
    }
    return [m.name, m.type, formatBytes(m.param_bytes)]
      .filter(Boolean)
      .join(' · ');
  }

  const REASONS = {
    first: 'first call in the cell',
    shapes: 'input shapes changed',
    dtype: 'dtype changed',
    mode: 'grad/train mode changed',
    graph_kept: 'the previous graph is kept'
  };

  /**
   * Quiet notes before the scan time: which forward the activations were measured on
   * ("activations measured: [5] call 1 (first call in the cell) · ") and a holders scan
   * still going on ("holders: partial, continuing · "), or ''.
   */
  export function metaNote(insight: IInsight): string {
    const m = insight.activations_measured;
    const count = m?.execution_count ?? null;
    const cell = count !== null ? `[${count}] ` : '';
    const measured = m
      ? `activations measured: ${cell}call ${m.forward_index} (${REASONS[m.reason]}) · `
      : '';
    const partial =
      insight.partial && !insight.skipped
        ? 'holders: partial, continuing · '
        : '';
    return measured + partial;
  }
}

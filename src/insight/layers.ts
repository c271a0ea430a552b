/**
 * Per-layer saved activations: a horizontal bar per module (live `saved_bytes`, with the
 * layer's peak as a lighter bar behind it), sorted by size, top N, filtered by module path.
 * Plain DOM bars: light, themeable, and testable without plotly.
 */
import { Widget } from '@lumino/widgets';

import { formatBytes } from '../format';
import type { ILayerInfo } from '../protocol';

/** Filter (case-insensitive substring of the module path), sort by live then peak bytes, cut. */
export function selectLayers(
  layers: ReadonlyArray<ILayerInfo>,
  filter: string,
  topN: number
): { shown: ILayerInfo[]; matched: number } {
  const q = filter.trim().toLowerCase();
  const matched = layers.filter(l => !q || l.path.toLowerCase().includes(q));
  matched.sort(
    (a, b) =>
      b.saved_bytes - a.saved_bytes ||
      b.peak_saved_bytes - a.peak_saved_bytes ||
      a.path.localeCompare(b.path)
  );
  return {
    shown: matched.slice(0, Math.max(1, Math.floor(topN))),
    matched: matched.length
  };
}

/** The hover text of a layer row. */
export function layerTooltip(l: ILayerInfo): string {
  const shape = l.output_shape ? `[${l.output_shape.join(', ')}]` : 'n/a';
  return [
    `${l.path || '(root)'} (${l.type})`,
    `saved for backward: ${formatBytes(l.saved_bytes)} = ${l.saved_bytes.toLocaleString('en-US')} bytes (peak ${formatBytes(l.peak_saved_bytes)})`,
    `output shape: ${shape}`,
    `parameters: ${formatBytes(l.param_bytes)}, gradients: ${formatBytes(l.grad_bytes)}`
  ].join('\n');
}

export class LayersView extends Widget {
  constructor(options: LayersView.IOptions = {}) {
    super();
    this.addClass('vramscope-Layers');
    this._topN = options.topN ?? 15;

    const head = document.createElement('div');
    head.className = 'vramscope-Layers-head';
    const title = document.createElement('span');
    title.className = 'vramscope-Layers-title';
    title.textContent = 'Saved activations per layer';
    this._filterInput = document.createElement('input');
    this._filterInput.type = 'search';
    this._filterInput.className = 'vramscope-Layers-filter';
    this._filterInput.placeholder = 'Filter modules';
    this._filterInput.setAttribute('aria-label', 'Filter modules by path');
    this._filterInput.addEventListener('input', this);
    this._topInput = document.createElement('input');
    this._topInput.type = 'number';
    this._topInput.min = '1';
    this._topInput.className = 'vramscope-Layers-topn';
    this._topInput.title = 'How many layers to show';
    this._topInput.setAttribute('aria-label', 'Layers shown');
    this._topInput.value = String(this._topN);
    this._topInput.addEventListener('change', this);
    head.append(title, this._filterInput, this._topInput);

    this._list = document.createElement('div');
    this._list.className = 'vramscope-Layers-list';
    this._list.setAttribute('role', 'list');
    this._foot = document.createElement('div');
    this._foot.className = 'vramscope-Layers-foot';
    this.node.append(head, this._list, this._foot);
    this._render();
  }

  get layers(): ReadonlyArray<ILayerInfo> {
    return this._layers;
  }
  set layers(value: ReadonlyArray<ILayerInfo>) {
    this._layers = value;
    this._render();
  }

  /** Text filter on the module path. */
  get filter(): string {
    return this._filter;
  }
  set filter(value: string) {
    this._filter = value;
    if (this._filterInput.value !== value) {
      this._filterInput.value = value;
    }
    this._render();
  }

  /** Rows shown (default 15). */
  get topN(): number {
    return this._topN;
  }
  set topN(value: number) {
    this._topN = Math.max(1, Math.floor(value) || 1);
    this._topInput.value = String(this._topN);
    this._render();
  }

  handleEvent(event: Event): void {
    if (event.currentTarget === this._filterInput) {
      this.filter = this._filterInput.value;
    } else if (event.currentTarget === this._topInput) {
      this.topN = Number(this._topInput.value);
    }
  }

  private _render(): void {
    const { shown, matched } = selectLayers(
      this._layers,
      this._filter,
      this._topN
    );
    let scale = 0;
    for (const l of shown) {
      scale = Math.max(scale, l.saved_bytes, l.peak_saved_bytes);
    }
    this._list.textContent = '';
    for (const l of shown) {
      const row = document.createElement('div');
      row.className = 'vramscope-Layers-bar';
      row.setAttribute('role', 'listitem');
      row.dataset.path = l.path;
      row.dataset.bytes = String(l.saved_bytes);
      row.title = layerTooltip(l);

      const name = document.createElement('span');
      name.className = 'vramscope-Layers-name';
      name.textContent = l.path || '(root)';
      const type = document.createElement('span');
      type.className = 'vramscope-Layers-type';
      type.textContent = l.type;
      name.appendChild(type);

      const track = document.createElement('span');
      track.className = 'vramscope-Layers-track';
      const peak = document.createElement('span');
      peak.className = 'vramscope-Layers-peak';
      peak.style.width = pct(l.peak_saved_bytes, scale);
      const live = document.createElement('span');
      live.className = 'vramscope-Layers-live';
      live.style.width = pct(l.saved_bytes, scale);
      track.append(peak, live);

      const value = document.createElement('span');
      value.className = 'vramscope-Layers-value';
      value.textContent =
        l.peak_saved_bytes > l.saved_bytes
          ? `${formatBytes(l.saved_bytes)} (peak ${formatBytes(l.peak_saved_bytes)})`
          : formatBytes(l.saved_bytes);

      row.append(name, track, value);
      this._list.appendChild(row);
    }
    const total = this._layers.reduce((s, l) => s + l.saved_bytes, 0);
    this._foot.dataset.totalBytes = String(total);
    if (!this._layers.length) {
      this._foot.textContent =
        'No layers recorded yet: run a forward pass of the watched model.';
    } else {
      this._foot.textContent =
        `Showing ${shown.length} of ${matched} matching ` +
        `(${this._layers.length} layers; ${formatBytes(total)} saved now).`;
    }
  }

  private _layers: ReadonlyArray<ILayerInfo> = [];
  private _filter = '';
  private _topN: number;
  private _filterInput: HTMLInputElement;
  private _topInput: HTMLInputElement;
  private _list: HTMLDivElement;
  private _foot: HTMLDivElement;
}

export namespace LayersView {
  export interface IOptions {
    /** Rows shown (default 15). */
    topN?: number;
  }
}

function pct(x: number, scale: number): string {
  return scale > 0 ? `${((100 * x) / scale).toFixed(2)}%` : '0%';
}

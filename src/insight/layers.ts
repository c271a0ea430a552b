/**
 * Per-layer saved activations: a horizontal bar per module (live `saved_bytes`, with the
 * layer's peak as a lighter bar behind it). Shown as a tree of blocks (./layertree.ts: totals
 * per module path, collapsible, the model output and the loss named, the dtypes of the saved
 * bytes, checkpointed blocks marked) or as the flat exact list (sorted by size, top N); both
 * filtered by module path. Plain DOM bars: light, themeable, and testable without plotly.
 */
import { Widget } from '@lumino/widgets';

import { formatBytes } from '../format';
import type { ILayerInfo } from '../protocol';
import {
  buildLayerTree,
  comparePaths,
  defaultExpanded,
  dtypeTag,
  formatCount,
  ILayerNode,
  nodeTooltip,
  specialName,
  visibleNodes
} from './layertree';

/**
 * Tree rows rendered at first, and added by each "Show more": a model with thousands of
 * modules (nn.Sequential of 10,000 layers: 1,000 rows from the kernel) would otherwise cost
 * hundreds of ms of DOM and layout work on every insight message.
 */
export const TREE_ROWS_STEP = 50;

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
      comparePaths(a.path, b.path)
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
    `saved for backward: ${formatBytes(l.saved_bytes)} = ${formatCount(l.saved_bytes)} bytes (peak ${formatBytes(l.peak_saved_bytes)})`,
    `output shape: ${shape}`,
    `parameters: ${formatBytes(l.param_bytes)}, gradients: ${formatBytes(l.grad_bytes)}`
  ].join('\n');
}

export class LayersView extends Widget {
  constructor(options: LayersView.IOptions = {}) {
    super();
    this.addClass('vramscope-Layers');
    this._topN = options.topN ?? 15;
    this._mode = options.mode ?? 'tree';

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
    this._modeButton = document.createElement('button');
    this._modeButton.type = 'button';
    this._modeButton.className = 'vramscope-Layers-mode';
    this._modeButton.addEventListener('click', this);
    head.append(title, this._filterInput, this._topInput, this._modeButton);

    this._list = document.createElement('div');
    this._list.className = 'vramscope-Layers-list';
    this._list.setAttribute('role', 'list');
    this._foot = document.createElement('div');
    this._foot.className = 'vramscope-Layers-foot';
    this._footText = document.createElement('span');
    this._moreButton = document.createElement('button');
    this._moreButton.type = 'button';
    this._moreButton.className = 'vramscope-Layers-more';
    this._moreButton.addEventListener('click', this);
    this._foot.append(this._footText, this._moreButton);
    this.node.append(head, this._list, this._foot);
    this._list.addEventListener('click', this);
    this._render();
  }

  /** 'tree': totals per block; 'flat': the exact per-module list (top N). */
  get mode(): LayersView.Mode {
    return this._mode;
  }
  set mode(value: LayersView.Mode) {
    this._mode = value;
    this._render();
  }

  /** Expand or collapse a block of the tree. */
  toggle(path: string): void {
    if (!this._expanded.delete(path)) {
      this._expanded.add(path);
    }
    this._render();
  }

  get layers(): ReadonlyArray<ILayerInfo> {
    return this._layers;
  }
  set layers(value: ReadonlyArray<ILayerInfo>) {
    // The kernel resends the same rows while its holders scan goes on: rebuild only on change.
    const signature = JSON.stringify(value);
    if (signature === this._signature) {
      return;
    }
    this._signature = signature;
    this._layers = value;
    this._tree = buildLayerTree(value);
    // The top blocks open the first time they are seen, each: a first message whose tree is
    // shallower (the kernel's scan going on) or another model (the picker, another notebook)
    // still shows its blocks; what the user opened or closed stays so.
    for (const path of defaultExpanded(this._tree)) {
      if (!this._defaulted.has(path)) {
        this._defaulted.add(path);
        this._expanded.add(path);
      }
    }
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

  /** Tree rows rendered now (grows by `TREE_ROWS_STEP` with "Show more"). */
  get rowLimit(): number {
    return this._rowLimit;
  }

  /**
   * Render `TREE_ROWS_STEP` more rows of the tree: appended to the rows shown, when nothing
   * else changed since they were drawn (a model of thousands of modules, clicked to its end,
   * would otherwise rebuild every row at each click).
   */
  showMore(): void {
    const from = this._rowLimit;
    this._rowLimit += TREE_ROWS_STEP;
    const drawn = this._drawnTree;
    if (this._mode !== 'tree' || !drawn) {
      this._render();
      return;
    }
    for (const n of drawn.visible.slice(from, this._rowLimit)) {
      this._list.appendChild(this._treeRow(n, drawn.scale));
    }
    this._treeFoot(drawn.visible);
  }

  handleEvent(event: Event): void {
    const target = event.target as HTMLElement;
    if (event.currentTarget === this._moreButton) {
      this.showMore();
    } else if (event.currentTarget === this._list) {
      const row = target
        .closest?.('.vramscope-Layers-expand')
        ?.closest('.vramscope-Layers-bar') as HTMLElement | null;
      if (row?.dataset.path !== undefined) {
        this.toggle(row.dataset.path);
      }
    } else if (event.currentTarget === this._modeButton) {
      this.mode = this._mode === 'tree' ? 'flat' : 'tree';
    } else if (event.currentTarget === this._filterInput) {
      this.filter = this._filterInput.value;
    } else if (event.currentTarget === this._topInput) {
      this.topN = Number(this._topInput.value);
    }
  }

  private _render(): void {
    this._drawnTree = null;
    const tree = this._mode === 'tree';
    this._modeButton.textContent = tree ? 'Flat list' : 'Tree';
    this._modeButton.title = tree
      ? 'Show every module as one exact row, largest first'
      : 'Show totals per block, by module path';
    this._topInput.hidden = tree;
    this.node.dataset.mode = this._mode;
    if (tree) {
      this._renderTree();
    } else {
      this._renderFlat();
    }
  }

  private _renderTree(): void {
    const visible = visibleNodes(this._tree, this._expanded, this._filter);
    let scale = 0;
    for (const n of visible) {
      scale = Math.max(scale, n.total, n.peak);
    }
    this._list.textContent = '';
    for (const n of visible.slice(0, this._rowLimit)) {
      this._list.appendChild(this._treeRow(n, scale));
    }
    this._treeFoot(visible);
    this._drawnTree = { visible, scale };
  }

  /** One row of the tree (bars drawn against `scale`, the largest of all visible rows). */
  private _treeRow(n: ILayerNode, scale: number): HTMLDivElement {
    const { row, name, value } = this._bar(
      n.path,
      n.layer?.saved_bytes ?? 0,
      n.total,
      n.peak,
      scale
    );
    row.classList.add('vramscope-mod-tree');
    row.dataset.total = String(n.total);
    row.title = nodeTooltip(n);
    name.style.paddingLeft = `${n.depth * 10}px`;
    name.append(this._expander(n), n.name || '(model)');
    if (n.layer?.type && !specialName(n.layer)) {
      const type = document.createElement('span');
      type.className = 'vramscope-Layers-type';
      type.textContent = n.layer.type;
      name.appendChild(type);
    }
    const tags = document.createElement('span');
    tags.className = 'vramscope-Layers-tags';
    const dtypes = dtypeTag(n);
    if (dtypes) {
      const tag = document.createElement('span');
      tag.className = 'vramscope-Layers-dtype';
      tag.textContent = dtypes;
      tags.appendChild(tag);
    }
    if (n.layer?.checkpointed) {
      const ckpt = document.createElement('span');
      ckpt.className = 'vramscope-Layers-ckpt';
      ckpt.textContent = 'ckpt';
      ckpt.title = 'checkpointed: recomputed in backward';
      tags.appendChild(ckpt);
    }
    value.prepend(tags);
    return row;
  }

  /** The tree's foot line: rows shown of `visible`, the modules and the total saved now. */
  private _treeFoot(visible: ReadonlyArray<ILayerNode>): void {
    const shownRows = Math.min(this._rowLimit, visible.length);
    const total = this._tree.reduce((s, n) => s + n.total, 0);
    const shown =
      shownRows < visible.length
        ? `Showing ${shownRows} of ${visible.length} rows`
        : `${shownRows} rows`;
    this._setFoot(
      total,
      `${shown} (${this._layers.length} modules; ${formatBytes(total)} saved now).`,
      visible.length - shownRows
    );
  }

  /** The expand/collapse button of a block (an empty spacer for a leaf). */
  private _expander(n: ILayerNode): HTMLElement {
    const open = this._expanded.has(n.path) || !!this._filter.trim();
    const button = document.createElement(
      n.children.length ? 'button' : 'span'
    );
    button.className = 'vramscope-Layers-expand';
    if (n.children.length) {
      (button as HTMLButtonElement).type = 'button';
      button.textContent = open ? '▾' : '▸';
      button.setAttribute('aria-expanded', String(open));
      button.title = open ? 'Collapse' : 'Expand';
    }
    return button;
  }

  /** The foot line, with a "Show more" button when `hidden` tree rows are not rendered. */
  private _setFoot(total: number, text: string, hidden = 0): void {
    this._foot.dataset.totalBytes = String(total);
    const more = hidden > 0 && this._layers.length > 0;
    this._moreButton.hidden = !more;
    this._moreButton.textContent = more
      ? `Show ${Math.min(hidden, TREE_ROWS_STEP)} more`
      : '';
    this._footText.textContent = this._layers.length
      ? text
      : 'No layers recorded yet: run a forward pass of the watched model.';
  }

  /** One bar row: name (empty), track (live over peak) and value. */
  private _bar(
    path: string,
    bytes: number,
    live: number,
    peakBytes: number,
    scale: number
  ): { row: HTMLDivElement; name: HTMLSpanElement; value: HTMLSpanElement } {
    const row = document.createElement('div');
    row.className = 'vramscope-Layers-bar';
    row.setAttribute('role', 'listitem');
    row.dataset.path = path;
    row.dataset.bytes = String(bytes);
    const name = document.createElement('span');
    name.className = 'vramscope-Layers-name';
    const track = document.createElement('span');
    track.className = 'vramscope-Layers-track';
    const peak = document.createElement('span');
    peak.className = 'vramscope-Layers-peak';
    peak.style.width = pct(peakBytes, scale);
    const bar = document.createElement('span');
    bar.className = 'vramscope-Layers-live';
    bar.style.width = pct(live, scale);
    track.append(peak, bar);
    const value = document.createElement('span');
    value.className = 'vramscope-Layers-value';
    value.textContent =
      peakBytes > live
        ? `${formatBytes(live)} (peak ${formatBytes(peakBytes)})`
        : formatBytes(live);
    row.append(name, track, value);
    return { row, name, value };
  }

  private _renderFlat(): void {
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
      const { row, name } = this._bar(
        l.path,
        l.saved_bytes,
        l.saved_bytes,
        l.peak_saved_bytes,
        scale
      );
      row.title = layerTooltip(l);
      name.textContent = l.path || '(root)';
      const type = document.createElement('span');
      type.className = 'vramscope-Layers-type';
      type.textContent = l.type;
      name.appendChild(type);
      this._list.appendChild(row);
    }
    const total = this._layers.reduce((s, l) => s + l.saved_bytes, 0);
    this._setFoot(
      total,
      `Showing ${shown.length} of ${matched} matching ` +
        `(${this._layers.length} layers; ${formatBytes(total)} saved now).`
    );
  }

  private _layers: ReadonlyArray<ILayerInfo> = [];
  private _signature = '[]';
  private _rowLimit = TREE_ROWS_STEP;
  private _footText: HTMLSpanElement;
  private _moreButton: HTMLButtonElement;
  private _tree: ILayerNode[] = [];
  /** The tree's rows as last drawn (all visible, and the bars' scale), for "Show more". */
  private _drawnTree: {
    visible: ReadonlyArray<ILayerNode>;
    scale: number;
  } | null = null;
  private _expanded = new Set<string>();
  /** The blocks opened by default once already (`layers`). */
  private _defaulted = new Set<string>();
  private _mode: LayersView.Mode;
  private _modeButton: HTMLButtonElement;
  private _filter = '';
  private _topN: number;
  private _filterInput: HTMLInputElement;
  private _topInput: HTMLInputElement;
  private _list: HTMLDivElement;
  private _foot: HTMLDivElement;
}

export namespace LayersView {
  export type Mode = 'tree' | 'flat';

  export interface IOptions {
    /** Rows shown in the flat list (default 15). */
    topN?: number;
    /** The view shown first (default 'tree'). */
    mode?: Mode;
  }
}

function pct(x: number, scale: number): string {
  return scale > 0 ? `${((100 * x) / scale).toFixed(2)}%` : '0%';
}

import { DisposableDelegate, IDisposable } from '@lumino/disposable';
import { Panel, Widget } from '@lumino/widgets';

import { vramscopeIcon } from '../icons';
import {
  IMemoryPanel,
  IMemorySession,
  IMemorySessionView,
  IMemoryTracker
} from '../tokens';
import { h } from './base';
import { CellTableView } from './celltable';
import { DevicesView } from './devices';
import { StatusView } from './status';

/**
 * A titled, collapsible section of the panel: `.vramscope-Section` with a header button and
 * the content widget as body.
 */
export class PanelSection extends Panel {
  constructor(
    title: string,
    content: Widget,
    options: { rank?: number; collapsed?: boolean }
  ) {
    super();
    this.rank = options.rank ?? 500;
    this.content = content;
    this.addClass('vramscope-Section');
    this.node.dataset.section = title;
    const header = new Widget({ node: h('div', 'vramscope-Section-header') });
    this._toggle = h('button', 'vramscope-Section-toggle', title, {
      type: 'button'
    });
    this._toggle.addEventListener('click', () =>
      this.setCollapsed(!this._collapsed)
    );
    header.node.appendChild(this._toggle);
    this.addWidget(header);
    content.addClass('vramscope-Section-body');
    this.addWidget(content);
    this.setCollapsed(!!options.collapsed);
  }

  readonly rank: number;
  readonly content: Widget;

  get collapsed(): boolean {
    return this._collapsed;
  }

  setCollapsed(collapsed: boolean): void {
    this._collapsed = collapsed;
    this._toggle.setAttribute('aria-expanded', String(!collapsed));
    this.toggleClass('vramscope-mod-collapsed', collapsed);
    this.content.setHidden(collapsed);
  }

  private _toggle: HTMLButtonElement;
  private _collapsed = false;
}

/**
 * The vramscope side panel (`#vramscope-panel`): a status header, then sections — Devices
 * (rank 100) and Cells (rank 200) built in; more can be added with `addSection`. Follows the
 * tracker's active session and hands it to every view implementing `IMemorySessionView`.
 */
export class MemoryPanel extends Panel implements IMemoryPanel {
  constructor(options: MemoryPanel.IOptions) {
    super();
    this.id = 'vramscope-panel';
    this.addClass('vramscope-Panel');
    this.title.icon = vramscopeIcon;
    this.title.caption = 'vramscope: memory';
    this._tracker = options.tracker;
    this.status = new StatusView(this._tracker);
    this.addWidget(this.status);
    this.devices = new DevicesView(this._tracker);
    this.cells = new CellTableView(this._tracker);
    this.addSection('Devices', this.devices, { rank: 100 });
    this.addSection('Cells', this.cells, { rank: 200 });
    this._tracker.activeChanged.connect(this._onActiveChanged, this);
    this._onActiveChanged(this._tracker, this._tracker.activeSession);
  }

  readonly status: StatusView;
  readonly devices: DevicesView;
  readonly cells: CellTableView;

  get session(): IMemorySession | null {
    return this._session;
  }

  addSection(
    title: string,
    widget: Widget,
    options: { rank?: number; collapsed?: boolean } = {}
  ): IDisposable {
    const section = new PanelSection(title, widget, options);
    // Keep sections ordered by rank (stable); index 0 is the status header.
    let index = this.widgets.length;
    for (let i = 1; i < this.widgets.length; i++) {
      const other = this.widgets[i];
      if (other instanceof PanelSection && other.rank > section.rank) {
        index = i;
        break;
      }
    }
    this.insertWidget(index, section);
    if (Private.isSessionView(widget)) {
      widget.setSession(this._session);
    }
    return new DisposableDelegate(() => {
      section.parent = null;
      section.dispose();
    });
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._tracker.activeChanged.disconnect(this._onActiveChanged, this);
    super.dispose();
  }

  private _onActiveChanged(
    _: IMemoryTracker,
    session: IMemorySession | null
  ): void {
    this._session = session;
    const views: Widget[] = [this.status];
    for (const w of this.widgets) {
      if (w instanceof PanelSection) {
        views.push(w.content);
      }
    }
    for (const view of views) {
      if (Private.isSessionView(view)) {
        view.setSession(session);
      }
    }
  }

  private _tracker: IMemoryTracker;
  private _session: IMemorySession | null = null;
}

export namespace MemoryPanel {
  export interface IOptions {
    tracker: IMemoryTracker;
  }
}

namespace Private {
  export function isSessionView(w: unknown): w is IMemorySessionView {
    return typeof (w as IMemorySessionView | null)?.setSession === 'function';
  }
}

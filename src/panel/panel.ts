import { SidePanel } from '@jupyterlab/ui-components';
import { DisposableDelegate, IDisposable } from '@lumino/disposable';
import { MessageLoop } from '@lumino/messaging';
import { AccordionPanel, SplitLayout, Widget } from '@lumino/widgets';

import { vramscopeIcon } from '../icons';
import {
  IBestActionSource,
  IMemoryPanel,
  IMemorySession,
  IMemorySessionView,
  IMemoryTracker,
  ISectionOptions
} from '../tokens';
import { AnswerView } from './answer';
import { CellTableView } from './celltable';
import { DevicesView } from './devices';
import { PaneState } from './panestate';
import { PanelSection, SectionTitleRenderer } from './section';
import { StatusView } from './status';

/**
 * The vramscope side panel (`#vramscope-panel`), a JupyterLab `SidePanel`: in its header the
 * answer line (./answer.ts) and the connection status, then an accordion of panes, each
 * collapsible with its toolbar in its header (./section.ts), as the Debugger's. Devices (rank
 * 100) and Cells (200) are built in; plugins add more with `addSection`. Which panes are
 * open is remembered (./panestate.ts). Follows the tracker's active session and hands it to
 * every view implementing `IMemorySessionView`.
 */
export class MemoryPanel extends SidePanel implements IMemoryPanel {
  constructor(options: MemoryPanel.IOptions) {
    super({ renderer: new SectionTitleRenderer() });
    this.id = 'vramscope-panel';
    this.addClass('vramscope-Panel');
    this.title.icon = vramscopeIcon;
    this.title.caption = 'vramscope: memory';
    this._tracker = options.tracker;
    this._panes = options.panes ?? new PaneState();
    this.answer = new AnswerView(this._tracker);
    this.status = new StatusView(this._tracker);
    this.header.addWidget(this.answer);
    this.header.addWidget(this.status);
    this.accordion.expansionToggled.connect(this._onToggled, this);
    this.devices = new DevicesView(this._tracker);
    this.cells = new CellTableView(this._tracker);
    this.addSection('Devices', this.devices, { rank: 100, collapsed: true });
    this.addSection('Cells', this.cells, {
      rank: 200,
      toolbar: this.cells.toolbarItems
    });
    this._tracker.activeChanged.connect(this._onActiveChanged, this);
    this._onActiveChanged(this._tracker, this._tracker.activeSession);
    // The header's height follows its text (a warning, a long action): the accordion below
    // gets what is left, and lays its panes out again whenever that changes.
    if (typeof ResizeObserver !== 'undefined') {
      this._resizes = new ResizeObserver(() => {
        if (this.isAttached && this.isVisible) {
          MessageLoop.sendMessage(
            this.accordion,
            Widget.ResizeMessage.UnknownSize
          );
        }
      });
      this._resizes.observe(this.accordion.node);
    }
    void this._panes.restore().then(saved => {
      if (!this.isDisposed) {
        for (const [title, expanded] of Object.entries(saved)) {
          this._apply(title, expanded);
        }
      }
    });
  }

  readonly answer: AnswerView;
  readonly status: StatusView;
  readonly devices: DevicesView;
  readonly cells: CellTableView;

  /** The panes' accordion. */
  get accordion(): AccordionPanel {
    return this.content as AccordionPanel;
  }

  get session(): IMemorySession | null {
    return this._session;
  }

  /** The panes in order. */
  get sections(): PanelSection[] {
    return this.widgets.filter(
      (w): w is PanelSection => w instanceof PanelSection
    );
  }

  addSection(
    title: string,
    widget: Widget,
    options: ISectionOptions = {}
  ): IDisposable {
    const section = new PanelSection(title, widget, options);
    // Keep panes ordered by rank (stable).
    const panes = this.widgets;
    let index = panes.length;
    for (let i = 0; i < panes.length; i++) {
      const other = panes[i];
      if (other instanceof PanelSection && other.rank > section.rank) {
        index = i;
        break;
      }
    }
    // the accordion shares the height left over among the open panes by these weights
    SplitLayout.setStretch(
      section,
      Math.max(1, Math.round(options.share ?? 2))
    );
    this.insertWidget(index, section);
    const expanded = this._panes.expanded(title) ?? !options.collapsed;
    this._applying = true;
    if (!expanded) {
      this.accordion.collapse(index);
    }
    this._applying = false;
    section.toggleClass('vramscope-mod-collapsed', !expanded);
    if (Private.isSessionView(widget)) {
      widget.setSession(this._session);
    }
    return new DisposableDelegate(() => {
      section.parent = null;
      section.dispose();
    });
  }

  revealSection(title: string): Widget | null {
    const section = this.sections.find(s => s.title.label === title);
    if (!section) {
      return null;
    }
    if (section.isHidden) {
      this.accordion.expand(this.widgets.indexOf(section));
    }
    this.accordion.titles[this.widgets.indexOf(section)]?.scrollIntoView?.({
      block: 'nearest'
    });
    return section.content;
  }

  setBestActionSource(source: IBestActionSource | null): void {
    this.answer.setSource(source);
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._tracker.activeChanged.disconnect(this._onActiveChanged, this);
    this.accordion.expansionToggled.disconnect(this._onToggled, this);
    this._resizes?.disconnect();
    super.dispose();
  }

  /** Open or close the pane titled `title` as the user left it (not recorded again). */
  private _apply(title: string, expanded: boolean): void {
    const index = this.widgets.findIndex(
      w => w instanceof PanelSection && w.title.label === title
    );
    const section = this.widgets[index];
    if (!section || section.isHidden === !expanded) {
      return;
    }
    this._applying = true;
    if (expanded) {
      this.accordion.expand(index);
    } else {
      this.accordion.collapse(index);
    }
    this._applying = false;
  }

  private _onToggled(_: AccordionPanel, index: number): void {
    const section = this.widgets[index];
    if (!(section instanceof PanelSection)) {
      return;
    }
    const expanded = !section.isHidden;
    section.toggleClass('vramscope-mod-collapsed', !expanded);
    if (expanded) {
      this._giveRoom(index);
    }
    if (!this._applying) {
      this._panes.set(section.title.label, expanded);
    }
  }

  /**
   * A pane that started collapsed has no size to go back to: Lumino's accordion expands it
   * to its cached size, 0, an open header with nothing under it. Give it its share of the
   * room by the open panes' weights (`ISectionOptions.share`), the other open panes' shares
   * scaled to make it.
   */
  private _giveRoom(index: number): void {
    const sizes = this.accordion.relativeSizes();
    const weight = (w: Widget) => Math.max(SplitLayout.getStretch(w), 1);
    const open = this.widgets.filter(w => !w.isHidden);
    const total = open.reduce((sum, w) => sum + weight(w), 0);
    const share = total > 0 ? weight(this.widgets[index]) / total : 1;
    if (sizes[index] === undefined || sizes[index] >= share / 4) {
      return; // it has room of its own already
    }
    const rest = sizes.reduce((sum, v, i) => (i === index ? sum : sum + v), 0);
    const scale = rest > 0 ? (1 - share) / rest : 0;
    this.accordion.setRelativeSizes(
      sizes.map((v, i) => (i === index ? share : v * scale))
    );
  }

  private _onActiveChanged(
    _: IMemoryTracker,
    session: IMemorySession | null
  ): void {
    this._session = session;
    const views: Widget[] = [this.answer, this.status];
    for (const section of this.sections) {
      views.push(section.content);
    }
    for (const view of views) {
      if (Private.isSessionView(view)) {
        view.setSession(session);
      }
    }
  }

  private _tracker: IMemoryTracker;
  private _panes: PaneState;
  private _applying = false;
  private _resizes: ResizeObserver | null = null;
  private _session: IMemorySession | null = null;
}

export namespace MemoryPanel {
  export interface IOptions {
    tracker: IMemoryTracker;
    /** Where the open/closed panes are remembered (default: for the page's life). */
    panes?: PaneState;
  }
}

namespace Private {
  export function isSessionView(w: unknown): w is IMemorySessionView {
    return typeof (w as IMemorySessionView | null)?.setSession === 'function';
  }
}

import { AccordionToolbar, PanelWithToolbar } from '@jupyterlab/ui-components';
import { Title, Widget } from '@lumino/widgets';

import type { ISectionToolbarItem } from '../tokens';

/**
 * One pane of the panel's accordion: `.vramscope-Section[data-section=<title>]` holding the
 * content (`.vramscope-Section-body`). Its title (`.vramscope-Section-toggle`, the same
 * `data-section`) is the accordion's header, with the pane's toolbar in it, as JupyterLab's
 * Debugger panes have.
 */
export class PanelSection extends PanelWithToolbar {
  constructor(
    title: string,
    content: Widget,
    options: { rank?: number; toolbar?: ReadonlyArray<ISectionToolbarItem> }
  ) {
    super();
    this.rank = options.rank ?? 500;
    this.content = content;
    this.addClass('vramscope-Section');
    this.node.dataset.section = title;
    this.title.label = title;
    this.title.className = 'vramscope-Section-toggle';
    this.title.dataset = { section: title };
    this.toolbar.addClass('vramscope-Section-toolbar');
    for (const item of options.toolbar ?? []) {
      this.toolbar.addItem(item.name, item.widget);
    }
    content.addClass('vramscope-Section-body');
    this.addWidget(content);
  }

  /** Its place in the panel (lower first). */
  readonly rank: number;
  readonly content: Widget;
}

/** JupyterLab's accordion title, with the pane title's own class (`Title.className`) too. */
export class SectionTitleRenderer extends AccordionToolbar.Renderer {
  createSectionTitle(data: Title<Widget>): HTMLElement {
    const handle = super.createSectionTitle(data);
    for (const name of data.className.split(/\s+/).filter(Boolean)) {
      handle.classList.add(name);
    }
    return handle;
  }
}

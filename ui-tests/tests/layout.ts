/**
 * Layout checks of the panel in the real browser: text that is clipped or sticks out, and
 * texts that overlap, in every open pane (shared by panel-width.spec and processes.spec).
 */
import type { IJupyterLabPageFixture } from '@jupyterlab/galata';

/**
 * One line per problem in the panel's open panes (or only `sections`, by title) and its
 * header: a pane body that scrolls sideways; a control, cell or label outside its pane; an
 * element whose own text is cut (`scrollWidth > clientWidth` with hidden overflow); two
 * text boxes of one row that overlap (Now running into Peak); a word broken into a
 * one-letter column (`loss` drawn one letter per line).
 */
export async function layoutProblems(
  page: IJupyterLabPageFixture,
  sections?: string[]
): Promise<string[]> {
  return page.evaluate(only => {
    const out: string[] = [];
    const panel = document.querySelector('#vramscope-panel') as HTMLElement;
    const describe = (el: Element) =>
      `${el.tagName.toLowerCase()}.${String(el.className).slice(0, 60)} "${(
        el.textContent ?? ''
      )
        .trim()
        .slice(0, 24)}"`;
    const shown = (el: HTMLElement) =>
      !!el.offsetParent && el.getBoundingClientRect().width > 0;
    const areas: { name: string; node: HTMLElement }[] = [];
    for (const section of Array.from(
      panel.querySelectorAll<HTMLElement>('.vramscope-Section')
    )) {
      const name = section.dataset.section ?? '?';
      const body = section.querySelector<HTMLElement>(
        '.vramscope-Section-body'
      );
      if (body && shown(body) && (!only || only.includes(name))) {
        areas.push({ name, node: body });
      }
    }
    if (!only) {
      const header = panel.querySelector<HTMLElement>('.jp-SidePanel-header');
      if (header) {
        areas.push({ name: 'header', node: header });
      }
    }
    for (const { name, node } of areas) {
      const box = node.getBoundingClientRect();
      if (node.scrollWidth > node.clientWidth + 1) {
        const wide = Array.from(node.querySelectorAll<HTMLElement>('*'))
          .filter(el => el.getBoundingClientRect().right > box.right + 1)
          .slice(0, 3)
          .map(describe);
        out.push(
          `${name}: scrolls sideways (${node.scrollWidth} > ${node.clientWidth}): ${wide.join(', ')}`
        );
      }
      const all = Array.from(node.querySelectorAll<HTMLElement>('*')).filter(
        shown
      );
      for (const el of all) {
        const r = el.getBoundingClientRect();
        const isControl = el.matches(
          'button, select, input, th, td, label, .vramscope-Badge, [class*="-name"], [class*="-value"], [class*="-bytes"]'
        );
        if (isControl && (r.left < box.left - 1 || r.right > box.right + 1)) {
          out.push(
            `${name}: ${describe(el)} [${Math.round(r.left)}, ${Math.round(r.right)}] outside [${Math.round(box.left)}, ${Math.round(box.right)}]`
          );
        }
        const style = getComputedStyle(el);
        const hasText = Array.from(el.childNodes).some(
          n => n.nodeType === 3 && (n.textContent ?? '').trim()
        );
        if (!hasText || el.tagName === 'CANVAS') {
          continue;
        }
        // own text cut off (an ellipsis on a label is fine where a title gives it whole)
        if (
          el.scrollWidth > el.clientWidth + 1 &&
          style.overflowX !== 'visible' &&
          style.overflowX !== 'auto' &&
          style.overflowX !== 'scroll' &&
          !el.title
        ) {
          out.push(
            `${name}: ${describe(el)} cut (${el.scrollWidth} > ${el.clientWidth})`
          );
        }
        // one letter per line: a text box much taller than wide holding a short word
        const text = (el.textContent ?? '').trim();
        const lineHeight = parseFloat(style.lineHeight) || 14;
        if (
          text.length >= 3 &&
          text.length <= 12 &&
          !/\s/.test(text) &&
          r.height > 2.5 * lineHeight &&
          r.width < 3 * parseFloat(style.fontSize)
        ) {
          out.push(`${name}: ${describe(el)} broken into a column`);
        }
      }
      // overlapping texts of one row: leaf elements with text in the same table row or line
      const rows = Array.from(
        node.querySelectorAll<HTMLElement>(
          'tr, [class*="-row"], [class*="-head"]'
        )
      ).filter(shown);
      for (const row of rows) {
        const leaves = Array.from(row.querySelectorAll<HTMLElement>('*'))
          .filter(
            el =>
              shown(el) &&
              el.children.length === 0 &&
              (el.textContent ?? '').trim() &&
              el.closest('tr, [class*="-row"], [class*="-head"]') === row
          )
          .map(el => ({ el, r: el.getBoundingClientRect() }));
        for (let i = 0; i < leaves.length; i++) {
          for (let j = i + 1; j < leaves.length; j++) {
            const a = leaves[i].r;
            const b = leaves[j].r;
            const dx = Math.min(a.right, b.right) - Math.max(a.left, b.left);
            const dy = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
            if (
              dx > 1 &&
              dy > 1 &&
              !leaves[i].el.contains(leaves[j].el) &&
              !leaves[j].el.contains(leaves[i].el)
            ) {
              out.push(
                `${name}: ${describe(leaves[i].el)} overlaps ${describe(leaves[j].el)}`
              );
            }
          }
        }
      }
    }
    return out;
  }, sections ?? null);
}

/** The right sidebar's width in px. */
export async function panelWidth(
  page: IJupyterLabPageFixture
): Promise<number> {
  return page
    .locator('#vramscope-panel')
    .evaluate(node => node.getBoundingClientRect().width);
}

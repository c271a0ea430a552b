/**
 * The timeline's legend (one swatch per drawn line) and its tooltip (every line's value at
 * the pointer's time).
 */
import type { IBandHit } from './figure';
import { IArea, ILine, valuesAt } from './lines';
import { formatClock } from './ticks';

export class TimelineLegend {
  constructor() {
    this.node = document.createElement('div');
    this.node.className = 'vramscope-Timeline-legend';
  }

  readonly node: HTMLDivElement;

  /** Show these lines (rebuilt only when their labels or styles changed). */
  update(lines: ReadonlyArray<ILine>): void {
    const key = lines.map(l => `${l.label}|${l.color}|${l.dash}`).join('\n');
    if (key === this._key) {
      return;
    }
    this._key = key;
    this.node.textContent = '';
    for (const l of lines) {
      const item = document.createElement('span');
      item.className = 'vramscope-Timeline-legendItem';
      const swatch = swatchFor(l.color);
      swatch.style.borderTopStyle =
        l.dash === 'solid' ? 'solid' : l.dash === 'dot' ? 'dotted' : 'dashed';
      item.append(swatch, l.label);
      this.node.appendChild(item);
    }
  }

  private _key = '';
}

export class TimelineTooltip {
  constructor() {
    this.node = document.createElement('div');
    this.node.className = 'vramscope-Timeline-tooltip';
    this.node.hidden = true;
  }

  readonly node: HTMLDivElement;

  hide(): void {
    this.node.hidden = true;
  }

  /**
   * Show the cell band under the pointer and the values of `lines` at the pointer's time,
   * next to it and always whole inside `stage` (hidden when the pointer is outside the plot
   * area or there is nothing to say).
   */
  show(
    event: MouseEvent,
    stage: HTMLElement | null,
    area: IArea | null,
    lines: ReadonlyArray<ILine>,
    unit: string,
    bands: ReadonlyArray<IBandHit> = []
  ): void {
    if (!area || !stage) {
      this.hide();
      return;
    }
    const box = stage.getBoundingClientRect();
    const mx = event.clientX - box.left - area.left;
    const my = event.clientY - box.top - area.top;
    if (mx < 0 || my < 0 || mx > area.width || my > area.height) {
      this.hide();
      return;
    }
    const at = area.x0 + (mx / area.width) * (area.x1 - area.x0);
    const values = lines.length
      ? valuesAt(lines, at).filter(v => v.y === v.y)
      : [];
    // the newest band that holds the pointer (a running band is drawn last)
    const band = [...bands].reverse().find(b => at >= b.x0 && at <= b.x1);
    if (!values.length && !band) {
      this.hide();
      return;
    }
    const tooltip = this.node;
    tooltip.textContent = '';
    const head = document.createElement('div');
    head.className = 'vramscope-Timeline-tooltipTime';
    head.textContent = formatClock(values.length ? values[0].x : at);
    tooltip.appendChild(head);
    if (band) {
      const cell = document.createElement('div');
      cell.className = 'vramscope-Timeline-tooltipCell';
      band.lines.forEach((text, i) => {
        const line = document.createElement(i ? 'div' : 'strong');
        line.textContent = text;
        cell.appendChild(line);
      });
      tooltip.appendChild(cell);
    }
    for (const v of values) {
      const row = document.createElement('div');
      row.append(swatchFor(v.color), `${v.label}: ${v.y.toFixed(2)} ${unit}`);
      tooltip.appendChild(row);
    }
    tooltip.hidden = false;
    // right of the pointer where it fits, else left of it; never past the stage's edges
    const width = Math.min(tooltip.offsetWidth, box.width);
    const x = area.left + mx;
    let left = x + 12;
    if (left + width > box.width) {
      left = x - 12 - width;
    }
    tooltip.style.left = `${Math.max(0, Math.min(left, box.width - width))}px`;
    tooltip.style.top = `${area.top + Math.max(0, my - 10)}px`;
  }
}

function swatchFor(color: string): HTMLSpanElement {
  const swatch = document.createElement('span');
  swatch.className = 'vramscope-Timeline-swatch';
  swatch.style.borderTopColor = color;
  return swatch;
}

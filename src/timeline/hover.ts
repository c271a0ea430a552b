/**
 * The timeline's legend (one swatch per drawn line) and its tooltip (every line's value at
 * the pointer's time).
 */
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
   * Show the values of `lines` at the pointer's time, placed next to it inside `stage`
   * (hidden when the pointer is outside the plot area or nothing is drawn).
   */
  show(
    event: MouseEvent,
    stage: HTMLElement | null,
    area: IArea | null,
    lines: ReadonlyArray<ILine>,
    unit: string
  ): void {
    if (!area || !stage || !lines.length) {
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
    const values = valuesAt(lines, at).filter(v => v.y === v.y);
    if (!values.length) {
      this.hide();
      return;
    }
    const tooltip = this.node;
    tooltip.textContent = '';
    const head = document.createElement('div');
    head.className = 'vramscope-Timeline-tooltipTime';
    head.textContent = formatClock(values[0].x);
    tooltip.appendChild(head);
    for (const v of values) {
      const row = document.createElement('div');
      row.append(swatchFor(v.color), `${v.label}: ${v.y.toFixed(2)} ${unit}`);
      tooltip.appendChild(row);
    }
    tooltip.hidden = false;
    const left = area.left + mx + 12;
    tooltip.style.left = `${Math.min(left, Math.max(0, box.width - 160))}px`;
    tooltip.style.top = `${area.top + Math.max(0, my - 10)}px`;
  }
}

function swatchFor(color: string): HTMLSpanElement {
  const swatch = document.createElement('span');
  swatch.className = 'vramscope-Timeline-swatch';
  swatch.style.borderTopColor = color;
  return swatch;
}

/**
 * DOM builders of the Optimize section: a suggestion card (predicted saving, cost, why, insert
 * buttons), a mistake card and a predicted-vs-measured table. Pure functions of their data;
 * the buttons carry `data-key` (an `IInsertable` key) for the view to act on.
 */
import { formatBytes, formatDuration, Units } from '../format';
import { h } from '../panel/base';
import { appendParts, codeSpans } from '../words';
import { mistakeKey } from './insert';
import type { IMistake, IOutcome, IPredicted, ISuggestion } from '../protocol';

/** `0.62` -> `62%`; below 1% `<1%`; null -> ''. */
export function formatFraction(fraction: number | null): string {
  if (fraction === null || !Number.isFinite(fraction)) {
    return '';
  }
  const pct = fraction * 100;
  if (pct > 0 && pct < 1) {
    return '<1%';
  }
  return `${Math.round(pct)}%`;
}

/** "saves 38.0 MiB (62%) of saved activations" and the step-peak part, in words. */
export function savingText(p: IPredicted, units: Units): string {
  const pct = formatFraction(p.saving_fraction);
  const parts = [
    `saves ${formatBytes(p.saving_bytes, { units })}${pct ? ` (${pct})` : ''}`
  ];
  if (p.activation_bytes_before !== null && p.activation_bytes_after !== null) {
    parts.push(
      `activations ${formatBytes(p.activation_bytes_before, { units })} → ${formatBytes(
        p.activation_bytes_after,
        { units }
      )}`
    );
  }
  if (p.step_peak_saving_bytes !== null && p.step_peak_saving_bytes > 0) {
    parts.push(
      `step peak −${formatBytes(p.step_peak_saving_bytes, { units })}`
    );
  }
  return parts.join(' · ');
}

/** The cost in words, with its factor unless the words already give it ("~1.33x"). */
export function costText(cost: ISuggestion['cost']): string {
  const factor = cost.factor;
  if (
    factor === null ||
    !Number.isFinite(factor) ||
    /\d\s*[x×]/.test(cost.text)
  ) {
    return cost.text;
  }
  return `${cost.text} (×${factor.toFixed(2)} time)`;
}

/** `el` with the kernel's text, its Markdown code spans (`name`) as `<code>`, never raw. */
export function markdown(el: HTMLElement, text: string): HTMLElement {
  return appendParts(el, codeSpans(text), 'vramscope-Optimize-varName');
}

function button(
  className: string,
  text: string,
  key: string,
  title: string
): HTMLButtonElement {
  const b = h('button', `vramscope-Optimize-button ${className}`, text, {
    type: 'button',
    title
  });
  b.dataset.key = key;
  return b;
}

export function suggestionCard(
  s: ISuggestion,
  rank: number,
  units: Units
): HTMLElement {
  const card = h('li', 'vramscope-Optimize-card vramscope-Optimize-suggestion');
  card.dataset.id = s.id;
  card.dataset.technique = s.technique;
  card.dataset.kind = s.kind;
  card.dataset.savingBytes = String(s.predicted.saving_bytes);
  // applied: the card stays (its outcome below, its undo here), without "Insert cell below"
  card.classList.toggle('vramscope-mod-applied', s.applied === true);
  const title = h('div', 'vramscope-Optimize-title');
  title.append(
    h('span', 'vramscope-Optimize-kind', s.applied ? 'applied' : s.kind),
    h('span', 'vramscope-Optimize-rank', `${rank}.`),
    markdown(h('span', 'vramscope-Optimize-name'), s.title)
  );
  const saving = h(
    'div',
    'vramscope-Optimize-saving',
    savingText(s.predicted, units)
  );
  const cost = h('div', 'vramscope-Optimize-cost', `Cost: ${costText(s.cost)}`);
  const why = h('ul', 'vramscope-Optimize-why');
  for (const fact of s.why) {
    why.appendChild(markdown(h('li'), fact));
  }
  const actions = h('div', 'vramscope-Optimize-actions');
  if (!s.applied) {
    actions.appendChild(
      button(
        'vramscope-Optimize-insert',
        'Insert cell below',
        s.id,
        'Preview the cell, then insert it below (it does not run)'
      )
    );
  }
  if (s.undo_code) {
    actions.appendChild(
      button(
        'vramscope-Optimize-undo',
        'Insert undo cell',
        `${s.id}:undo`,
        'Preview the cell that reverts this change, then insert it'
      )
    );
  }
  card.append(title, saving, cost, why, actions);
  return card;
}

export function mistakeCard(m: IMistake): HTMLElement {
  const card = h('li', 'vramscope-Optimize-card vramscope-Optimize-mistake');
  card.dataset.id = m.id;
  const cell =
    m.execution_count !== null ? `cell [${m.execution_count}]` : null;
  // a title that already names its cell ("... in cell [7]") does not get it twice
  const where = cell && !m.title.includes(cell) ? ` (${cell})` : '';
  card.append(
    markdown(h('div', 'vramscope-Optimize-title'), `${m.title}${where}`),
    markdown(h('div', 'vramscope-Optimize-mistakeWhy'), m.why)
  );
  if (m.fix_code) {
    const actions = h('div', 'vramscope-Optimize-actions');
    actions.appendChild(
      button(
        'vramscope-Optimize-fix',
        'Insert fix below',
        mistakeKey(m),
        'Preview the fix, then insert it below (it does not run)'
      )
    );
    card.appendChild(actions);
  }
  return card;
}

/** Measured savings of an outcome (null where before or after is missing). */
export function measuredSavings(o: IOutcome): {
  activations: number | null;
  stepPeak: number | null;
  durationRatio: number | null;
} {
  const { before, after } = o;
  if (!before || !after) {
    return { activations: null, stepPeak: null, durationRatio: null };
  }
  return {
    activations: before.activation_bytes - after.activation_bytes,
    stepPeak:
      before.step_peak_bytes === null || after.step_peak_bytes === null
        ? null
        : before.step_peak_bytes - after.step_peak_bytes,
    durationRatio:
      before.duration_s > 0 ? after.duration_s / before.duration_s : null
  };
}

/** Predicted vs measured for one outcome: a 3-column table and the verdicts. */
export function outcomeCard(o: IOutcome, units: Units): HTMLElement {
  const card = h('li', 'vramscope-Optimize-card vramscope-Optimize-outcome');
  card.dataset.id = o.suggestion_id;
  card.dataset.technique = o.technique;
  // the kernel's verdict (met, missed, undone, pending; none before protocol 1.2)
  if (o.verdict) {
    card.dataset.verdict = o.verdict;
  }
  const lines = verdicts(o);
  card.classList.toggle(
    'vramscope-mod-missed',
    lines.some(v => v.missed)
  );
  if (o.miss_fraction !== null) {
    card.dataset.missFraction = String(o.miss_fraction);
  }
  card.appendChild(markdown(h('div', 'vramscope-Optimize-title'), o.title));
  const m = measuredSavings(o);
  const bytes = (v: number | null) =>
    v === null ? '–' : formatBytes(v, { units });
  const freed = o.freed_bytes ?? null;
  const table = h('table', 'vramscope-Optimize-compare');
  const head = table.createTHead().insertRow();
  for (const text of ['', 'Predicted', 'Measured']) {
    head.appendChild(h('th', '', text));
  }
  const body = table.createTBody();
  const row = (
    key: string,
    label: string,
    predicted: number | null | undefined,
    measured: string,
    value: number | null
  ) => {
    const tr = body.insertRow();
    tr.dataset.key = key;
    if (predicted !== null && predicted !== undefined) {
      tr.dataset.predicted = String(predicted);
    }
    if (value !== null) {
      tr.dataset.measured = String(value);
    }
    tr.append(
      h('th', '', label),
      h('td', '', predicted === undefined ? '' : bytes(predicted)),
      h('td', '', measured)
    );
  };
  if (freed !== null) {
    // a "free" suggestion: measured by its own cell, the bytes it gave back
    row('freed', 'Freed', o.predicted.saving_bytes, bytes(freed), freed);
  } else {
    trainingRows(o, m, row, bytes);
  }
  card.appendChild(table);
  for (const v of lines) {
    // a note names the user's objects in code spans (never raw backticks)
    const line = markdown(h('div', 'vramscope-Optimize-verdict'), v.text);
    line.dataset.key = v.key;
    line.classList.toggle('vramscope-mod-missed', v.missed);
    card.appendChild(line);
  }
  return card;
}

type Row = (
  key: string,
  label: string,
  predicted: number | null | undefined,
  measured: string,
  value: number | null
) => void;

/** The rows of a training-run outcome: saved activations, step peak, cell duration. */
function trainingRows(
  o: IOutcome,
  m: ReturnType<typeof measuredSavings>,
  row: Row,
  bytes: (v: number | null) => string
): void {
  row(
    'activations',
    'Saved activations',
    o.predicted.saving_bytes,
    bytes(m.activations),
    m.activations
  );
  row(
    'step_peak',
    'Step peak saving',
    o.predicted.step_peak_saving_bytes,
    bytes(m.stepPeak),
    m.stepPeak
  );
  const duration =
    o.before && o.after
      ? `${formatDuration(o.before.duration_s)} → ${formatDuration(o.after.duration_s)}` +
        (m.durationRatio !== null ? ` (×${m.durationRatio.toFixed(2)})` : '')
      : '–';
  row('duration', 'Cell duration', undefined, duration, m.durationRatio);
}

/** A miss over this fraction of the prediction is called out (the kernel uses the same). */
export const MISS_LIMIT = 0.2;

/**
 * How far the measured step-peak saving is from its prediction (|got - want| / want), or null
 * when either is missing. The kernel's `miss_fraction` is about the saved activations.
 */
export function stepPeakMiss(o: IOutcome): number | null {
  const want = o.predicted.step_peak_saving_bytes;
  const got = measuredSavings(o).stepPeak;
  if (!want || got === null) {
    return null;
  }
  return Math.abs(got - want) / want;
}

/** One sentence about a miss fraction (`what`: the quantity it is about). */
function missText(what: string, miss: number | null, missed: boolean): string {
  if (miss === null) {
    return `${what}: measured.`;
  }
  const pct = formatFraction(Math.abs(miss));
  if (missed) {
    return `${what}: the prediction missed by ${pct} (more than 20%).`;
  }
  if (Math.abs(miss) < 0.005) {
    return `${what}: as predicted (within 0.5%).`;
  }
  return `${what}: within ${pct} of the prediction.`;
}

/**
 * The verdicts of an outcome: not measured yet; or the saved activations (the kernel's miss)
 * and, where a step-peak saving was predicted, the step peak; a miss over 20% says so.
 */
export function verdicts(
  o: IOutcome
): { key: string; text: string; missed: boolean }[] {
  if ((o.freed_bytes ?? null) !== null) {
    return [
      {
        key: 'freed',
        text: missText('Freed', o.miss_fraction, o.missed),
        missed: o.missed
      }
    ];
  }
  if (o.verdict === 'undone') {
    return [
      {
        key: 'undone',
        text: `Not measured: ${o.note ?? 'the run after it undid the change.'}`,
        missed: true
      }
    ];
  }
  if (!o.after) {
    const text = o.before
      ? 'Run the training cell again to measure the change.'
      : 'Run the training cell, then again after this change, to measure it.';
    return [{ key: 'pending', text, missed: false }];
  }
  const out = [
    {
      key: 'activations',
      text: missText('Saved activations', o.miss_fraction, o.missed),
      missed: o.missed
    }
  ];
  const peak = stepPeakMiss(o);
  if (o.predicted.step_peak_saving_bytes && peak === null) {
    // the run before the change had no measured step (advice was opened after it)
    out.push({
      key: 'step_peak',
      text:
        'Step peak: not compared (the run before this change had no measured step). ' +
        'Run the training cell once with this section open before applying a suggestion.',
      missed: false
    });
  } else if (peak !== null) {
    const missed = peak > MISS_LIMIT;
    out.push({
      key: 'step_peak',
      text: missText('Step peak', peak, missed),
      missed
    });
  }
  return out;
}

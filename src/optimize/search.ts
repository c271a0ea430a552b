/**
 * The batch-size finder's progress, from the kernel's `batch_search` messages: each size tried
 * with its measured peak against the budget, then the chosen size (or why it failed).
 */
import { formatBytes, Units } from '../format';
import { h } from '../panel/base';
import type { IBatchSearch } from '../protocol';

/** One line: "running: 4 sizes tried" / "batch size 48 fits (peak 5.1 GiB of 6.0 GiB)". */
export function searchSummary(s: IBatchSearch, units: Units): string {
  const budget = formatBytes(s.budget_bytes, { units });
  if (s.state === 'running') {
    const n = s.tried.length;
    return `Searching on ${s.device} within ${budget}: ${n} size${n === 1 ? '' : 's'} tried…`;
  }
  if (s.state === 'failed' || s.batch_size === null) {
    return `The search failed${s.message ? `: ${s.message}` : '.'}`;
  }
  const chosen = s.tried.find(t => t.batch_size === s.batch_size);
  const peak =
    chosen?.peak_bytes !== null && chosen?.peak_bytes !== undefined
      ? ` (step peak ${formatBytes(chosen.peak_bytes, { units })} of ${budget})`
      : ` (budget ${budget})`;
  let text = `Batch size ${s.batch_size} fits on ${s.device}${peak}.`;
  if (s.target_batch !== null && s.accumulation_steps !== null) {
    text += ` ${s.accumulation_steps} accumulation step${
      s.accumulation_steps === 1 ? '' : 's'
    } reach the target batch of ${s.target_batch}.`;
  }
  return text;
}

/** The progress display: a summary line and one bar per size tried (peak / budget). */
export function searchView(s: IBatchSearch, units: Units): HTMLElement {
  const box = h('div', 'vramscope-Optimize-search');
  box.dataset.state = s.state;
  if (s.batch_size !== null) {
    box.dataset.batchSize = String(s.batch_size);
  }
  box.appendChild(
    h('div', 'vramscope-Optimize-searchSummary', searchSummary(s, units))
  );
  const list = h('ol', 'vramscope-Optimize-trials');
  const scale = Math.max(
    s.budget_bytes,
    ...s.tried.map(t => t.peak_bytes ?? 0)
  );
  for (const t of s.tried) {
    const row = h('li', 'vramscope-Optimize-trial');
    row.dataset.batchSize = String(t.batch_size);
    row.classList.toggle('vramscope-mod-fits', t.fits);
    row.classList.toggle('vramscope-mod-chosen', t.batch_size === s.batch_size);
    const verdict = t.oom
      ? 'out of memory'
      : t.peak_bytes === null
        ? 'not measured'
        : `${formatBytes(t.peak_bytes, { units })}${t.fits ? '' : ' (over budget)'}`;
    const bar = h('span', 'vramscope-Optimize-trialBar');
    const fill = h('span', 'vramscope-Optimize-trialFill');
    const width =
      t.oom || scale <= 0 ? 100 : ((t.peak_bytes ?? 0) / scale) * 100;
    fill.style.width = `${Math.min(100, width).toFixed(1)}%`;
    const budget = h('span', 'vramscope-Optimize-trialBudget');
    budget.style.left = `${scale > 0 ? ((s.budget_bytes / scale) * 100).toFixed(1) : 100}%`;
    budget.title = `budget ${formatBytes(s.budget_bytes, { units })}`;
    bar.append(fill, budget);
    row.append(
      h('span', 'vramscope-Optimize-trialSize', String(t.batch_size)),
      bar,
      h('span', 'vramscope-Optimize-trialPeak', verdict)
    );
    list.appendChild(row);
  }
  box.appendChild(list);
  return box;
}

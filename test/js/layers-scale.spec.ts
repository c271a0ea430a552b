/**
 * The layer view with a model of thousands of modules (issue 14): the kernel sends at most
 * 1,000 layer rows; the tree renders `TREE_ROWS_STEP` of them at a time ("Show more"), and
 * an insight that repeats the same rows (the kernel resends them while its holders scan goes
 * on) does not rebuild the view. Ground truth: the rows themselves, built here.
 */
import { Widget } from '@lumino/widgets';

import type { ILayerInfo } from '../../src/protocol';
import { LayersView, TREE_ROWS_STEP } from '../../src/insight/layers';

/** An nn.Sequential of `n` Linear(4, 4) as the kernel reports it: the model row, then 0..n-1. */
function sequential(n: number, savedOf = (i: number) => 32 * (i + 1)) {
  const rows: ILayerInfo[] = [
    {
      path: '',
      type: 'Sequential',
      saved_bytes: 0,
      peak_saved_bytes: 0,
      output_shape: [2, 4],
      param_bytes: 80 * n,
      grad_bytes: 80 * n
    }
  ];
  for (let i = 0; i < n; i++) {
    rows.push({
      path: String(i),
      type: 'Linear',
      saved_bytes: savedOf(i),
      peak_saved_bytes: savedOf(i),
      output_shape: [2, 4],
      param_bytes: 80,
      grad_bytes: 80,
      saved_by_dtype: { float32: savedOf(i) }
    });
  }
  return rows;
}

function attach<T extends Widget>(w: T): T {
  Widget.attach(w, document.body);
  return w;
}

const bars = (view: LayersView) =>
  Array.from(
    view.node.querySelectorAll<HTMLElement>('.vramscope-Layers-bar')
  ).map(b => b.dataset.path);
const more = (view: LayersView) =>
  view.node.querySelector<HTMLButtonElement>('.vramscope-Layers-more')!;
const foot = (view: LayersView) =>
  view.node.querySelector('.vramscope-Layers-foot')!.textContent;

describe('LayersView with 1,000 layer rows', () => {
  it('renders the largest rows a step at a time, the rest behind "Show more"', () => {
    const layers = sequential(999);
    const view = attach(new LayersView());
    view.layers = layers;
    // roots sorted by total: "998" (the largest) first; the model row has 0 bytes
    const expected = layers
      .filter(l => l.path !== '')
      .sort((a, b) => b.saved_bytes - a.saved_bytes)
      .map(l => l.path);
    expect(bars(view)).toEqual(expected.slice(0, TREE_ROWS_STEP));
    expect(more(view).hidden).toBe(false);
    expect(more(view).textContent).toBe(`Show ${TREE_ROWS_STEP} more`);
    expect(foot(view)).toContain(
      `Showing ${TREE_ROWS_STEP} of 1000 rows (1000 modules;`
    );
    // the bars keep the scale of every row, shown or not: the largest is 100%
    const first = view.node.querySelector<HTMLElement>(
      '.vramscope-Layers-live'
    )!;
    expect(first.style.width).toBe('100%');

    more(view).click();
    expect(bars(view)).toEqual(expected.slice(0, 2 * TREE_ROWS_STEP));
    for (let i = 2; i < Math.ceil(1000 / TREE_ROWS_STEP); i++) {
      more(view).click();
    }
    expect(bars(view)).toHaveLength(1000);
    expect(bars(view).slice(0, 999)).toEqual(expected);
    expect(bars(view)[999]).toBe('');
    expect(more(view).hidden).toBe(true);
    expect(foot(view)).toContain('1000 rows (1000 modules;');
    view.dispose();
  });

  it('filters over every row, not only the ones rendered', () => {
    const view = attach(new LayersView());
    view.layers = sequential(999);
    view.filter = '5';
    // paths containing "5": 1 + 18 + 252 = 271 of 0..998 (and the model row, named "model output")
    const matching = Array.from({ length: 999 }, (_, i) => String(i)).filter(
      p => p.includes('5')
    );
    expect(foot(view)).toContain(
      `Showing ${TREE_ROWS_STEP} of ${matching.length} rows`
    );
    expect(bars(view).every(p => p!.includes('5'))).toBe(true);
    view.dispose();
  });

  it('an insight with the same rows keeps the DOM; a change rebuilds it', () => {
    const view = attach(new LayersView());
    view.layers = sequential(999);
    const row = view.node.querySelector('.vramscope-Layers-bar');
    view.layers = JSON.parse(JSON.stringify(sequential(999))); // a new message, same rows
    expect(view.node.querySelector('.vramscope-Layers-bar')).toBe(row);
    view.layers = sequential(999, i => (i === 3 ? 10 ** 9 : 32 * (i + 1)));
    const first = view.node.querySelector<HTMLElement>(
      '.vramscope-Layers-bar'
    )!;
    expect(first).not.toBe(row);
    expect(first.dataset.path).toBe('3');
    view.dispose();
  });

  it('"Show more" appends to the rows drawn, the same rows a full render gives', () => {
    const view = attach(new LayersView());
    view.layers = sequential(999);
    const firstRow = view.node.querySelector('.vramscope-Layers-bar');
    more(view).click();
    // the rows already drawn stay (appended to, not rebuilt)
    expect(view.node.querySelector('.vramscope-Layers-bar')).toBe(firstRow);
    // after a change of rows and a filter, still what a view drawn at once shows
    view.layers = sequential(999, i => (i % 7) * 1000 + i);
    view.filter = '1';
    more(view).click();
    more(view).click();
    const fresh = attach(new LayersView());
    fresh.showMore(); // extended while empty: the rows below are drawn in one render
    fresh.showMore();
    fresh.showMore();
    fresh.layers = sequential(999, i => (i % 7) * 1000 + i);
    fresh.filter = '1';
    const drawn = (v: LayersView) =>
      Array.from(
        v.node.querySelectorAll<HTMLElement>('.vramscope-Layers-bar')
      ).map(b => b.outerHTML);
    expect(view.rowLimit).toBe(4 * TREE_ROWS_STEP);
    expect(drawn(view)).toHaveLength(4 * TREE_ROWS_STEP);
    expect(drawn(view)).toEqual(drawn(fresh));
    expect(foot(view)).toBe(foot(fresh));
    expect(more(view).textContent).toBe(more(fresh).textContent);
    view.dispose();
    fresh.dispose();
  });

  it('the rows shown stay as the user extended them across updates', () => {
    const view = attach(new LayersView());
    view.layers = sequential(999);
    more(view).click();
    view.layers = sequential(999, i => 64 * (i + 1));
    expect(bars(view)).toHaveLength(2 * TREE_ROWS_STEP);
    expect(view.rowLimit).toBe(2 * TREE_ROWS_STEP);
    view.dispose();
  });
});

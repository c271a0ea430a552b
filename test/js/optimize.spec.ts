/**
 * The Optimize section (src/optimize/): the per-session model (advice messages, get_advice
 * only while shown, coalesced refreshes, invalid answers), where cells go and how they are
 * inserted, the preview dialog's body, the cards (predicted vs measured, misses) and the
 * batch-size finder's progress, with a fake session standing in for the kernel.
 */
import { MessageLoop } from '@lumino/messaging';
import { Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import { FakeSession } from '../../bench/timeline_update.fake';
import type {
  IAdvice,
  IBatchSearch,
  IOutcome,
  ISuggestion,
  KernelMessage
} from '../../src/protocol';
import {
  costText,
  measuredSavings,
  mistakeCard,
  outcomeCard,
  savingText,
  stepPeakMiss,
  suggestionCard,
  verdicts
} from '../../src/optimize/cards';
import {
  FINDER_KEY,
  INotebookLike,
  insertCell,
  insertables,
  placement
} from '../../src/optimize/insert';
import { OptimizeModel, OptimizeModels } from '../../src/optimize/model';
import { PreviewBody } from '../../src/optimize/preview';
import { searchSummary } from '../../src/optimize/search';
import { OptimizeView } from '../../src/optimize/view';
import type { ConnectionStatus, IMemorySession } from '../../src/tokens';

const MiB = 2 ** 20;
const TRAIN = { cell_id: 'c-train', execution_count: 7 };

function suggestion(partial: Partial<ISuggestion>): ISuggestion {
  return {
    id: 'checkpoint:model.layers',
    technique: 'checkpointing',
    title: 'Checkpoint the 2 TransformerEncoderLayer blocks of model.layers',
    why: ['model.layers saves 40.0 MiB of activations per step'],
    predicted: {
      activation_bytes_before: 40 * MiB,
      activation_bytes_after: 10 * MiB,
      saving_bytes: 30 * MiB,
      step_peak_saving_bytes: 28 * MiB,
      saving_fraction: 0.75
    },
    cost: { text: 'one extra forward of the blocks', factor: 1.33 },
    kind: 'enable',
    code: '# vramscope: checkpoint:model.layers\nfor i, block in enumerate(model.layers):\n    pass\n',
    undo_code: '# vramscope: undo\nmodel.layers = model.layers\n',
    target_cell: null,
    ...partial
  };
}

function outcome(partial: Partial<IOutcome> = {}): IOutcome {
  const s = suggestion({});
  return {
    suggestion_id: s.id,
    technique: s.technique,
    title: s.title,
    predicted: s.predicted,
    before: {
      activation_bytes: 40 * MiB,
      step_peak_bytes: 100 * MiB,
      duration_s: 2,
      ...TRAIN
    },
    after: {
      activation_bytes: 12 * MiB,
      step_peak_bytes: 74 * MiB,
      duration_s: 2.6,
      cell_id: 'c-train',
      execution_count: 9
    },
    miss_fraction: 2 / 30,
    missed: false,
    ...partial
  };
}

function advice(partial: Partial<IAdvice> = {}): IAdvice {
  return {
    model: 'model',
    training_cell: TRAIN,
    names: {
      model: 'model',
      optimizer: 'optimizer',
      loss_fn: null,
      data: null,
      batch: 'batch'
    },
    suggestions: [
      suggestion({}),
      suggestion({
        id: 'autocast',
        technique: 'autocast',
        title: 'bf16 autocast around the forward and loss',
        kind: 'rewrite',
        code: '# vramscope: autocast\nwith torch.autocast("cpu", dtype=torch.bfloat16):\n    loss = model(batch).pow(2).mean()\n',
        undo_code: null,
        predicted: {
          activation_bytes_before: 40 * MiB,
          activation_bytes_after: 20 * MiB,
          saving_bytes: 20 * MiB,
          step_peak_saving_bytes: null,
          saving_fraction: 0.5
        },
        cost: { text: 'bf16 rounding', factor: null }
      })
    ],
    mistakes: [
      {
        id: 'zero_grad',
        title: 'zero_grad() is never called',
        why: 'gradients add up across steps',
        fix_code: 'optimizer.zero_grad(set_to_none=True)',
        cell_id: 'c-other',
        execution_count: 5
      }
    ],
    outcomes: [],
    notes: ['No GradScaler needed: bf16 is supported here.'],
    finder_code:
      'import vramscope\nvramscope.find_batch_size(step, budget="1GiB")',
    compute_ms: 12.5,
    ...partial
  };
}

/** A FakeSession with `messageReceived` and `get_advice` answered from `nextAdvice`. */
class AdviceSession extends FakeSession {
  messageReceived = new Signal<IMemorySession, KernelMessage>(this);
  nextAdvice: unknown = advice();
  /** Resolvers of the `get_advice` requests not answered yet (when `hold` is set). */
  held: (() => void)[] = [];
  hold = false;

  request(method: any, params: any): Promise<any> {
    if (method !== 'get_advice') {
      return super.request(method, params);
    }
    this.requests.push({ method, params });
    const answer = () => ({ advice: this.nextAdvice });
    if (!this.hold) {
      return Promise.resolve(answer());
    }
    return new Promise(resolve => this.held.push(() => resolve(answer())));
  }

  setStatus(status: ConnectionStatus): void {
    this.status = status;
    this.statusChanged.emit(status);
  }

  send(msg: unknown): void {
    this.messageReceived.emit(msg as KernelMessage);
  }

  adviceRequests(): number {
    return this.requests.filter(r => r.method === 'get_advice').length;
  }
}

/** Render a view now (Lumino's update request, sent synchronously). */
const render = (view: Widget): void =>
  MessageLoop.sendMessage(view, Widget.Msg.UpdateRequest);

const flush = async (n = 10): Promise<void> => {
  for (let i = 0; i < n; i++) {
    await Promise.resolve();
  }
};

function cellDone(session: AdviceSession, n: number): void {
  session.addCell({
    cell_id: `c-${n}`,
    execution_count: n,
    start_time: n,
    duration: 0.1,
    ok: true,
    error_type: null,
    oom: false,
    code_head: 'pass',
    devices: {}
  });
}

describe('OptimizeModel', () => {
  afterEach(() => jest.useRealTimers());

  it('asks for advice only while active, once per burst of cells', async () => {
    jest.useFakeTimers();
    const session = new AdviceSession();
    const model = new OptimizeModel(session, { refreshDelayMs: 200 });
    // closed: cells cost no request
    cellDone(session, 1);
    session.setInsight(null);
    jest.advanceTimersByTime(1000);
    await flush();
    expect(session.adviceRequests()).toBe(0);
    expect(model.stale).toBe(true);
    // opened: the stale advice is fetched at once
    model.active = true;
    await flush();
    expect(session.adviceRequests()).toBe(1);
    expect(model.advice?.suggestions).toHaveLength(2);
    expect(model.stale).toBe(false);
    // a cell and its insight: one request after the delay
    cellDone(session, 2);
    session.setInsight(null);
    jest.advanceTimersByTime(199);
    await flush();
    expect(session.adviceRequests()).toBe(1);
    jest.advanceTimersByTime(1);
    await flush();
    expect(session.adviceRequests()).toBe(2);
    // closed again: a pending refresh is cancelled, new cells only mark it stale
    cellDone(session, 3);
    model.active = false;
    jest.advanceTimersByTime(1000);
    await flush();
    expect(session.adviceRequests()).toBe(2);
    expect(model.stale).toBe(true);
    model.dispose();
  });

  it('follows advice and batch_search messages whether active or not', () => {
    const session = new AdviceSession();
    const model = new OptimizeModel(session);
    let changes = 0;
    model.changed.connect(() => changes++);
    const a = advice({ outcomes: [outcome()] });
    session.send({ type: 'advice', advice: a });
    expect(model.advice).toBe(a);
    const search: IBatchSearch = {
      search_id: 's1',
      state: 'running',
      device: 'cpu',
      budget_bytes: 1024 * MiB,
      tried: [{ batch_size: 8, peak_bytes: 100 * MiB, fits: true, oom: false }],
      batch_size: null,
      accumulation_steps: null,
      target_batch: null,
      message: null
    };
    session.send({ type: 'batch_search', search });
    expect(model.search).toBe(search);
    expect(changes).toBe(2);
    expect(session.adviceRequests()).toBe(0);
    model.dispose();
  });

  it('repeats a refresh asked for while one is in flight, once', async () => {
    const session = new AdviceSession();
    session.hold = true;
    const model = new OptimizeModel(session);
    let settled = 0;
    const first = model.refresh().then(() => settled++);
    expect(model.busy).toBe(true);
    void model.refresh().then(() => settled++);
    void model.refresh().then(() => settled++);
    expect(session.adviceRequests()).toBe(1);
    session.held.shift()!();
    await flush();
    // the repeat is in flight: no call has settled on the first answer
    expect(session.adviceRequests()).toBe(2);
    expect(settled).toBe(0);
    session.held.shift()!();
    await first;
    await flush();
    expect(settled).toBe(3);
    expect(model.busy).toBe(false);
    expect(session.adviceRequests()).toBe(2);
    model.dispose();
  });

  it('rejects an invalid answer with a message and keeps the last advice', async () => {
    const session = new AdviceSession();
    const model = new OptimizeModel(session);
    await model.refresh();
    const good = model.advice;
    session.nextAdvice = { ...advice(), suggestions: [{ id: 3 }] };
    await model.refresh();
    expect(model.advice).toBe(good);
    expect(model.error).toMatch(
      /^Could not get advice: the kernel sent invalid advice \(advice\.suggestions\[0\]/
    );
    session.nextAdvice = advice();
    await model.refresh();
    expect(model.error).toBe('');
    model.dispose();
  });

  it('does not ask a disconnected kernel, and asks again once connected', async () => {
    jest.useFakeTimers();
    const session = new AdviceSession();
    session.status = 'restarting';
    const model = new OptimizeModel(session, { refreshDelayMs: 0 });
    model.active = true;
    await flush();
    expect(session.adviceRequests()).toBe(0);
    session.setStatus('connected');
    jest.advanceTimersByTime(1);
    await flush();
    expect(session.adviceRequests()).toBe(1);
    model.dispose();
  });

  it('OptimizeModels keeps one model per session', () => {
    const models = new OptimizeModels();
    const a = new AdviceSession();
    const b = new AdviceSession();
    expect(models.modelFor(a)).toBe(models.modelFor(a));
    expect(models.modelFor(a)).not.toBe(models.modelFor(b));
    const old = models.modelFor(a);
    old.dispose();
    expect(models.modelFor(a)).not.toBe(old);
  });
});

/** A notebook as insertion sees it: cells with ids and execution counts. */
function notebook(
  cells: [string, number | null][],
  active = 0
): INotebookLike & { sources: string[] } {
  const widgets = cells.map(([id, count]) => ({
    model: { id, type: 'code', executionCount: count }
  }));
  const sources = cells.map(() => '');
  return {
    widgets,
    sources,
    activeCellIndex: active,
    model: {
      sharedModel: {
        insertCell: (index: number, cell: { source: string }) => {
          widgets.splice(index, 0, {
            model: { id: `new-${index}`, type: 'code', executionCount: null }
          });
          sources.splice(index, 0, cell.source);
        }
      }
    }
  };
}

describe('insert', () => {
  it('lists suggestions, undo cells, fixes and the finder, ranked', () => {
    const items = insertables(advice());
    expect(items.map(i => i.key)).toEqual([
      'checkpoint:model.layers',
      'autocast',
      'checkpoint:model.layers:undo',
      'mistake:zero_grad',
      FINDER_KEY
    ]);
    expect(items[2].code).toBe(suggestion({}).undo_code);
    expect(insertables(null)).toEqual([]);
  });

  it('offers an applied suggestion only through its undo cell, and keeps its card', () => {
    const applied = { ...advice() };
    applied.suggestions = applied.suggestions.map(s =>
      s.id === 'checkpoint:model.layers' ? { ...s, applied: true } : s
    );
    expect(insertables(applied).map(i => i.key)).toEqual([
      'autocast',
      'checkpoint:model.layers:undo',
      'mistake:zero_grad',
      FINDER_KEY
    ]);
    const card = suggestionCard(suggestion({ applied: true }), 1, 'binary');
    expect(card.classList.contains('vramscope-mod-applied')).toBe(true);
    expect(card.querySelector('.vramscope-Optimize-kind')?.textContent).toBe(
      'applied'
    );
    expect(card.querySelector('.vramscope-Optimize-insert')).toBeNull();
    expect(card.querySelector('.vramscope-Optimize-undo')).not.toBeNull();
    const offered = suggestionCard(suggestion({}), 1, 'binary');
    expect(offered.querySelector('.vramscope-Optimize-insert')).not.toBeNull();
  });

  it('puts enable cells below the active cell and rewrites below the training cell', () => {
    const nb = notebook(
      [
        ['c-a', 1],
        ['c-train', 7],
        ['c-other', 5],
        ['c-b', null]
      ],
      3
    );
    const [enable, rewrite, , fix, finder] = insertables(advice());
    expect(placement(nb, enable)).toEqual({
      index: 4,
      below: 'the active cell (cell 4)'
    });
    expect(placement(nb, rewrite)).toEqual({
      index: 2,
      below: 'the training cell ([7])'
    });
    expect(placement(nb, fix).index).toBe(3);
    expect(placement(nb, finder).index).toBe(2);
    // the training cell's id is unknown (nbclient): found by its execution count
    const byCount = insertables(
      advice({ training_cell: { cell_id: null, execution_count: 7 } })
    );
    const nb2 = notebook([
      ['x', 6],
      ['y', 7]
    ]);
    expect(placement(nb2, byCount[1]).index).toBe(2);
    // gone: below the active cell
    const nb3 = notebook([['z', 1]], 0);
    expect(placement(nb3, rewrite).below).toBe('the active cell ([1])');
  });

  it('names a rewrite target by what it is: the training cell only when it is one', () => {
    const nb = notebook(
      [
        ['c-train', 7],
        ['c-eval', 8],
        ['c-c', null]
      ],
      0
    );
    const evalCell = { cell_id: 'c-eval', execution_count: 8 };
    const inference = suggestion({
      id: 'inference_mode:8',
      kind: 'rewrite',
      target_cell: evalCell
    });
    const onTraining = suggestion({
      id: 'autocast',
      kind: 'rewrite',
      target_cell: { cell_id: 'c-train', execution_count: 7 }
    });
    const free = suggestion({
      id: 'free',
      kind: 'free',
      target_cell: evalCell
    });
    const items = insertables(
      advice({ suggestions: [inference, onTraining, free] })
    );
    expect(items[0].targetRole).toBe('');
    expect(placement(nb, items[0])).toEqual({ index: 2, below: 'cell [8]' });
    expect(placement(nb, items[1])).toEqual({
      index: 1,
      below: 'the training cell ([7])'
    });
    expect(placement(nb, items[2]).below).toBe('cell [8]');
    // the training cell known by its count only (nbclient): still recognised
    const byCount = insertables(
      advice({
        training_cell: { cell_id: null, execution_count: 8 },
        suggestions: [inference]
      })
    );
    expect(byCount[0].targetRole).toBe('the training cell');
    // a target cell never run: named by its position
    const unrun = insertables(
      advice({
        suggestions: [
          suggestion({
            kind: 'rewrite',
            target_cell: { cell_id: 'c-c', execution_count: null }
          })
        ]
      })
    );
    expect(placement(nb, unrun[0]).below).toBe('cell 3');
  });

  it('inserts the exact code as a new code cell, makes it active, runs nothing', () => {
    const nb = notebook(
      [
        ['c-a', 1],
        ['c-train', 7],
        ['c-b', 8]
      ],
      2
    );
    const rewrite = insertables(advice())[1];
    expect(insertCell(nb, rewrite)).toBe(2);
    expect(nb.sources[2]).toBe(rewrite.code);
    expect(nb.widgets).toHaveLength(4);
    expect(nb.activeCellIndex).toBe(2);
    expect(nb.widgets[2].model.type).toBe('code');
  });
});

describe('PreviewBody', () => {
  it('shows the code and where it goes, and follows the picker', () => {
    const items = insertables(advice());
    const body = new PreviewBody({
      items,
      selected: 'autocast',
      placement: item =>
        item.key === 'autocast' ? 'the training cell ([7])' : 'the active cell'
    });
    Widget.attach(body, document.body);
    const code = body.node.querySelector('.vramscope-OptimizePreview-code')!;
    const where = body.node.querySelector('.vramscope-OptimizePreview-where')!;
    expect(code.textContent).toBe(items[1].code);
    expect(where.textContent).toBe('Goes below the training cell ([7]).');
    expect(body.getValue()).toBe(items[1]);
    const pick = body.node.querySelector('select')!;
    expect(pick.hidden).toBe(false);
    pick.value = 'mistake:zero_grad';
    pick.dispatchEvent(new Event('change'));
    expect(code.textContent).toBe('optimizer.zero_grad(set_to_none=True)');
    expect(body.getValue().key).toBe('mistake:zero_grad');
    body.dispose();
    // a single candidate: no picker
    const one = new PreviewBody({
      items: items.slice(0, 1),
      selected: items[0].key,
      placement: () => 'x'
    });
    expect(one.node.querySelector('select')!.hidden).toBe(true);
  });
});

describe('cards', () => {
  it('says the predicted saving in bytes and percent', () => {
    expect(savingText(suggestion({}).predicted, 'binary')).toBe(
      'saves 30.0 MiB (75%) · activations 40.0 MiB → 10.0 MiB · step peak −28.0 MiB'
    );
  });

  it("names a mistake's cell once", () => {
    const base = {
      id: 'eval',
      why: 'autograd saved activations',
      fix_code: null,
      cell_id: 'c-eval',
      execution_count: 7
    };
    const title = (t: string) =>
      mistakeCard({ ...base, title: t }).querySelector(
        '.vramscope-Optimize-title'
      )!.textContent;
    expect(title('Evaluation with autograd on in cell [7]')).toBe(
      'Evaluation with autograd on in cell [7]'
    );
    expect(title('zero_grad() is never called')).toBe(
      'zero_grad() is never called (cell [7])'
    );
    // another cell named in the title is not this one
    expect(title('A leak from cell [17]')).toBe(
      'A leak from cell [17] (cell [7])'
    );
  });

  it('gives the cost factor once', () => {
    expect(costText({ text: 'one extra forward', factor: 1.33 })).toBe(
      'one extra forward (×1.33 time)'
    );
    expect(
      costText({ text: 'one extra forward (~1.33x step time)', factor: 1.33 })
    ).toBe('one extra forward (~1.33x step time)');
    expect(costText({ text: 'none', factor: null })).toBe('none');
  });

  it('measures savings from before/after and says when a prediction missed', () => {
    const hit = outcome();
    expect(measuredSavings(hit)).toEqual({
      activations: 28 * MiB,
      stepPeak: 26 * MiB,
      durationRatio: 1.3
    });
    const texts = (o: IOutcome) => verdicts(o).map(v => v.text);
    expect(texts(hit)).toEqual([
      'Saved activations: within 7% of the prediction.',
      'Step peak: within 7% of the prediction.'
    ]);
    expect(stepPeakMiss(hit)).toBeCloseTo(2 / 28, 10);
    expect(texts(outcome({ miss_fraction: 0.004 }))[0]).toBe(
      'Saved activations: as predicted (within 0.5%).'
    );
    const miss = outcome({ miss_fraction: 0.34, missed: true });
    expect(verdicts(miss)[0]).toEqual({
      key: 'activations',
      text: 'Saved activations: the prediction missed by 34% (more than 20%).',
      missed: true
    });
    // the step peak is checked on its own: 28 MiB predicted, 14 MiB measured
    const peakMiss = outcome({
      after: { ...outcome().after!, step_peak_bytes: 86 * MiB }
    });
    expect(verdicts(peakMiss)[1]).toEqual({
      key: 'step_peak',
      text: 'Step peak: the prediction missed by 50% (more than 20%).',
      missed: true
    });
    // no step-peak prediction: no step-peak verdict
    const noPeak = outcome({
      predicted: { ...outcome().predicted, step_peak_saving_bytes: null }
    });
    expect(verdicts(noPeak).map(v => v.key)).toEqual(['activations']);
    // the run before had no measured step (advice opened after it): no step-peak figures,
    // and the verdict says so rather than comparing a first cell's rise with a step
    const unmeasured = outcome({
      before: { ...outcome().before!, step_peak_bytes: null },
      after: { ...outcome().after!, step_peak_bytes: null }
    });
    expect(measuredSavings(unmeasured).stepPeak).toBeNull();
    expect(stepPeakMiss(unmeasured)).toBeNull();
    expect(verdicts(unmeasured)[1]).toEqual({
      key: 'step_peak',
      text:
        'Step peak: not compared (the run before this change had no measured step). ' +
        'Run the training cell once with this section open before applying a suggestion.',
      missed: false
    });
    const card = outcomeCard(unmeasured, 'binary');
    expect(card.querySelector('tr[data-key="step_peak"]')!.textContent).toBe(
      'Step peak saving28.0 MiB–'
    );
    expect(card.classList.contains('vramscope-mod-missed')).toBe(false);
    const pending = outcome({ after: null, miss_fraction: null });
    expect(measuredSavings(pending).activations).toBeNull();
    expect(texts(pending)).toEqual([
      'Run the training cell again to measure the change.'
    ]);
    const note =
      'your training cell [9] re-created `optimizer`, so this change was not in the run';
    const undone = outcome({ verdict: 'undone', note, missed: false });
    expect(texts(undone)).toEqual([`Not measured: ${note}`]);
    expect(verdicts(undone)[0].missed).toBe(true); // drawn as a miss, never green
    const freed = outcomeCard(
      outcome({
        technique: 'free_holders',
        before: null,
        freed_bytes: 16 * 1024,
        miss_fraction: 0.9999,
        missed: true
      }),
      'binary'
    );
    expect(
      [...freed.querySelectorAll('tr[data-key]')].map(r =>
        r.getAttribute('data-key')
      )
    ).toEqual(['freed']);
    expect(
      freed.querySelector('tr[data-key="freed"]')?.getAttribute('data-measured')
    ).toBe(String(16 * 1024));
    expect(freed.classList.contains('vramscope-mod-missed')).toBe(true);
  });

  it('summarises a batch-size search', () => {
    const search: IBatchSearch = {
      search_id: 's',
      state: 'done',
      device: 'cpu',
      budget_bytes: 1024 * MiB,
      tried: [
        { batch_size: 8, peak_bytes: 300 * MiB, fits: true, oom: false },
        { batch_size: 16, peak_bytes: 600 * MiB, fits: true, oom: false },
        { batch_size: 32, peak_bytes: 1200 * MiB, fits: false, oom: false },
        { batch_size: 24, peak_bytes: 900 * MiB, fits: true, oom: false }
      ],
      batch_size: 24,
      accumulation_steps: 3,
      target_batch: 64,
      message: null
    };
    expect(searchSummary(search, 'binary')).toBe(
      'Batch size 24 fits on cpu (step peak 900.0 MiB of 1.0 GiB). 3 accumulation steps reach the target batch of 64.'
    );
    expect(
      searchSummary({ ...search, state: 'running', batch_size: null }, 'binary')
    ).toBe('Searching on cpu within 1.0 GiB: 4 sizes tried…');
    expect(
      searchSummary(
        {
          ...search,
          state: 'failed',
          batch_size: null,
          message: 'batch 1 does not fit'
        },
        'binary'
      )
    ).toBe('The search failed: batch 1 does not fit');
  });
});

describe('OptimizeView', () => {
  function setup(): {
    view: OptimizeView;
    session: AdviceSession;
    inserted: string[];
  } {
    const inserted: string[] = [];
    const view = new OptimizeView({
      models: new OptimizeModels({ refreshDelayMs: 0 }),
      onInsert: key => inserted.push(key)
    });
    const session = new AdviceSession();
    Widget.attach(view, document.body);
    view.setSession(session);
    return { view, session, inserted };
  }
  const $ = (view: Widget, sel: string) =>
    Array.from(view.node.querySelectorAll<HTMLElement>(sel));

  it('renders ranked suggestions, mistakes, names and notes once shown', async () => {
    const { view, session } = setup();
    await flush();
    render(view);
    expect(session.adviceRequests()).toBe(1);
    const cards = $(view, '.vramscope-Optimize-suggestion');
    expect(cards.map(c => c.dataset.id)).toEqual([
      'checkpoint:model.layers',
      'autocast'
    ]);
    expect(cards[0].dataset.savingBytes).toBe(String(30 * MiB));
    expect(
      cards[0].querySelector('.vramscope-Optimize-saving')!.textContent
    ).toContain('saves 30.0 MiB (75%)');
    expect(
      cards[0].querySelector('.vramscope-Optimize-cost')!.textContent
    ).toBe('Cost: one extra forward of the blocks (×1.33 time)');
    expect(
      cards[0].querySelector('.vramscope-Optimize-why li')!.textContent
    ).toBe('model.layers saves 40.0 MiB of activations per step');
    // undo only for the enable cell
    expect(cards[0].querySelector('.vramscope-Optimize-undo')).not.toBeNull();
    expect(cards[1].querySelector('.vramscope-Optimize-undo')).toBeNull();
    expect($(view, '.vramscope-Optimize-mistake')[0].textContent).toContain(
      'zero_grad() is never called (cell [5])'
    );
    const names = $(view, '.vramscope-Optimize-names')[0];
    expect(names.textContent).toBe(
      'In your code: model, optimizer, batch, training cell [7]'
    ); // a name that says what it is is not doubled ("model model")
    // the variable names in code style, as text
    expect(
      Array.from(names.querySelectorAll('code')).map(c => c.textContent)
    ).toEqual(['model', 'optimizer', 'batch']);
    const meta = $(view, '.vramscope-Optimize-meta')[0];
    expect(meta.textContent).toBe('model · advice in 13 ms');
    expect(meta.querySelector('code')!.textContent).toBe('model');
    expect($(view, '.vramscope-Optimize-note')[0].textContent).toContain(
      'GradScaler'
    );
    expect(
      (view.node.querySelector('.vramscope-Optimize-outcomes') as HTMLElement)
        .hidden
    ).toBe(true);
    expect(view.node.dataset.state).toBe('ready');
    view.dispose();
  });

  it('hands the clicked button key to onInsert', async () => {
    const { view, inserted } = setup();
    await flush();
    render(view);
    for (const sel of [
      '.vramscope-Optimize-suggestion[data-id="autocast"] .vramscope-Optimize-insert',
      '.vramscope-Optimize-undo',
      '.vramscope-Optimize-fix',
      '.vramscope-Optimize-findBatch'
    ]) {
      (view.node.querySelector(sel) as HTMLButtonElement).click();
    }
    expect(inserted).toEqual([
      'autocast',
      'checkpoint:model.layers:undo',
      'mistake:zero_grad',
      FINDER_KEY
    ]);
    view.dispose();
  });

  it('shows predicted vs measured, a miss, and the finder progress', async () => {
    const { view, session } = setup();
    await flush();
    session.send({
      type: 'advice',
      advice: advice({
        outcomes: [
          outcome(),
          outcome({
            suggestion_id: 'autocast',
            title: 'bf16 autocast',
            miss_fraction: 0.5,
            missed: true
          })
        ]
      })
    });
    session.send({
      type: 'batch_search',
      search: {
        search_id: 's',
        state: 'running',
        device: 'cpu',
        budget_bytes: 1024 * MiB,
        tried: [
          { batch_size: 8, peak_bytes: 512 * MiB, fits: true, oom: false },
          { batch_size: 16, peak_bytes: null, fits: false, oom: true }
        ],
        batch_size: null,
        accumulation_steps: null,
        target_batch: null,
        message: null
      }
    });
    render(view);
    const outcomes = $(view, '.vramscope-Optimize-outcome');
    expect(outcomes).toHaveLength(2);
    const row = (o: HTMLElement, key: string) =>
      o.querySelector(`tr[data-key="${key}"]`) as HTMLTableRowElement;
    expect(row(outcomes[0], 'activations').dataset.measured).toBe(
      String(28 * MiB)
    );
    expect(row(outcomes[0], 'activations').textContent).toBe(
      'Saved activations30.0 MiB28.0 MiB'
    );
    expect(row(outcomes[0], 'step_peak').textContent).toBe(
      'Step peak saving28.0 MiB26.0 MiB'
    );
    expect(row(outcomes[0], 'duration').textContent).toBe(
      'Cell duration2.0 s → 2.6 s (×1.30)'
    );
    expect(outcomes[0].classList.contains('vramscope-mod-missed')).toBe(false);
    expect(outcomes[1].classList.contains('vramscope-mod-missed')).toBe(true);
    const missed = outcomes[1].querySelector(
      '.vramscope-Optimize-verdict[data-key="activations"]'
    )!;
    expect(missed.textContent).toBe(
      'Saved activations: the prediction missed by 50% (more than 20%).'
    );
    expect(missed.classList.contains('vramscope-mod-missed')).toBe(true);
    expect(
      outcomes[1]
        .querySelector('.vramscope-Optimize-verdict[data-key="step_peak"]')!
        .classList.contains('vramscope-mod-missed')
    ).toBe(false);
    const trials = $(view, '.vramscope-Optimize-trial');
    expect(trials.map(t => t.dataset.batchSize)).toEqual(['8', '16']);
    expect(
      (trials[0].querySelector('.vramscope-Optimize-trialFill') as HTMLElement)
        .style.width
    ).toBe('50%');
    expect(trials[1].textContent).toContain('out of memory');
    view.dispose();
  });

  it('makes no request while hidden (a collapsed section) and refreshes when shown', async () => {
    const { view, session } = setup();
    await flush();
    expect(session.adviceRequests()).toBe(1);
    view.hide();
    expect(view.model!.active).toBe(false);
    cellDone(session, 10);
    await new Promise(r => setTimeout(r, 5));
    expect(session.adviceRequests()).toBe(1);
    view.show();
    await flush();
    expect(session.adviceRequests()).toBe(2);
    // a cell while shown asks again
    cellDone(session, 11);
    await new Promise(r => setTimeout(r, 5));
    expect(session.adviceRequests()).toBe(3);
    // another session: the old model goes inactive
    const old = view.model!;
    view.setSession(new AdviceSession());
    expect(old.active).toBe(false);
    view.setSession(null);
    render(view);
    expect(
      view.node.querySelector('.vramscope-Optimize-message')!.textContent
    ).toBe('No notebook selected.');
    view.dispose();
  });

  it('says what to do when there is nothing to suggest, and shows request errors', async () => {
    const { view, session } = setup();
    session.nextAdvice = advice({
      suggestions: [],
      mistakes: [],
      finder_code: null
    });
    await view.model!.refresh();
    render(view);
    const message = view.node.querySelector('.vramscope-Optimize-message')!;
    expect(message.textContent).toMatch(
      /^Nothing to suggest yet: run a training step/
    );
    expect(
      (view.node.querySelector('.vramscope-Optimize-finder') as HTMLElement)
        .hidden
    ).toBe(true);
    // no model found: no timing (the kernel's empty answer says 0 ms)
    session.nextAdvice = advice({
      model: null,
      suggestions: [],
      mistakes: [],
      finder_code: null,
      compute_ms: 0
    });
    await view.model!.refresh();
    render(view);
    expect(
      view.node.querySelector('.vramscope-Optimize-meta')!.textContent
    ).toBe('');
    // a name that looks like markup stays text
    session.nextAdvice = advice({
      model: '<b>m</b>',
      compute_ms: 61.14
    });
    await view.model!.refresh();
    render(view);
    const meta = view.node.querySelector('.vramscope-Optimize-meta')!;
    expect(meta.textContent).toBe('model <b>m</b> · advice in 61 ms');
    expect(meta.querySelector('b')).toBeNull();
    session.nextAdvice = 'nope';
    await view.model!.refresh();
    render(view);
    expect(message.textContent).toMatch(/^Could not get advice: /);
    view.dispose();
  });
});

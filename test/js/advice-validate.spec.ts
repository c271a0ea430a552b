/**
 * The Optimize messages (protocol 1.1): `advice` and `batch_search` pass the front end's
 * validator when well formed, and each broken field is reported with its path.
 */
import { IAdvice, IBatchSearch } from '../../src/protocol';
import { validateAdvice, validateKernelMessage } from '../../src/validate';

function predicted(): IAdvice['suggestions'][number]['predicted'] {
  return {
    activation_bytes_before: 8_388_608,
    activation_bytes_after: 2_097_152,
    saving_bytes: 6_291_456,
    step_peak_saving_bytes: 6_291_456,
    saving_fraction: 0.75
  };
}

function advice(): IAdvice {
  const ref = { cell_id: 'c-train', execution_count: 4 };
  return {
    model: 'model',
    training_cell: ref,
    names: {
      model: 'model',
      optimizer: 'opt',
      loss_fn: 'loss_fn',
      data: 'loader',
      batch: 'x'
    },
    suggestions: [
      {
        id: 'checkpoint:model.blocks',
        technique: 'checkpointing',
        title: 'Checkpoint the 4 Block layers of model.blocks',
        why: ['model.blocks saves 8.0 MiB of activations per step'],
        predicted: predicted(),
        cost: {
          text: 'one extra forward of the blocks (~1.33x step time)',
          factor: 1.33
        },
        kind: 'enable',
        code: '# vramscope: checkpoint:model.blocks\nimport torch\n',
        undo_code: '# vramscope: undo checkpoint:model.blocks\n',
        target_cell: null
      },
      {
        id: 'autocast',
        technique: 'autocast',
        title: 'bf16 autocast',
        why: [],
        predicted: {
          ...predicted(),
          activation_bytes_after: null,
          saving_fraction: null
        },
        cost: { text: 'none', factor: null },
        kind: 'rewrite',
        code: '# vramscope: autocast\n',
        undo_code: null,
        target_cell: ref
      }
    ],
    mistakes: [
      {
        id: 'zero_grad_missing',
        title: 'zero_grad() is never called',
        why: 'gradients add up across steps',
        fix_code: 'opt.zero_grad(set_to_none=True)',
        cell_id: 'c-train',
        execution_count: 4
      }
    ],
    outcomes: [
      {
        suggestion_id: 'checkpoint:model.blocks',
        technique: 'checkpointing',
        title: 'Checkpoint',
        predicted: predicted(),
        before: {
          activation_bytes: 8_388_608,
          step_peak_bytes: 9_000_000,
          duration_s: 0.5,
          ...ref
        },
        after: null,
        miss_fraction: null,
        missed: false
      }
    ],
    notes: ['no CUDA device: fp16 is not offered'],
    finder_code: 'import vramscope\n',
    compute_ms: 3.5
  };
}

function search(): IBatchSearch {
  return {
    search_id: 's1',
    state: 'done',
    device: 'cpu',
    budget_bytes: 1 << 30,
    tried: [
      { batch_size: 8, peak_bytes: 1000, fits: true, oom: false },
      { batch_size: 4096, peak_bytes: null, fits: false, oom: true }
    ],
    batch_size: 8,
    accumulation_steps: 4,
    target_batch: 32,
    message: null
  };
}

function expectError(raw: unknown, fragment: string): void {
  const result = validateKernelMessage(raw);
  expect(typeof result).toBe('string');
  expect(result as string).toContain(fragment);
}

describe('advice message', () => {
  it('accepts a full advice', () => {
    const msg = { type: 'advice', advice: advice() };
    expect(validateKernelMessage(msg)).toBe(msg);
    expect(validateAdvice(msg.advice)).toBe(msg.advice);
  });

  it('accepts an empty advice (no model, nothing to suggest)', () => {
    const empty: IAdvice = {
      ...advice(),
      model: null,
      training_cell: null,
      names: {
        model: null,
        optimizer: null,
        loss_fn: null,
        data: null,
        batch: null
      },
      suggestions: [],
      mistakes: [],
      outcomes: [],
      finder_code: null
    };
    expect(typeof validateAdvice(empty)).not.toBe('string');
  });

  const broken: [string, (a: any) => void, string][] = [
    [
      'a negative saving',
      a => (a.suggestions[0].predicted.saving_bytes = -1),
      'saving_bytes'
    ],
    [
      'a fractional byte count',
      a => (a.suggestions[0].predicted.activation_bytes_after = 1.5),
      'activation_bytes_after'
    ],
    [
      'a fraction over 1',
      a => (a.suggestions[0].predicted.saving_fraction = 1.5),
      'saving_fraction'
    ],
    [
      'an unknown kind',
      a => (a.suggestions[0].kind = 'magic'),
      'suggestions[0].kind'
    ],
    [
      'why not a list',
      a => (a.suggestions[1].why = 'because'),
      'suggestions[1].why'
    ],
    [
      'a missing code',
      a => delete a.suggestions[0].code,
      'suggestions[0].code: missing'
    ],
    [
      'a cost factor NaN',
      a => (a.suggestions[0].cost.factor = NaN),
      'cost.factor'
    ],
    [
      'a bad target cell',
      a => (a.suggestions[1].target_cell = { cell_id: 3 }),
      'target_cell'
    ],
    [
      'a missing name',
      a => delete a.names.optimizer,
      'names.optimizer: missing'
    ],
    [
      'a mistake without why',
      a => (a.mistakes[0].why = null),
      'mistakes[0].why'
    ],
    [
      'missed not a boolean',
      a => (a.outcomes[0].missed = 'no'),
      'outcomes[0].missed'
    ],
    [
      'a measured duration < 0',
      a => (a.outcomes[0].before.duration_s = -1),
      'outcomes[0].before.duration_s'
    ],
    ['notes not strings', a => (a.notes = [1]), 'notes[0]'],
    ['no compute_ms', a => delete a.compute_ms, 'compute_ms: missing'],
    ['finder_code a number', a => (a.finder_code = 0), 'finder_code']
  ];

  it.each(broken)('rejects %s', (_name, breakIt, fragment) => {
    const a = advice();
    breakIt(a);
    expectError({ type: 'advice', advice: a }, fragment);
  });

  it('rejects a message without advice', () => {
    expectError({ type: 'advice' }, 'advice.advice: missing');
  });
});

describe('batch_search message', () => {
  it('accepts a running and a finished search', () => {
    const done = { type: 'batch_search', search: search() };
    expect(validateKernelMessage(done)).toBe(done);
    const running = {
      type: 'batch_search',
      search: {
        ...search(),
        state: 'running',
        batch_size: null,
        accumulation_steps: null
      }
    };
    expect(typeof validateKernelMessage(running)).not.toBe('string');
  });

  const broken: [string, (s: any) => void, string][] = [
    ['an unknown state', s => (s.state = 'paused'), 'search.state'],
    ['a negative budget', s => (s.budget_bytes = -5), 'budget_bytes'],
    [
      'a trial without fits',
      s => delete s.tried[0].fits,
      'tried[0].fits: missing'
    ],
    [
      'a fractional batch size',
      s => (s.tried[1].batch_size = 2.5),
      'tried[1].batch_size'
    ],
    ['a string message number', s => (s.message = 7), 'search.message']
  ];

  it.each(broken)('rejects %s', (_name, breakIt, fragment) => {
    const s = search();
    breakIt(s);
    expectError({ type: 'batch_search', search: s }, fragment);
  });
});

import { MessageLoop } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { FakeSession } from '../../bench/timeline_update.fake';
import type {
  IEstimate,
  IEstimateParams,
  IInsight,
  IRequestMap,
  Method
} from '../../src/protocol';
import {
  estimateBars,
  formatParamCount,
  GIB,
  MIN_VISIBLE_PERCENT,
  parseParamCount,
  verdictState
} from '../../src/estimator/math';
import { EstimatorView } from '../../src/estimator/view';
import { validateEstimate } from '../../src/validate';

/**
 * The kernel's arithmetic for Adam under mixed precision (ZeRO paper, K = 12), to answer the
 * fake session's `estimate` requests with the figures the kernel computes.
 */
function zeroEstimate(params: IEstimateParams): IEstimate {
  const psi = params.params ?? 1e9;
  const n = params.n_gpus ?? 1;
  const stage = params.zero_stage ?? 0;
  const shard = (bytes: number, from: number) =>
    stage >= from ? Math.ceil(bytes / n) : bytes;
  const parts = {
    parameters: shard(2 * psi, 3),
    gradients: shard(2 * psi, 2),
    optimizer_state: shard(8 * psi, 1),
    master_weights: shard(4 * psi, 1),
    activations: 0
  };
  const total = Object.values(parts).reduce((a, b) => a + b, 0);
  return {
    param_count: psi,
    precision: params.precision ?? 'bf16-mixed',
    optimizer: params.optimizer ?? 'adamw',
    zero_stage: stage,
    n_gpus: n,
    offload: [],
    batch_size: params.batch_size ?? null,
    seq_len: null,
    ...parts,
    total,
    cpu_offloaded: 0,
    activation_source: 'none',
    activation_per_sample: null,
    model: params.model ?? null,
    notes: ['activations not included: no measurement']
  };
}

class EstimatingSession extends FakeSession {
  request<M extends Method>(
    method: M,
    params: IRequestMap[M]['params']
  ): Promise<IRequestMap[M]['result']> {
    if (method !== 'estimate') {
      return super.request(method, params);
    }
    this.requests.push({ method, params });
    const p = params as IEstimateParams;
    if (p.model) {
      return Promise.resolve({
        estimate: {
          ...zeroEstimate({ ...p, params: 124_439_808 }),
          model: p.model
        }
      } as IRequestMap[M]['result']);
    }
    return Promise.resolve({
      estimate: zeroEstimate(p)
    } as IRequestMap[M]['result']);
  }
}

const flush = () => new Promise(resolve => setTimeout(resolve, 0));

function show(view: Widget): void {
  Widget.attach(view, document.body);
  MessageLoop.sendMessage(view, Widget.Msg.AfterShow);
}

function field<T extends HTMLElement>(view: Widget, name: string): T {
  return view.node.querySelector(`[data-field="${name}"]`) as T;
}

function change(el: HTMLInputElement | HTMLSelectElement, value: string) {
  el.value = value;
  el.dispatchEvent(new Event('change'));
}

describe('estimator math', () => {
  it('parses sizes as the kernel does', () => {
    expect(parseParamCount('7B')).toBe(7e9);
    expect(parseParamCount('125M')).toBe(125e6);
    expect(parseParamCount('1.5t')).toBe(1.5e12);
    expect(parseParamCount('350k')).toBe(350000);
    expect(parseParamCount(' 6,700 ')).toBe(6700);
    for (const bad of ['', '7X', '-3B', '0', 'B', '1.2.3M']) {
      expect(parseParamCount(bad)).toBeNull();
    }
    expect(formatParamCount(7e9)).toBe('7B');
    expect(formatParamCount(124_439_808)).toBe('124.4M');
    expect(formatParamCount(350_000)).toBe('350k');
  });

  it('sizes bars against the GPU and says whether it fits', () => {
    // ZeRO-1, 7.5B parameters on 64 GPUs: 31.4 GB a GPU
    const stage1 = zeroEstimate({ params: 7.5e9, n_gpus: 64, zero_stage: 1 });
    const out = estimateBars(stage1, 40 * GIB); // 42.9 GB: it fits
    expect(out.fits).toBe(true);
    expect(out.headroom).toBe(40 * GIB - 31_406_250_000);
    expect(out.gpuPercent).toBe(100);
    // parts are shares of the total; the total is drawn against the GPU
    const params = out.bars.find(b => b.key === 'parameters')!;
    expect(params.share).toBeCloseTo((100 * 15e9) / 31_406_250_000, 10);
    expect(params.percent).toBe(params.share);
    expect(out.bars[5].percent).toBeCloseTo(
      (100 * 31_406_250_000) / (40 * GIB),
      10
    );
    expect(out.bars.reduce((a, b) => a + b.share, 0)).toBeCloseTo(200, 6);
    // a tiny part that is not 0 stays visible; a 0 part is not drawn
    const tiny = estimateBars(
      { ...stage1, activations: 1000, gradients: 0 },
      80 * GIB
    );
    const act = tiny.bars.find(b => b.key === 'activations')!;
    expect(act.share).toBeLessThan(0.001);
    expect(act.percent).toBe(MIN_VISIBLE_PERCENT);
    expect(tiny.bars.find(b => b.key === 'gradients')!.percent).toBe(0);
    // a total far below the GPU stays visible too, next to the GPU marker at 100%
    const few = estimateBars({ ...stage1, total: 6 * 2 ** 20 }, 16 * GIB);
    expect(few.bars[5].percent).toBe(MIN_VISIBLE_PERCENT);
    expect(few.gpuPercent).toBe(100);
    expect(verdictState(false, false)).toBe('info');
    expect(verdictState(false, true)).toBe('nofit');
    expect(verdictState(true, true)).toBe('fits');
    expect(out.bars.map(b => b.key)).toEqual([
      'parameters',
      'gradients',
      'optimizer_state',
      'master_weights',
      'activations',
      'total'
    ]);
    const small = estimateBars(stage1, 24 * GIB); // 25.8 GB: does not fit
    expect(small.fits).toBe(false);
    expect(small.bars[5].percent).toBe(100);
    expect(small.gpuPercent).toBeCloseTo((100 * 24 * GIB) / 31_406_250_000, 10);
  });

  it('validates estimates', () => {
    const good = zeroEstimate({ params: 1000 });
    expect(validateEstimate(good)).toBe(good);
    expect(validateEstimate({ ...good, total: -1 })).toMatch(/estimate.total/);
    expect(validateEstimate({ ...good, activation_source: 'guess' })).toMatch(
      /activation_source/
    );
    const { notes, ...noNotes } = good;
    expect(notes.length).toBe(1);
    expect(validateEstimate(noNotes)).toBe('estimate.notes: missing');
  });
});

describe('EstimatorView', () => {
  afterEach(() => {
    document.body.innerHTML = '';
  });

  it('asks nothing while hidden, then estimates a typed size', async () => {
    const session = new EstimatingSession();
    const view = new EstimatorView();
    view.setSession(session);
    await flush();
    expect(session.requests).toEqual([]);
    show(view);
    await flush();
    expect(session.requests).toEqual([
      {
        method: 'estimate',
        // no precision / optimizer chosen: the kernel's measured or default ones
        params: {
          params: 7e9,
          batch_size: null,
          n_gpus: 1,
          zero_stage: 0,
          offload: null
        }
      }
    ]);
    const verdict = view.node.querySelector('.vramscope-Estimator-verdict')!;
    // 16 bytes x 7B = 112 GB = 104.3 GiB > 80 GiB
    // the empty state: an explanation, and the example's verdict as information
    expect(
      view.node.querySelector('.vramscope-Estimator-empty')!.textContent
    ).toContain('Type a parameter count');
    expect(verdict.textContent).toBe('Needs more than 80.0 GiB: 24.3 GiB over');
    expect(verdict.getAttribute('data-fits')).toBe('false');
    expect(verdict.getAttribute('data-state')).toBe('info');
    expect(verdict.classList.contains('vramscope-mod-nofit')).toBe(false);
    const rows = view.node.querySelectorAll('.vramscope-Estimator-row');
    expect(rows.length).toBe(6);
    const total = view.node.querySelector(
      '[data-part="total"] .vramscope-Estimator-value'
    )!;
    expect(total.textContent).toBe('104.3 GiB');

    // 8 GPUs, ZeRO-3: 14 GB a GPU fits in 16 GiB
    change(field(view, 'gpus'), '8');
    change(field(view, 'stage'), '3');
    change(field(view, 'gpu'), '16');
    await flush();
    const last = session.requests[session.requests.length - 1];
    expect(last.params).toMatchObject({ n_gpus: 8, zero_stage: 3 });
    const fits = view.node.querySelector('.vramscope-Estimator-verdict')!;
    expect(fits.getAttribute('data-fits')).toBe('true');
    expect(fits.textContent).toBe('Fits in 16.0 GiB: 3.0 GiB free');
    const fill = view.node.querySelector(
      '[data-part="total"] .vramscope-Estimator-fill'
    ) as HTMLElement;
    expect(fill.style.width).toBe(`${((100 * 14e9) / (16 * GIB)).toFixed(2)}%`);

    // a custom GPU size, and a size that is not one
    change(field(view, 'gpu'), 'custom');
    change(field(view, 'custom-gpu'), '12');
    await flush();
    expect(
      view.node
        .querySelector('.vramscope-Estimator-verdict')!
        .getAttribute('data-fits')
    ).toBe('false');
    const count = session.requests.length;
    change(field(view, 'size'), 'seven');
    await flush();
    expect(session.requests.length).toBe(count);
    expect(
      view.node.querySelector('.vramscope-Estimator-error')!.textContent
    ).toBe('Type a model size such as 7B, 125M or 350k.');
    view.dispose();
  });

  it('follows the watched model and says when no kernel is connected', async () => {
    const session = new EstimatingSession();
    const insight: IInsight = {
      model: 'gpt',
      models: [
        { name: 'gpt', type: 'GPT2LMHeadModel', param_bytes: 497_759_232 },
        { name: 'probe', type: 'Linear', param_bytes: 4096 }
      ],
      layers: [],
      breakdown: {},
      holders: [],
      scan_ms: 1,
      skipped: null
    };
    session.setInsight(insight);
    const view = new EstimatorView();
    view.setSession(session);
    show(view);
    await flush();
    expect(session.requests[0].params).toMatchObject({ model: 'gpt' });
    const source = field<HTMLSelectElement>(view, 'source');
    expect(Array.from(source.options).map(o => o.value)).toEqual([
      'gpt',
      'probe',
      ''
    ]);
    expect(source.value).toBe('gpt');
    expect(field<HTMLInputElement>(view, 'size').value).toBe('124.4M');
    expect(field<HTMLInputElement>(view, 'size').disabled).toBe(true);

    change(source, 'probe');
    await flush();
    expect(session.requests[1].params).toMatchObject({ model: 'probe' });

    session.status = 'restarting';
    session.statusChanged.emit('restarting');
    await flush();
    expect(session.requests.length).toBe(2);
    expect(
      view.node.querySelector('.vramscope-Estimator-error')!.textContent
    ).toBe('Connect a notebook kernel with vramscope to estimate.');
    expect(view.node.querySelector('.vramscope-Estimator-bars')).toBeNull();
    view.dispose();
    expect(view.model.isDisposed).toBe(true);
  });
});

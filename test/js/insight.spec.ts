import { Widget } from '@lumino/widgets';

import { FakeSession } from '../../bench/timeline_update.fake';
import type { IBreakdown, IInsight, ILayerInfo } from '../../src/protocol';
import { breakdownParts, BreakdownView } from '../../src/insight/breakdown';
import { HoldersView, sortHolders } from '../../src/insight/holders';
import { LayersView, selectLayers } from '../../src/insight/layers';
import {
  buildLayerTree,
  dtypeTag,
  ILayerNode,
  nodeTooltip,
  specialName
} from '../../src/insight/layertree';
import { InsightView } from '../../src/insight/view';

const MiB = 2 ** 20;

function layer(
  path: string,
  saved: number,
  peak = saved,
  type = 'Linear'
): ILayerInfo {
  return {
    path,
    type,
    saved_bytes: saved,
    peak_saved_bytes: peak,
    output_shape: [8, 128, 256],
    param_bytes: 4 * MiB,
    grad_bytes: 4 * MiB
  };
}

const LAYERS: ILayerInfo[] = [
  layer('encoder.layers.0.self_attn', 19 * MiB, 19 * MiB, 'MultiheadAttention'),
  layer('encoder.layers.0.linear1', 8 * MiB),
  layer('encoder.layers.1.self_attn', 21 * MiB, 30 * MiB, 'MultiheadAttention'),
  layer('encoder.layers.1.linear1', 8 * MiB, 12 * MiB),
  layer('head', 0, 2 * MiB),
  layer('embed', 1 * MiB, 1 * MiB, 'Embedding')
];

const CUDA: IBreakdown = {
  total_bytes: 1000 * MiB,
  parameters: 300 * MiB,
  gradients: 300 * MiB,
  optimizer_state: 200 * MiB,
  activations: 150 * MiB,
  other: 50 * MiB,
  reserved_free: 200 * MiB,
  outside_pytorch: 300 * MiB
};

const CPU: IBreakdown = {
  total_bytes: 400 * MiB,
  parameters: 100 * MiB,
  gradients: 0,
  optimizer_state: 0,
  activations: 0,
  other: 300 * MiB
};

const INSIGHT: IInsight = {
  model: 'model',
  models: [
    { name: 'model', type: 'Sequential', param_bytes: 12 * MiB },
    { name: 'head', type: 'Linear', param_bytes: 1024 }
  ],
  layers: LAYERS,
  breakdown: { cpu: CPU, 'cuda:0': CUDA },
  holders: [
    {
      name: 'losses',
      kind: 'graph_retention',
      bytes: 160 * MiB,
      explanation: 'a list of 20 losses keeps their autograd graphs',
      fix: 'losses.append(loss.item())'
    },
    {
      name: 'Out',
      kind: 'output_cache',
      bytes: 512 * MiB,
      explanation: 'Out[3] keeps a tensor',
      fix: '%reset -f out'
    },
    {
      name: 'x',
      kind: 'tensor',
      bytes: 64 * MiB,
      explanation: 'a tensor',
      fix: 'del x'
    }
  ],
  scan_ms: 3.25,
  skipped: null
};

function attach<T extends Widget>(w: T): T {
  Widget.attach(w, document.body);
  return w;
}

describe('selectLayers', () => {
  it('sorts by live bytes, then peak, and cuts to top N', () => {
    const { shown, matched } = selectLayers(LAYERS, '', 3);
    expect(matched).toBe(6);
    expect(shown.map(l => l.path)).toEqual([
      'encoder.layers.1.self_attn',
      'encoder.layers.0.self_attn',
      'encoder.layers.1.linear1'
    ]);
    // equal live bytes: the larger peak first; zero live sorts by peak
    expect(
      selectLayers(LAYERS, '', 10)
        .shown.map(l => l.path)
        .slice(3)
    ).toEqual(['encoder.layers.0.linear1', 'embed', 'head']);
  });

  it('filters on module path (case-insensitive)', () => {
    const { shown, matched } = selectLayers(LAYERS, 'LAYERS.1', 15);
    expect(matched).toBe(2);
    expect(shown.map(l => l.path)).toEqual([
      'encoder.layers.1.self_attn',
      'encoder.layers.1.linear1'
    ]);
  });
});

describe('LayersView', () => {
  it('renders sorted bars with widths and hover details, filter and top N from the DOM', () => {
    const view = attach(new LayersView({ topN: 4, mode: 'flat' }));
    view.layers = LAYERS;
    const rows = () =>
      Array.from(
        view.node.querySelectorAll<HTMLElement>('.vramscope-Layers-bar')
      );
    expect(rows().map(r => r.dataset.path)).toEqual([
      'encoder.layers.1.self_attn',
      'encoder.layers.0.self_attn',
      'encoder.layers.1.linear1',
      'encoder.layers.0.linear1'
    ]);
    const first = rows()[0];
    // scale = the largest of live and peak (30 MiB)
    expect(
      (first.querySelector('.vramscope-Layers-live') as HTMLElement).style.width
    ).toBe('70%');
    expect(
      (first.querySelector('.vramscope-Layers-peak') as HTMLElement).style.width
    ).toBe('100%');
    expect(first.querySelector('.vramscope-Layers-value')!.textContent).toBe(
      '21.0 MiB (peak 30.0 MiB)'
    );
    expect(first.title).toContain(
      'encoder.layers.1.self_attn (MultiheadAttention)'
    );
    expect(first.title).toContain('output shape: [8, 128, 256]');
    expect(first.title).toContain('parameters: 4.0 MiB, gradients: 4.0 MiB');

    const filter = view.node.querySelector(
      '.vramscope-Layers-filter'
    ) as HTMLInputElement;
    filter.value = 'linear';
    filter.dispatchEvent(new Event('input'));
    expect(rows().map(r => r.dataset.path)).toEqual([
      'encoder.layers.1.linear1',
      'encoder.layers.0.linear1'
    ]);
    const top = view.node.querySelector(
      '.vramscope-Layers-topn'
    ) as HTMLInputElement;
    filter.value = '';
    filter.dispatchEvent(new Event('input'));
    top.value = '2';
    top.dispatchEvent(new Event('change'));
    expect(rows()).toHaveLength(2);
    expect(view.node.querySelector('.vramscope-Layers-foot')!.textContent).toBe(
      'Showing 2 of 6 matching (6 layers; 57.0 MiB saved now).'
    );
    view.dispose();
  });
});

describe('layer tree', () => {
  it("names the model's own row by what it holds", () => {
    const own = layer('', 5 * MiB, 5 * MiB, 'GPT2LMHeadModel');
    expect(specialName({ ...own, output_shape: [2, 64, 50257] })).toBe(
      'model output [2, 64, 50257]'
    );
    // a ModelOutput (no shape): a loss computed in forward lands on this row
    expect(specialName({ ...own, output_shape: null } as any)).toBe(
      "model's own forward (outputs, a loss computed in it)"
    );
  });

  const GPT: ILayerInfo[] = [
    {
      ...layer('', 6 * MiB, 6 * MiB, 'GPT2LMHeadModel'),
      output_shape: [2, 64, 50257]
    },
    layer('transformer', 0, 0, 'GPT2Model'),
    layer('transformer.h', 0, 0, 'ModuleList'),
    {
      ...layer('transformer.h.0', 1 * MiB, 1 * MiB, 'GPT2Block'),
      checkpointed: true,
      saved_by_dtype: { bfloat16: 1 * MiB }
    },
    {
      ...layer('transformer.h.0.attn', 3 * MiB, 3 * MiB, 'GPT2Attention'),
      saved_by_dtype: { bfloat16: 2 * MiB, float32: 1 * MiB }
    },
    layer('transformer.h.0.mlp', 4 * MiB, 4 * MiB, 'GPT2MLP'),
    layer('transformer.h.1', 1 * MiB, 1 * MiB, 'GPT2Block'),
    layer('transformer.h.1.attn', 2 * MiB, 2 * MiB, 'GPT2Attention'),
    layer('lm_head', 5 * MiB),
    {
      ...layer('<other>', 12 * MiB, 12 * MiB, ''),
      output_shape: null,
      saved_by_dtype: { float32: 12 * MiB }
    }
  ];

  it('rolls saved bytes up by module path, with named output and loss rows', () => {
    const roots = buildLayerTree(GPT);
    const byPath = new Map<string, ILayerNode>();
    const walk = (n: ILayerNode) => {
      byPath.set(n.path, n);
      n.children.forEach(walk);
    };
    roots.forEach(walk);
    // ground truth: each block's total is the sum of the flat rows under its path
    for (const [path, node] of byPath) {
      if (path === '' || path === '<other>') {
        continue;
      }
      const truth = GPT.filter(
        l => l.path === path || l.path.startsWith(`${path}.`)
      ).reduce((s, l) => s + l.saved_bytes, 0);
      expect(node.total).toBe(truth);
    }
    expect(byPath.get('transformer.h.0')!.total).toBe(8 * MiB);
    expect(byPath.get('transformer')!.total).toBe(11 * MiB);
    // roots sorted by total; the model's own output and the outside row are named
    expect(roots.map(r => r.path)).toEqual([
      '<other>',
      'transformer',
      '',
      'lm_head'
    ]);
    expect(byPath.get('')!.name).toBe('model output [2, 64, 50257]');
    expect(byPath.get('<other>')!.name).toBe('loss and code outside the model');
    // everything adds up to the flat total
    expect(roots.reduce((s, r) => s + r.total, 0)).toBe(
      GPT.reduce((s, l) => s + l.saved_bytes, 0)
    );
    // dtypes roll up, checkpointed blocks are marked (and their parents know)
    const h0 = byPath.get('transformer.h.0')!;
    expect(h0.byDtype).toEqual({ bfloat16: 3 * MiB, float32: 1 * MiB });
    expect(dtypeTag(h0)).toBe('bf16 · f32');
    expect(h0.checkpointed).toBe(true);
    expect(byPath.get('transformer')!.checkpointed).toBe(true);
    expect(byPath.get('transformer.h.1')!.checkpointed).toBe(false);
    expect(nodeTooltip(h0)).toContain('checkpointed');
    expect(nodeTooltip(byPath.get('<other>')!)).toContain('loss');
  });

  it('expands, collapses and filters in the view; the flat list stays exact', () => {
    const view = attach(new LayersView());
    view.layers = GPT;
    const rows = () =>
      Array.from(
        view.node.querySelectorAll<HTMLElement>('.vramscope-Layers-bar')
      );
    const paths = () => rows().map(r => r.dataset.path);
    expect(view.mode).toBe('tree');
    // two levels open: the blocks with their totals, the checkpointed one marked
    expect(paths()).toEqual([
      '<other>',
      'transformer',
      'transformer.h',
      'transformer.h.0',
      'transformer.h.1',
      '',
      'lm_head'
    ]);
    const row = (p: string) => rows().find(r => r.dataset.path === p)!;
    const click = (p: string) =>
      (row(p).querySelector('.vramscope-Layers-expand') as HTMLElement).click();
    expect(row('transformer').dataset.total).toBe(String(11 * MiB));
    expect(row('transformer.h.0').dataset.total).toBe(String(8 * MiB));
    expect(row('').textContent).toContain('model output [2, 64, 50257]');
    expect(
      row('<other>').querySelector('.vramscope-Layers-dtype')!.textContent
    ).toBe('f32');
    expect(
      row('transformer.h.0').querySelector('.vramscope-Layers-ckpt')
    ).not.toBeNull();
    expect(
      row('transformer.h.1').querySelector('.vramscope-Layers-ckpt')
    ).toBeNull();
    // expand a block: its layers; collapse transformer: everything under it goes
    click('transformer.h.0');
    expect(paths()).toContain('transformer.h.0.attn');
    click('transformer');
    expect(paths()).toEqual(['<other>', 'transformer', '', 'lm_head']);
    // a filter shows the matches with their ancestors
    view.filter = 'attn';
    expect(paths()).toEqual([
      'transformer',
      'transformer.h',
      'transformer.h.0',
      'transformer.h.0.attn',
      'transformer.h.1',
      'transformer.h.1.attn'
    ]);
    // the flat exact list: a toggle away, one row per module, bytes adding up
    view.filter = '';
    (view.node.querySelector('.vramscope-Layers-mode') as HTMLElement).click();
    expect(view.mode).toBe('flat');
    view.topN = 100;
    expect(rows()).toHaveLength(GPT.length);
    expect(rows().reduce((s, r) => s + Number(r.dataset.bytes), 0)).toBe(
      GPT.reduce((s, l) => s + l.saved_bytes, 0)
    );
    view.dispose();
  });
});

describe('layer tree defaults', () => {
  const linear = (path: string, saved: number): ILayerInfo => ({
    path,
    type: 'Linear',
    saved_bytes: saved,
    peak_saved_bytes: saved,
    output_shape: [2, 4],
    param_bytes: 80,
    grad_bytes: 80
  });
  const paths = (view: LayersView) =>
    Array.from(
      view.node.querySelectorAll<HTMLElement>('.vramscope-Layers-bar')
    ).map(r => r.dataset.path);

  it('opens blocks first seen in a later message; what the user closed stays closed', () => {
    const view = attach(new LayersView());
    // a first message with only the top rows (the kernel's scan still going on)
    view.layers = [linear('layers', 64), linear('head', 32)];
    expect(paths(view)).toEqual(['layers', 'head']);
    // then the whole tree: the block now has children, and opens as on a first message
    view.layers = [
      linear('layers.0', 32),
      linear('layers.1', 32),
      linear('head', 32)
    ];
    expect(paths(view)).toEqual(['layers', 'layers.0', 'layers.1', 'head']);
    // the user closes it: a new message of the same model keeps it closed
    (
      view.node.querySelector(
        '.vramscope-Layers-bar[data-path="layers"] .vramscope-Layers-expand'
      ) as HTMLElement
    ).click();
    view.layers = [
      linear('layers.0', 48),
      linear('layers.1', 32),
      linear('head', 32)
    ];
    expect(paths(view)).toEqual(['layers', 'head']);
    // another model: its blocks open
    view.layers = [linear('encoder.0', 16), linear('encoder.1', 16)];
    expect(paths(view)).toEqual(['encoder', 'encoder.0', 'encoder.1']);
    view.dispose();
  });
});

describe('breakdown', () => {
  it('parts add up to the total, with CUDA extras', () => {
    const { parts, total, allocated } = breakdownParts(CUDA);
    expect(parts.map(p => p.key)).toEqual([
      'parameters',
      'gradients',
      'optimizer_state',
      'activations',
      'other',
      'reserved_free',
      'outside_pytorch'
    ]);
    expect(total).toBe(1500 * MiB);
    expect(allocated).toBe(1000 * MiB);
    expect(parts.reduce((s, p) => s + p.bytes, 0)).toBe(total);
    expect(parts.reduce((s, p) => s + p.percent, 0)).toBeCloseTo(100, 10);
    expect(parts[0].percent).toBeCloseTo(20, 10);
    // CPU: no extras, total = total_bytes
    const cpu = breakdownParts(CPU);
    expect(cpu.parts).toHaveLength(5);
    expect(cpu.total).toBe(CPU.total_bytes);
  });

  it('renders one block per device with values and percentages', () => {
    const view = attach(new BreakdownView());
    view.breakdown = { cpu: CPU, 'cuda:0': CUDA };
    const devices = Array.from(
      view.node.querySelectorAll<HTMLElement>('.vramscope-Breakdown-device')
    );
    expect(devices.map(d => d.dataset.device)).toEqual(['cuda:0', 'cpu']);
    const cuda = devices[0];
    expect(cuda.querySelector('.vramscope-Breakdown-total')!.textContent).toBe(
      '1.5 GiB (PyTorch allocated 1000.0 MiB)'
    );
    const rows = Array.from(
      cuda.querySelectorAll<HTMLElement>('.vramscope-Breakdown-row')
    );
    const sum = rows.reduce((s, r) => s + Number(r.dataset.bytes), 0);
    expect(sum).toBe(
      Number(
        (cuda.querySelector('.vramscope-Breakdown-total') as HTMLElement)
          .dataset.bytes
      )
    );
    const params = rows.find(r => r.dataset.key === 'parameters')!;
    expect(
      params.querySelector('.vramscope-Breakdown-bytes')!.textContent
    ).toBe('300.0 MiB');
    expect(
      params.querySelector('.vramscope-Breakdown-percent')!.textContent
    ).toBe('20.0%');
    // zero parts keep a legend row but no bar segment
    const cpuSegments = devices[1].querySelectorAll(
      '.vramscope-Breakdown-segment'
    );
    expect(cpuSegments).toHaveLength(2);
    expect((cpuSegments[1] as HTMLElement).style.width).toBe('75%');
    // "Other" split where measured (since 1.1): tensors in no model + the rest, same total
    view.breakdown = { cpu: { ...CPU, other_tensors: 80 * MiB } };
    const sub = Array.from(
      view.node.querySelectorAll<HTMLElement>('.vramscope-Breakdown-subrow')
    );
    expect(sub.map(r => r.dataset.key)).toEqual([
      'other-tensors',
      'other-rest'
    ]);
    expect(sub.map(r => Number(r.dataset.bytes))).toEqual([
      80 * MiB,
      (300 - 80) * MiB
    ]);
    expect(sub[0].textContent).toContain('tensors in no model80.0 MiB20.0%');
    expect(sub[0].title).toContain('What is holding memory');
    expect(
      Array.from(
        view.node.querySelectorAll<HTMLElement>('.vramscope-Breakdown-row')
      ).reduce((s, r) => s + Number(r.dataset.bytes), 0)
    ).toBe(400 * MiB);
    // every part says what it is; "Other" names what it holds
    for (const row of rows) {
      expect(row.title.length).toBeGreaterThan(20);
    }
    const other = rows.find(r => r.dataset.key === 'other')!;
    expect(other.title).toContain('tensors that belong to no model');
    expect(other.title).toContain('runtime');
    expect(rows.find(r => r.dataset.key === 'reserved_free')!.title).toContain(
      'reserved minus allocated'
    );
    view.dispose();
  });
});

describe('InsightView across notebooks', () => {
  it("a failed refresh is said for its notebook only, not for the next one's", async () => {
    const first = new FakeSession();
    first.setInsight(INSIGHT);
    first.request = (() =>
      Promise.reject(new Error('kernel gone'))) as FakeSession['request'];
    const view = attach(new InsightView());
    view.setSession(first);
    await view.refresh();
    const message = () =>
      view.node.querySelector('.vramscope-Insight-message')!.textContent;
    expect(message()).toContain('Refresh failed: kernel gone');
    const second = new FakeSession();
    second.setInsight(INSIGHT);
    view.setSession(second);
    expect(message()).not.toContain('Refresh failed');
    view.dispose();
  });
});

describe('HoldersView', () => {
  it('renders holders by bytes with copyable fixes', async () => {
    expect(sortHolders(INSIGHT.holders).map(h => h.name)).toEqual([
      'Out',
      'losses',
      'x'
    ]);
    const view = attach(new HoldersView());
    view.holders = INSIGHT.holders;
    const rows = Array.from(
      view.node.querySelectorAll<HTMLElement>('.vramscope-Holders-row')
    );
    expect(rows.map(r => r.dataset.name)).toEqual(['Out', 'losses', 'x']);
    expect(rows[1].querySelector('.vramscope-Holders-bytes')!.textContent).toBe(
      '160.0 MiB'
    );
    expect(rows[1].querySelector('code')!.textContent).toBe(
      'losses.append(loss.item())'
    );
    expect(rows[1].textContent).toContain('keeps an autograd graph');
    const written: string[] = [];
    Object.defineProperty(navigator, 'clipboard', {
      value: { writeText: (s: string) => (written.push(s), Promise.resolve()) },
      configurable: true
    });
    (
      rows[0].querySelector('.vramscope-Holders-copy') as HTMLButtonElement
    ).click();
    await Promise.resolve();
    expect(written).toEqual(['%reset -f out']);
    view.holders = [];
    expect(view.node.querySelectorAll('.vramscope-Holders-row')).toHaveLength(
      0
    );
    expect(
      (view.node.querySelector('.vramscope-Holders-empty') as HTMLElement)
        .hidden
    ).toBe(false);
    view.dispose();
  });
});

describe('InsightView', () => {
  it('follows insightChanged, lists models and refreshes with the picked model', async () => {
    const session = new FakeSession();
    const view = attach(new InsightView());
    expect(view.node.classList.contains('vramscope-Insight')).toBe(true);
    view.setSession(session);
    expect(view.node.querySelectorAll('.vramscope-Layers-bar')).toHaveLength(0);
    expect(
      view.node.querySelector('.vramscope-Insight-message')!.textContent
    ).toContain('No model insight yet');

    session.setInsight({
      ...INSIGHT,
      skipped: 'over budget after 12 of 40 variables'
    });
    // the tree: encoder > layers > 1, 0 (two levels open, by total), embed, head
    expect(
      Array.from(
        view.node.querySelectorAll<HTMLElement>('.vramscope-Layers-bar')
      ).map(r => r.dataset.path)
    ).toEqual([
      'encoder',
      'encoder.layers',
      'encoder.layers.1',
      'encoder.layers.0',
      'embed',
      'head'
    ]);
    view.layers.mode = 'flat';
    expect(view.node.querySelectorAll('.vramscope-Layers-bar')).toHaveLength(6);
    expect(view.node.querySelectorAll('.vramscope-Holders-row')).toHaveLength(
      3
    );
    expect(
      view.node.querySelectorAll('.vramscope-Breakdown-device')
    ).toHaveLength(2);
    expect(
      view.node.querySelector('.vramscope-Insight-meta')!.textContent
    ).toBe('scan 3.3 ms');
    expect(
      view.node.querySelector('.vramscope-Insight-message')!.textContent
    ).toBe('Holders scan incomplete: over budget after 12 of 40 variables');

    const select = view.node.querySelector(
      '.vramscope-Insight-model'
    ) as HTMLSelectElement;
    expect(Array.from(select.options).map(o => o.value)).toEqual([
      'model',
      'head'
    ]);
    expect(Array.from(select.options).map(o => o.textContent)).toEqual([
      'model · Sequential · 12.0 MiB',
      'head · Linear · 1.0 KiB'
    ]);
    expect(select.value).toBe('model');
    expect(select.disabled).toBe(false);

    // Refresh asks for the model shown.
    session.nextInsight = { ...INSIGHT, layers: [layer('fc', 3 * MiB)] };
    (
      view.node.querySelector('.vramscope-Insight-refresh') as HTMLButtonElement
    ).click();
    await new Promise(r => setTimeout(r, 0));
    expect(session.requests).toEqual([
      { method: 'get_insight', params: { model: 'model' } }
    ]);
    expect(
      Array.from(
        view.node.querySelectorAll<HTMLElement>('.vramscope-Layers-bar')
      ).map(r => r.dataset.path)
    ).toEqual(['fc']);

    // Picking a model asks the kernel for it (which then watches it).
    session.nextInsight = { ...INSIGHT, model: 'head', layers: [] };
    select.value = 'head';
    select.dispatchEvent(new Event('change'));
    expect(select.value).toBe('head');
    await new Promise(r => setTimeout(r, 0));
    expect(session.requests[1]).toEqual({
      method: 'get_insight',
      params: { model: 'head' }
    });
    expect(select.value).toBe('head');

    // A watched name not in the namespace stays listed and selected.
    session.setInsight({ ...INSIGHT, model: 'later', models: [] });
    expect(Array.from(select.options).map(o => o.textContent)).toEqual([
      'later (not found)'
    ]);
    expect(select.value).toBe('later');

    // No model at all: a disabled placeholder.
    session.setInsight({ ...INSIGHT, model: null, models: [] });
    expect(select.disabled).toBe(true);
    expect(select.options[0].textContent).toBe('no nn.Module found');

    view.setSession(null);
    session.setInsight(INSIGHT); // disconnected: no change
    expect(view.node.querySelectorAll('.vramscope-Layers-bar')).toHaveLength(0);
    view.dispose();
    session.dispose();
  });
});

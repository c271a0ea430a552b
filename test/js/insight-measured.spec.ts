import { Widget } from '@lumino/widgets';

import { FakeSession } from '../../bench/timeline_update.fake';
import { InsightView } from '../../src/insight/view';
import { validateKernelMessage } from '../../src/validate';
import { insight as makeInsight } from './fixtures';

const MEASURED = {
  cell_id: 'train-cell',
  execution_count: 5,
  forward_index: 1,
  reason: 'first' as const
};

describe('Insight.activations_measured (since 1.1)', () => {
  it('is optional and validated when present', () => {
    const plain = { type: 'insight', insight: makeInsight() };
    expect(typeof validateKernelMessage(plain)).toBe('object');
    const measured = {
      type: 'insight',
      insight: makeInsight({ activations_measured: MEASURED })
    };
    expect(validateKernelMessage(measured)).toEqual(measured);
    const bad = (value: unknown): string =>
      validateKernelMessage({
        type: 'insight',
        insight: { ...makeInsight(), activations_measured: value }
      }) as string;
    expect(bad({ ...MEASURED, reason: 'always' })).toContain(
      'activations_measured.reason'
    );
    expect(bad({ ...MEASURED, forward_index: 1.5 })).toContain(
      'activations_measured.forward_index'
    );
    expect(bad({ ...MEASURED, cell_id: undefined })).toContain(
      'activations_measured.cell_id'
    );
    expect(bad(null)).toContain('activations_measured');
  });

  it('is one quiet line in the insight meta', () => {
    const session = new FakeSession();
    const view = new InsightView();
    Widget.attach(view, document.body);
    view.setSession(session);
    const meta = (): string =>
      view.node.querySelector('.vramscope-Insight-meta')!.textContent!;
    session.setInsight(makeInsight({ scan_ms: 1.25 }));
    expect(meta()).toBe('scan 1.3 ms');
    session.setInsight(
      makeInsight({ scan_ms: 1.25, activations_measured: MEASURED })
    );
    expect(meta()).toBe(
      'activations measured: [5] call 1 (first call in the cell) · scan 1.3 ms'
    );
    session.setInsight(
      makeInsight({
        activations_measured: {
          ...MEASURED,
          execution_count: null,
          forward_index: 3,
          reason: 'shapes'
        }
      })
    );
    expect(meta()).toBe(
      'activations measured: call 3 (input shapes changed) · scan 0.0 ms'
    );
    expect(
      view.node.querySelector('.vramscope-Insight-message')!.textContent
    ).toBe(''); // quiet: not a message
    view.dispose();
  });
});

describe('LayerInfo.saved_by_dtype and checkpointed (since 1.1)', () => {
  const layer = {
    path: 'block',
    type: 'Sequential',
    saved_bytes: 3072,
    peak_saved_bytes: 3072,
    output_shape: [8, 32],
    param_bytes: 0,
    grad_bytes: 0
  };
  const message = (extra: object): unknown => ({
    type: 'insight',
    insight: makeInsight({ layers: [{ ...layer, ...extra }] })
  });

  it('are optional and validated when present', () => {
    expect(typeof validateKernelMessage(message({}))).toBe('object');
    const full = message({
      saved_by_dtype: { float32: 2048, bfloat16: 1024 },
      checkpointed: true
    });
    expect(validateKernelMessage(full)).toEqual(full);
    expect(
      validateKernelMessage(message({ saved_by_dtype: { float32: -1 } }))
    ).toContain('layers[0].saved_by_dtype.float32');
    expect(
      validateKernelMessage(message({ saved_by_dtype: [2048] }))
    ).toContain('layers[0].saved_by_dtype');
    expect(validateKernelMessage(message({ checkpointed: 'yes' }))).toContain(
      'layers[0].checkpointed'
    );
  });
});

describe('Insight.partial (since 1.1)', () => {
  it('is validated and shown as a quiet mark, not a warning', () => {
    const bad = validateKernelMessage({
      type: 'insight',
      insight: { ...makeInsight(), partial: 'yes' }
    });
    expect(bad).toContain('insight.insight.partial');
    const session = new FakeSession();
    const view = new InsightView();
    Widget.attach(view, document.body);
    view.setSession(session);
    const text = (cls: string): string =>
      view.node.querySelector(`.vramscope-Insight-${cls}`)!.textContent!;
    const partial = makeInsight({ scan_ms: 20, partial: true });
    expect(
      typeof validateKernelMessage({ type: 'insight', insight: partial })
    ).toBe('object');
    session.setInsight(partial);
    expect(text('meta')).toBe('holders: partial, continuing · scan 20.0 ms');
    expect(text('message')).toBe('');
    session.setInsight(makeInsight({ scan_ms: 4 })); // the scan completed
    expect(text('meta')).toBe('scan 4.0 ms');
    view.dispose();
  });
});

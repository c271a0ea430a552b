import { MemorySession } from '../../src/model/session';
import { withLayers } from '../../src/model/insightlayers';
import type { ILayerInfo } from '../../src/protocol';
import { hello, insight as makeInsight } from './fixtures';

function layer(path: string, saved: number): ILayerInfo {
  return {
    path,
    type: 'Linear',
    saved_bytes: saved,
    peak_saved_bytes: saved,
    output_shape: [8, 64],
    param_bytes: 16640,
    grad_bytes: 0
  };
}

describe('insight layers_unchanged (since 1.1)', () => {
  const layers = [layer('0', 2048), layer('1', 4096)];
  const full = makeInsight({ model: 'model', layers, partial: true });
  const slice = makeInsight({
    model: 'model',
    layers: [],
    layers_unchanged: true,
    scan_ms: 7
  });

  it('keeps the previous layers for the same model, the rest from the new message', () => {
    const merged = withLayers(slice, full);
    expect(merged.layers).toBe(layers);
    expect(merged.scan_ms).toBe(7);
    expect(merged.partial).toBeUndefined();
    expect('layers_unchanged' in merged).toBe(false);
  });

  it('takes the message as it came without a previous insight of that model', () => {
    expect(withLayers(slice, null)).toBe(slice);
    expect(withLayers(slice, { ...full, model: 'other' })).toBe(slice);
    expect(withLayers(full, makeInsight({ model: 'model' }))).toBe(full);
  });

  it('a session shows the merged insight', () => {
    const s = new MemorySession({ path: 'nb.ipynb', now: () => 42 });
    s.setTransport(() => undefined);
    s.handleMessage(hello());
    const seen: unknown[] = [];
    s.insightChanged.connect((_, i) => seen.push(i));
    s.handleMessage({ type: 'insight', insight: full });
    s.handleMessage({ type: 'insight', insight: slice });
    expect(s.insight?.layers).toEqual(layers);
    expect(s.insight?.scan_ms).toBe(7);
    expect(seen).toHaveLength(2);
    expect(seen[1]).toBe(s.insight);
  });
});

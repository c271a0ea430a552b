import {
  footerContent,
  footerTooltip,
  magnitude,
  devicesBySignificance
} from '../../src/footer/text';
import { cellRecordCheck } from '../../src/validate';
import { metadataFromRecord, readMetadata } from '../../src/footer/metadata';
import { CellFooter } from '../../src/footer/widget';
import {
  DEFAULT_SETTINGS,
  parseSettings,
  kernelSettings
} from '../../src/model/settings';
import { MIB, record } from './fixtures';

const opts = {
  units: 'binary' as const,
  footerMedium: 64 * MIB,
  footerLarge: 1024 * MIB
};

function meta(overrides = {}) {
  return metadataFromRecord(record(overrides));
}

describe('footer text', () => {
  it('says whether a CPU peak was counted exactly or sampled', () => {
    const cpu = (source?: 'exact' | 'sampled') => ({
      before_bytes: 0,
      after_bytes: 16 * MIB,
      delta_bytes: 16 * MIB,
      peak_delta_bytes: 16 * MIB,
      ...(source ? { peak_source: source } : {})
    });
    const exact = footerTooltip(
      meta({ devices: { cpu: cpu('exact') } }),
      'binary'
    );
    expect(exact).toContain('cpu: +16.0 MiB (exact peak +16.0 MiB;');
    const sampled = footerTooltip(
      meta({ devices: { cpu: cpu('sampled') } }),
      'binary'
    );
    expect(sampled).toContain('(sampled peak +16.0 MiB;');
    expect(
      footerTooltip(meta({ devices: { cpu: cpu() } }), 'binary')
    ).toContain('(peak +16.0 MiB;');
    // the record is valid with it, and not with any other value
    const check = cellRecordCheck();
    expect(check(record({ devices: { cpu: cpu('exact') } }), '$')).toBeNull();
    const bad = { ...cpu(), peak_source: 'guessed' };
    expect(check(record({ devices: { cpu: bad as never } }), '$')).toContain(
      'peak_source'
    );
  });

  it('shows delta, peak and device', () => {
    const c = footerContent(meta(), opts);
    expect(c.text).toBe('+64.0 MiB · peak +128.0 MiB · cpu');
    expect(c.classes).toEqual(['vramscope-mod-medium']);
    expect(c.primary).toBe('cpu');
  });

  it('puts the most significant device first, others compact', () => {
    const m = meta({
      devices: {
        cpu: {
          before_bytes: 0,
          after_bytes: MIB,
          delta_bytes: MIB,
          peak_delta_bytes: MIB
        },
        'cuda:0': {
          before_bytes: 0,
          after_bytes: 2048 * MIB,
          delta_bytes: 2048 * MIB,
          peak_delta_bytes: 3072 * MIB
        }
      }
    });
    const c = footerContent(m, opts);
    expect(c.text).toBe('+2.0 GiB · peak +3.0 GiB · cuda:0 · cpu +1.0 MiB');
    expect(c.classes).toContain('vramscope-mod-large');
    expect(c.tooltip.split('\n')).toHaveLength(3);
    expect(c.tooltip).toContain(
      'cuda:0: +2.0 GiB (peak +3.0 GiB; 0 B → 2.0 GiB)'
    );
    expect(c.tooltip).toContain('cpu: +1.0 MiB');
  });

  it('marks errors and OOM', () => {
    const err = footerContent(
      meta({ ok: false, error_type: 'ZeroDivisionError' }),
      opts
    );
    expect(err.text.startsWith('✕ ZeroDivisionError · ')).toBe(true);
    expect(err.classes).toContain('vramscope-mod-error');
    const oom = footerContent(
      meta({ ok: false, error_type: 'OutOfMemoryError', oom: true }),
      opts
    );
    expect(oom.text.startsWith('OOM · ')).toBe(true);
    expect(oom.classes).toContain('vramscope-mod-oom');
    expect(oom.classes).not.toContain('vramscope-mod-error');
  });

  it('classifies magnitude against the thresholds, and freed memory', () => {
    const d = (delta: number, peak: number) => ({
      before_bytes: 10 * 1024 * MIB,
      after_bytes: 10 * 1024 * MIB + delta,
      delta_bytes: delta,
      peak_delta_bytes: peak
    });
    expect(magnitude(d(MIB, MIB), opts)).toBe('small');
    expect(magnitude(d(0, 64 * MIB), opts)).toBe('medium');
    expect(magnitude(d(-2048 * MIB, 0), opts)).toBe('large');
    expect(magnitude(undefined, opts)).toBe('none');
    const freed = footerContent(
      meta({ devices: { cpu: d(-2 * MIB, 0) } }),
      opts
    );
    expect(freed.text).toBe('-2.0 MiB · peak 0 B · cpu');
    expect(freed.classes).toEqual([
      'vramscope-mod-small',
      'vramscope-mod-freed'
    ]);
  });

  it('handles a cell with no device and decimal units', () => {
    expect(footerContent(meta({ devices: {} }), opts).text).toBe(
      'no device measured'
    );
    expect(footerContent(meta(), { ...opts, units: 'decimal' }).text).toBe(
      '+67.1 MB · peak +134.2 MB · cpu'
    );
  });

  it('orders devices by |delta| then peak', () => {
    const x = (delta: number, peak: number) => ({
      before_bytes: 100,
      after_bytes: 100 + delta,
      delta_bytes: delta,
      peak_delta_bytes: peak
    });
    expect(
      devicesBySignificance({ a: x(1, 5), b: x(-10, 0), c: x(1, 9) })
    ).toEqual(['b', 'c', 'a']);
  });
});

describe('cell metadata', () => {
  it('round-trips and rejects malformed values', () => {
    const m = meta();
    expect(m).not.toHaveProperty('cell_id');
    expect(m).not.toHaveProperty('code_head');
    expect(readMetadata(JSON.parse(JSON.stringify(m)))).toEqual(m);
    expect(readMetadata(undefined)).toBeNull();
    expect(readMetadata({ ...m, duration: 'x' })).toBeNull();
  });
});

describe('CellFooter widget', () => {
  it('renders text, classes and tooltip, and hides on null', () => {
    const w = new CellFooter();
    w.render(footerContent(meta(), opts));
    expect(w.node.classList.contains('vramscope-CellFooter')).toBe(true);
    expect(
      w.node.querySelector('.vramscope-CellFooter-text')!.textContent
    ).toBe('+64.0 MiB · peak +128.0 MiB · cpu');
    expect(w.node.classList.contains('vramscope-mod-medium')).toBe(true);
    expect(w.isHidden).toBe(false);
    w.render(footerContent(meta({ ok: false, oom: true }), opts));
    expect(w.node.classList.contains('vramscope-mod-oom')).toBe(true);
    w.render(null);
    expect(w.isHidden).toBe(true);
    expect(w.node.classList.contains('vramscope-mod-oom')).toBe(false);
  });
});

describe('settings', () => {
  it('parses the composite with defaults and clamps', () => {
    expect(parseSettings({})).toEqual(DEFAULT_SETTINGS);
    const s = parseSettings({
      units: 'decimal',
      showFooter: false,
      footerMediumMiB: 10,
      footerLargeMiB: 5,
      sampleHz: 0.1,
      cudaPeakPolicy: 'preserve',
      cpuPeak: 'exact',
      insight: false,
      insightBudgetMs: 50
    });
    expect(s.units).toBe('decimal');
    expect(s.showFooter).toBe(false);
    expect(s.footerMedium).toBe(10 * MIB);
    expect(s.footerLarge).toBe(10 * MIB);
    expect(s.sampleHz).toBe(0.5);
    expect(kernelSettings(s)).toEqual({
      sample_hz: 0.5,
      cuda_peak_policy: 'preserve',
      cpu_peak: 'exact',
      insight: false,
      insight_budget_ms: 50
    });
    expect(parseSettings({ sampleHz: 99 }).sampleHz).toBe(10);
    expect(parseSettings({ cpuPeak: 'fast' }).cpuPeak).toBe('sampled');
  });
});

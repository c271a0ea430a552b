/**
 * Front-end settings: defaults, parsing of the setting registry's composite, and the subset
 * sent to the kernel (`set_settings`).
 */
import { ISettings } from '../protocol';
import { IFrontendSettings } from '../tokens';

const MIB = 1024 * 1024;

export const DEFAULT_SETTINGS: Readonly<IFrontendSettings> = Object.freeze({
  units: 'binary',
  showFooter: true,
  footerMedium: 64 * MIB,
  footerLarge: 1024 * MIB,
  sampleHz: 10,
  cudaPeakPolicy: 'reset',
  cpuPeak: 'sampled',
  insight: true,
  insightBudgetMs: 20
});

/**
 * Read the composite settings of `schema/plugin.json` (thresholds there are in MiB), falling
 * back to defaults for anything missing or invalid.
 */
export function parseSettings(composite: {
  [key: string]: unknown;
}): IFrontendSettings {
  const d = DEFAULT_SETTINGS;
  const num = (
    key: string,
    fallback: number,
    min: number,
    max: number
  ): number => {
    const v = composite[key];
    return typeof v === 'number' && Number.isFinite(v) && v >= min && v <= max
      ? v
      : fallback;
  };
  let sampleHz = num('sampleHz', d.sampleHz, 0, 50);
  if (sampleHz > 0 && sampleHz < 0.5) {
    sampleHz = 0.5;
  }
  const medium = num('footerMediumMiB', d.footerMedium / MIB, 0, 1e9) * MIB;
  const large = Math.max(
    medium,
    num('footerLargeMiB', d.footerLarge / MIB, 0, 1e9) * MIB
  );
  return {
    units: composite['units'] === 'decimal' ? 'decimal' : 'binary',
    showFooter:
      typeof composite['showFooter'] === 'boolean'
        ? composite['showFooter']
        : true,
    footerMedium: medium,
    footerLarge: large,
    sampleHz,
    cudaPeakPolicy:
      composite['cudaPeakPolicy'] === 'preserve' ? 'preserve' : 'reset',
    cpuPeak: composite['cpuPeak'] === 'exact' ? 'exact' : 'sampled',
    insight:
      typeof composite['insight'] === 'boolean'
        ? composite['insight']
        : d.insight,
    insightBudgetMs: num('insightBudgetMs', d.insightBudgetMs, 1, 60000)
  };
}

/** The kernel-side part of the settings (`set_settings` params). */
export function kernelSettings(s: IFrontendSettings): Partial<ISettings> {
  return {
    sample_hz: s.sampleHz,
    cuda_peak_policy: s.cudaPeakPolicy,
    cpu_peak: s.cpuPeak,
    insight: s.insight,
    insight_budget_ms: s.insightBudgetMs
  };
}

/** Whether two settings differ in what is sent to the kernel. */
export function kernelSettingsDiffer(
  a: IFrontendSettings,
  b: IFrontendSettings
): boolean {
  const x = kernelSettings(a);
  const y = kernelSettings(b);
  return (Object.keys(x) as (keyof ISettings)[]).some(k => x[k] !== y[k]);
}

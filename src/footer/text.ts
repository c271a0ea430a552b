/**
 * What a cell footer says: text, CSS classes and tooltip for a cell's memory summary.
 * Pure functions (no DOM), shared with the cell table.
 */
import { IDeviceDelta } from '../protocol';
import { formatBytes, formatDelta, formatDuration, Units } from '../format';
import { ICellMemoryMetadata } from './metadata';

export interface IFooterOptions {
  units: Units;
  /** Bytes from which the change is "medium" / "large". */
  footerMedium: number;
  footerLarge: number;
}

export interface IFooterContent {
  text: string;
  /** Modifier classes: one magnitude class, plus error/oom/freed markers. */
  classes: string[];
  tooltip: string;
  /** The most significant device, or null when none was measured. */
  primary: string | null;
}

export type Magnitude = 'none' | 'small' | 'medium' | 'large';

/**
 * Device ids ordered by significance: largest |delta|, then largest peak, then id.
 */
export function devicesBySignificance(devices: {
  [id: string]: IDeviceDelta;
}): string[] {
  return Object.keys(devices).sort((a, b) => {
    const da = devices[a];
    const db = devices[b];
    return (
      Math.abs(db.delta_bytes) - Math.abs(da.delta_bytes) ||
      db.peak_delta_bytes - da.peak_delta_bytes ||
      (a < b ? -1 : a > b ? 1 : 0)
    );
  });
}

/** The magnitude of a change: the larger of |delta| and peak, against the thresholds. */
export function magnitude(
  d: IDeviceDelta | undefined,
  o: IFooterOptions
): Magnitude {
  if (!d) {
    return 'none';
  }
  return sizeMagnitude(
    Math.max(Math.abs(d.delta_bytes), d.peak_delta_bytes),
    o
  );
}

/** How large a byte count is, by the footer thresholds (its sign ignored). */
export function sizeMagnitude(bytes: number, o: IFooterOptions): Magnitude {
  const size = Math.abs(bytes);
  if (size >= o.footerLarge) {
    return 'large';
  }
  if (size >= o.footerMedium) {
    return 'medium';
  }
  return 'small';
}

/** The status marker of a failed cell: `OOM` or `✕ ErrorType`, or '' when it succeeded. */
export function statusLabel(
  m: Pick<ICellMemoryMetadata, 'ok' | 'oom' | 'error_type'>
): string {
  if (m.oom) {
    return 'OOM';
  }
  if (!m.ok) {
    return `✕ ${m.error_type ?? 'error'}`;
  }
  return '';
}

/**
 * `+64.0 MiB · peak +128.0 MiB · cpu`; more devices follow compactly
 * (`· cuda:0 +1.0 MiB`); a failed cell starts with its marker (`OOM · …`).
 */
export function footerContent(
  m: ICellMemoryMetadata,
  o: IFooterOptions
): IFooterContent {
  const ids = devicesBySignificance(m.devices);
  const primary = ids.length ? ids[0] : null;
  const parts: string[] = [];
  const marker = statusLabel(m);
  if (marker) {
    parts.push(marker);
  }
  if (primary) {
    const d = m.devices[primary];
    parts.push(formatDelta(d.delta_bytes, o.units));
    parts.push(`peak ${formatDelta(d.peak_delta_bytes, o.units)}`);
    parts.push(primary);
    for (const id of ids.slice(1)) {
      parts.push(`${id} ${formatDelta(m.devices[id].delta_bytes, o.units)}`);
    }
  } else {
    parts.push('no device measured');
  }
  const mag = magnitude(primary ? m.devices[primary] : undefined, o);
  const classes = [`vramscope-mod-${mag}`];
  if (m.oom) {
    classes.push('vramscope-mod-oom');
  } else if (!m.ok) {
    classes.push('vramscope-mod-error');
  }
  if (primary && m.devices[primary].delta_bytes < 0) {
    classes.push('vramscope-mod-freed');
  }
  return {
    text: parts.join(' · '),
    classes,
    tooltip: footerTooltip(m, o.units),
    primary
  };
}

/** One line per device with before → after, delta and peak; then duration and status. */
export function footerTooltip(m: ICellMemoryMetadata, units: Units): string {
  const lines: string[] = [];
  const head =
    m.execution_count === null
      ? 'vramscope'
      : `vramscope [${m.execution_count}]`;
  lines.push(
    `${head} · ${formatDuration(m.duration)}${m.ok ? '' : ` · ${statusLabel(m)}`}`
  );
  for (const id of devicesBySignificance(m.devices)) {
    const d = m.devices[id];
    lines.push(
      `${id}: ${formatDelta(d.delta_bytes, units)} (${peakLabel(d)} ${formatDelta(d.peak_delta_bytes, units)}; ` +
        `${formatBytes(d.before_bytes, { units })} → ${formatBytes(d.after_bytes, { units })})`
    );
  }
  return lines.join('\n');
}

/** "peak", or "exact peak" / "sampled peak" where the kernel says how it was found (CPU). */
export function peakLabel(d: IDeviceDelta): string {
  return d.peak_source ? `${d.peak_source} peak` : 'peak';
}

import {
  formatBytes,
  formatDelta,
  formatDuration,
  percentOf
} from '../../src/format';

describe('formatBytes', () => {
  it('uses binary units with one decimal by default', () => {
    expect(formatBytes(0)).toBe('0 B');
    expect(formatBytes(512)).toBe('512 B');
    expect(formatBytes(1536)).toBe('1.5 KiB');
    expect(formatBytes(64 * 1024 * 1024)).toBe('64.0 MiB');
    expect(formatBytes(1.5 * 1024 ** 3)).toBe('1.5 GiB');
    expect(formatBytes(2 * 1024 ** 4)).toBe('2.0 TiB');
  });

  it('moves up a unit instead of printing 1024.0', () => {
    expect(formatBytes(1024 * 1024 - 1)).toBe('1.0 MiB');
  });

  it('supports decimal units', () => {
    expect(formatBytes(1500, { units: 'decimal' })).toBe('1.5 kB');
    expect(formatBytes(64e6, { units: 'decimal' })).toBe('64.0 MB');
    expect(formatBytes(2.5e9, { units: 'decimal' })).toBe('2.5 GB');
  });

  it('handles non-finite input', () => {
    expect(formatBytes(NaN)).toBe('–');
  });
});

describe('formatDelta', () => {
  it('signs deltas; zero has no sign', () => {
    expect(formatDelta(64 * 1024 * 1024)).toBe('+64.0 MiB');
    expect(formatDelta(-1.5 * 1024 ** 3)).toBe('-1.5 GiB');
    expect(formatDelta(0)).toBe('0 B');
    expect(formatDelta(100)).toBe('+100 B');
    expect(formatDelta(-2e9, 'decimal')).toBe('-2.0 GB');
  });
});

describe('formatDuration', () => {
  it('picks a readable unit', () => {
    expect(formatDuration(0.0004)).toBe('<1 ms');
    expect(formatDuration(0.012)).toBe('12 ms');
    expect(formatDuration(1.234)).toBe('1.2 s');
    expect(formatDuration(75)).toBe('1m 15s');
    expect(formatDuration(3725)).toBe('1h 02m');
    expect(formatDuration(-1)).toBe('–');
  });
});

describe('percentOf', () => {
  it('clamps and handles an unknown total', () => {
    expect(percentOf(50, 200)).toBe(25);
    expect(percentOf(300, 200)).toBe(100);
    expect(percentOf(1, null)).toBeNull();
    expect(percentOf(1, 0)).toBeNull();
  });
});

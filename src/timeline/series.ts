/**
 * Timeline model: turns an `IMemorySession`'s samples, cells and restarts into per-device
 * series ready for downsampling and drawing. No DOM here.
 *
 * Series per device kind:
 * - cuda: allocated (`used`), reserved, peak, device-wide used (`device_used`, only when the
 *   bridge reports it);
 * - cpu: in use (`used`), RSS (`reserved`);
 * - mps: allocated (`used`), driver (`reserved`).
 *
 * A kernel restart, or a sample that lacks a device, inserts a `NaN` gap so the drawn line
 * breaks instead of bridging two kernel processes; a device the kernel only did not read at
 * that tick (`unread`: the CPU on a fragmented heap) keeps its line.
 */
import type { ICellRecord, IDeviceInfo, ISample } from '../protocol';
import type {
  ICellEntry,
  IMemorySession,
  IRingBuffer,
  IRunningCell
} from '../tokens';
import { IPoints, MinMaxSeries } from './downsample';

export type DeviceKind = IDeviceInfo['kind'];

/** The sample fields a trace can read. */
export type SampleField = 'used' | 'reserved' | 'peak' | 'device_used';

/** How one trace of a device kind is labelled and drawn. */
export interface ITraceSpec {
  field: SampleField;
  label: string;
  /** Visual role, mapped to a theme colour and dash by the view. */
  role: 'primary' | 'secondary' | 'peak' | 'device';
}

const TRACE_SPECS: { [K in DeviceKind]: ITraceSpec[] } = {
  cuda: [
    { field: 'used', label: 'allocated', role: 'primary' },
    { field: 'reserved', label: 'reserved', role: 'secondary' },
    { field: 'peak', label: 'peak', role: 'peak' },
    {
      field: 'device_used',
      label: 'device used (all processes)',
      role: 'device'
    }
  ],
  cpu: [
    { field: 'used', label: 'in use', role: 'primary' },
    { field: 'reserved', label: 'RSS', role: 'secondary' }
  ],
  mps: [
    { field: 'used', label: 'allocated', role: 'primary' },
    { field: 'reserved', label: 'driver', role: 'secondary' }
  ]
};

/** The traces drawn for a device kind, in drawing order. */
export function traceSpecs(kind: DeviceKind): ReadonlyArray<ITraceSpec> {
  return TRACE_SPECS[kind];
}

/** Device kind from a device id when the device list does not name it. */
export function kindOf(
  id: string,
  devices: ReadonlyArray<IDeviceInfo> = []
): DeviceKind {
  const info = devices.find(d => d.id === id);
  if (info) {
    return info.kind;
  }
  if (id.startsWith('cuda')) {
    return 'cuda';
  }
  if (id.startsWith('mps')) {
    return 'mps';
  }
  return 'cpu';
}

/** One trace's samples. */
export interface ITraceSeries {
  spec: ITraceSpec;
  data: MinMaxSeries;
  /** Whether any finite value was ever seen (a trace with none is not drawn). */
  present: boolean;
}

/** All traces of one device. */
export class DeviceSeries {
  constructor(
    readonly id: string,
    public kind: DeviceKind
  ) {
    this.traces = traceSpecs(kind).map(spec => ({
      spec,
      data: new MinMaxSeries(),
      present: false
    }));
  }

  readonly traces: ITraceSeries[];

  /** Number of retained points (including gap markers). */
  get length(): number {
    return this.traces[0].data.length;
  }

  get firstTime(): number {
    return this.traces[0].data.firstTime;
  }

  get lastTime(): number {
    return this.traces[0].data.lastTime;
  }

  /** Traces that have data, for drawing. */
  visibleTraces(): ITraceSeries[] {
    return this.traces.filter(tr => tr.present);
  }

  /** Append a gap marker at time `t` unless the series already ends in one. */
  gap(t: number): void {
    const first = this.traces[0].data;
    if (first.length === 0 || isNaN(first.lastValue)) {
      return;
    }
    for (const tr of this.traces) {
      tr.data.push(t, NaN);
    }
  }

  /** Append one sample's values for this device. */
  push(t: number, values: ISample['d'][string]): void {
    for (const tr of this.traces) {
      const raw = values[tr.spec.field];
      const x = typeof raw === 'number' && isFinite(raw) ? raw : NaN;
      if (x === x) {
        tr.present = true;
      }
      tr.data.push(t, x);
    }
  }

  /** Keep at most `keep` points (whole blocks are dropped from the front). */
  trim(keep: number): void {
    for (const tr of this.traces) {
      tr.data.dropToLength(keep);
    }
  }

  /** Downsample every visible trace over `[t0, t1]`. */
  downsample(
    t0: number,
    t1: number,
    maxBuckets: number
  ): { trace: ITraceSeries; points: IPoints }[] {
    return this.visibleTraces().map(trace => ({
      trace,
      points: trace.data.downsample(t0, t1, maxBuckets, true)
    }));
  }

  /** Largest finite value of the visible traces over `[t0, t1]` (0 when none). */
  maxIn(t0: number, t1: number): number {
    let m = 0;
    for (const tr of this.visibleTraces()) {
      const p = tr.data.downsample(t0, t1, 1);
      for (let i = 0; i < p.v.length; i++) {
        if (p.v[i] > m) {
          m = p.v[i];
        }
      }
    }
    return m;
  }
}

/** A cell drawn as a band on a device's timeline. */
export interface ICellBand {
  cellId: string | null;
  executionCount: number | null;
  start: number;
  end: number;
  label: string;
  codeHead: string;
  ok: boolean;
  oom: boolean;
  errorType: string | null;
  /** Delta and peak rise on the device the band is drawn for (null if not measured). */
  deltaBytes: number | null;
  peakDeltaBytes: number | null;
  epoch: number;
  /** The cell is still running: `end` is the newest sample time, not its end. */
  running?: boolean;
}

/** Cell bands for one device, in start order. */
export function cellBands(
  cells: ReadonlyArray<ICellEntry>,
  deviceId: string | null
): ICellBand[] {
  const bands = cells.map(({ record, epoch }) =>
    bandOf(record, epoch, deviceId)
  );
  bands.sort((a, b) => a.start - b.start);
  return bands;
}

function bandOf(
  record: ICellRecord,
  epoch: number,
  deviceId: string | null
): ICellBand {
  const d = deviceId ? record.devices[deviceId] : undefined;
  return {
    cellId: record.cell_id,
    executionCount: record.execution_count,
    start: record.start_time,
    end: record.start_time + Math.max(0, record.duration),
    label:
      record.execution_count === null ? '[ ]' : `[${record.execution_count}]`,
    codeHead: record.code_head,
    ok: record.ok,
    oom: record.oom,
    errorType: record.error_type,
    deltaBytes: d ? d.delta_bytes : null,
    peakDeltaBytes: d ? d.peak_delta_bytes : null,
    epoch
  };
}

/** The band of the cell running now, from its start to `end` (the newest sample time). */
export function runningBand(
  cell: IRunningCell,
  end: number,
  epoch: number
): ICellBand {
  return {
    cellId: cell.cellId,
    executionCount: cell.executionCount,
    start: cell.start,
    end: Math.max(cell.start, end),
    label: cell.executionCount === null ? '[*]' : `[${cell.executionCount}]`,
    codeHead: cell.codeHead,
    ok: true,
    oom: false,
    errorType: null,
    deltaBytes: null,
    peakDeltaBytes: null,
    epoch,
    running: true
  };
}

/**
 * Incrementally mirrors a session's sample ring buffer into per-device series.
 *
 * `sync()` reads only the samples pushed since the last call (using `IRingBuffer.pushed`), so
 * a live update costs O(new samples). It rebuilds from scratch when the buffer was replaced or
 * cleared, or when more samples arrived than the buffer retains.
 */
export class TimelineSeries {
  /** Devices in first-seen order. */
  get devices(): ReadonlyArray<DeviceSeries> {
    return this._order;
  }

  /** Total samples received from the session so far (the buffer's `pushed`). */
  get sampleCount(): number {
    return this._pushed;
  }

  device(id: string): DeviceSeries | undefined {
    return this._devices.get(id);
  }

  /** Earliest and latest sample time over all devices (NaN when empty). */
  timeSpan(): [number, number] {
    let a = Infinity;
    let b = -Infinity;
    for (const d of this._order) {
      if (d.length) {
        a = Math.min(a, d.firstTime);
        b = Math.max(b, d.lastTime);
      }
    }
    return a <= b ? [a, b] : [NaN, NaN];
  }

  /** Forget everything. */
  reset(): void {
    this._devices.clear();
    this._order = [];
    this._buffer = null;
    this._pushed = 0;
    this._lastT = -Infinity;
    this._restartIdx = 0;
  }

  /**
   * Read new samples from the session. Returns the number of samples ingested.
   */
  sync(session: IMemorySession): number {
    const buf = session.samples;
    const restarts = [...session.restarts].sort((a, b) => a - b);
    let fresh = buf.pushed - this._pushed;
    if (buf !== this._buffer || fresh < 0 || fresh > buf.length) {
      this.reset();
      this._buffer = buf;
      fresh = buf.length;
    }
    const devices = session.devices;
    for (let i = buf.length - fresh; i < buf.length; i++) {
      this._ingest(buf.get(i), restarts, devices);
    }
    this._pushed = buf.pushed;
    const keep = buf.capacity + 2 * restarts.length + 64;
    for (const d of this._order) {
      if (d.length > keep + 1024) {
        d.trim(keep);
      }
    }
    return fresh;
  }

  private _ingest(
    sample: ISample,
    restarts: number[],
    devices: ReadonlyArray<IDeviceInfo>
  ): void {
    const t = sample.t;
    if (!(t >= this._lastT)) {
      return; // out of order or not a number: skip, the series must stay sorted
    }
    // A restart between the previous sample and this one breaks every line.
    let restarted = false;
    while (
      this._restartIdx < restarts.length &&
      restarts[this._restartIdx] <= t
    ) {
      if (restarts[this._restartIdx] > this._lastT) {
        restarted = true;
      }
      this._restartIdx++;
    }
    if (restarted) {
      for (const d of this._order) {
        d.gap(Math.max(this._lastT, Math.min(t, this._restartAt(restarts))));
      }
    }
    for (const id of Object.keys(sample.d)) {
      let dev = this._devices.get(id);
      if (!dev) {
        dev = new DeviceSeries(id, kindOf(id, devices));
        this._devices.set(id, dev);
        this._order.push(dev);
      }
      dev.push(t, sample.d[id]);
    }
    // Devices absent from this sample: a gap (once), unless the kernel only skipped their
    // reading at this tick (`unread`): then the line goes on from the last reading.
    const unread = sample.unread ?? [];
    for (const d of this._order) {
      if (!(d.id in sample.d) && !unread.includes(d.id)) {
        d.gap(t);
      }
    }
    this._lastT = t;
  }

  private _restartAt(restarts: number[]): number {
    return restarts[this._restartIdx - 1];
  }

  private _devices = new Map<string, DeviceSeries>();
  private _order: DeviceSeries[] = [];
  private _buffer: IRingBuffer<ISample> | null = null;
  private _pushed = 0;
  private _lastT = -Infinity;
  private _restartIdx = 0;
}

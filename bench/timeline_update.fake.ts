/**
 * A small in-memory IMemorySession for the timeline/insight tests and the timeline benchmark.
 * It stands in for the real session in src/model/ (same interface, no kernel).
 */
import { Signal } from '@lumino/signaling';

import type {
  ICellRecord,
  IDeviceInfo,
  IInsight,
  IKernelInfo,
  IProcessesMessage,
  IProcessInfo,
  IRequestMap,
  ISample,
  ISettings,
  KernelMessage,
  Method
} from '../src/protocol';
import type {
  ConnectionStatus,
  ICellEntry,
  IMemorySession,
  IRingBuffer,
  IRunningCell
} from '../src/tokens';

export class FakeRing<T> implements IRingBuffer<T> {
  constructor(readonly capacity: number) {
    this._items = new Array<T>(capacity);
  }

  get length(): number {
    return Math.min(this._pushed, this.capacity);
  }

  get pushed(): number {
    return this._pushed;
  }

  get(index: number): T {
    const start = this._pushed - this.length;
    return this._items[(start + index) % this.capacity];
  }

  push(item: T): void {
    this._items[this._pushed % this.capacity] = item;
    this._pushed++;
  }

  toArray(): T[] {
    const out: T[] = [];
    for (let i = 0; i < this.length; i++) {
      out.push(this.get(i));
    }
    return out;
  }

  private _items: T[];
  private _pushed = 0;
}

export class FakeSession implements IMemorySession {
  constructor(capacity = 36000) {
    this.samples = new FakeRing<ISample>(capacity);
  }

  path = 'fake.ipynb';
  status: ConnectionStatus = 'connected';
  statusMessage = '';
  warnings: string[] = [];
  kernel: IKernelInfo | null = null;
  devices: IDeviceInfo[] = [];
  cells: ICellEntry[] = [];
  samples: FakeRing<ISample>;
  restarts: number[] = [];
  insight: IInsight | null = null;
  runningCell: IRunningCell | null = null;
  settings: ISettings | null = null;
  epoch = 0;
  isDisposed = false;

  /** Calls to `revealCell` and `request`, for assertions. */
  revealed: string[] = [];
  requests: { method: string; params: unknown }[] = [];
  /** What `request('get_processes')` resolves with (null: not supported, an old kernel). */
  processes: IProcessesMessage | null = null;
  /** What `request('get_insight')` resolves with (defaults to the current insight). */
  nextInsight: IInsight | null = null;

  statusChanged: Signal<IMemorySession, ConnectionStatus> = new Signal(this);
  cellRecorded: Signal<IMemorySession, ICellEntry> = new Signal(this);
  devicesChanged: Signal<IMemorySession, ReadonlyArray<IDeviceInfo>> =
    new Signal(this);
  samplesAdded: Signal<IMemorySession, ReadonlyArray<ISample>> = new Signal(
    this
  );
  insightChanged: Signal<IMemorySession, IInsight | null> = new Signal(this);
  runningCellChanged: Signal<IMemorySession, IRunningCell | null> = new Signal(
    this
  );
  changed: Signal<IMemorySession, void> = new Signal(this);
  messageReceived: Signal<IMemorySession, KernelMessage> = new Signal(this);

  /** Append samples and emit `samplesAdded`. */
  addSamples(samples: ISample[], emit = true): void {
    for (const s of samples) {
      this.samples.push(s);
    }
    if (emit) {
      this.samplesAdded.emit(samples);
    }
  }

  addCell(record: ICellRecord): void {
    const entry = { record, epoch: this.epoch };
    this.cells.push(entry);
    this.cellRecorded.emit(entry);
  }

  restart(t: number): void {
    this.restarts.push(t);
    this.epoch++;
    this.changed.emit();
  }

  setInsight(insight: IInsight | null): void {
    this.insight = insight;
    this.insightChanged.emit(insight);
  }

  request<M extends Method>(
    method: M,
    params: IRequestMap[M]['params']
  ): Promise<IRequestMap[M]['result']> {
    this.requests.push({ method, params });
    if (method === 'get_insight') {
      const insight = this.nextInsight ?? this.insight;
      if (insight) {
        this.setInsight(insight);
      }
      return Promise.resolve({ insight } as IRequestMap[M]['result']);
    }
    if (method === 'get_processes' && this.processes) {
      return Promise.resolve(this.processes as IRequestMap[M]['result']);
    }
    return Promise.reject(new Error(`fake session: ${method} not supported`));
  }

  revealCell(cellId: string): void {
    this.revealed.push(cellId);
  }

  dispose(): void {
    this.isDisposed = true;
    Signal.clearData(this);
  }
}

/** A kernel cell record with defaults. */
export function cellRecord(partial: Partial<ICellRecord>): ICellRecord {
  return {
    cell_id: 'cell-1',
    execution_count: 1,
    start_time: 0,
    duration: 1,
    ok: true,
    error_type: null,
    oom: false,
    code_head: 'x = 1',
    devices: {},
    ...partial
  };
}

/**
 * `n` samples at `hz` from `t0`, saw-tooth memory on `deviceId` (CUDA fields included when
 * the id starts with "cuda"; `device_used` only when `withDeviceUsed`).
 */
export function sawtooth(
  n: number,
  options: {
    t0?: number;
    hz?: number;
    deviceId?: string;
    period?: number;
    amplitude?: number;
    base?: number;
    withDeviceUsed?: boolean;
  } = {}
): ISample[] {
  const t0 = options.t0 ?? 1_700_000_000;
  const hz = options.hz ?? 10;
  const id = options.deviceId ?? 'cuda:0';
  const period = options.period ?? 600;
  const amp = options.amplitude ?? 8 * 2 ** 30;
  const base = options.base ?? 2 ** 30;
  const out: ISample[] = [];
  for (let i = 0; i < n; i++) {
    const used = base + Math.round((amp * (i % period)) / period);
    const values: ISample['d'][string] = { used };
    if (id.startsWith('cuda')) {
      values.reserved = used + 512 * 2 ** 20;
      values.peak = base + amp;
      if (options.withDeviceUsed) {
        values.device_used = used + 2 ** 30;
        values.device_total = 80 * 2 ** 30;
      }
    } else {
      values.reserved = used + 2 ** 28;
    }
    out.push({ t: t0 + i / hz, d: { [id]: values } });
  }
  return out;
}

/** Median, mean, p90, min and count of timings. */
export interface IStats {
  median: number;
  mean: number;
  p90: number;
  min: number;
  n: number;
}

export function stats(xs: number[]): IStats {
  const s = [...xs].sort((a, b) => a - b);
  return {
    median: s[Math.floor(s.length / 2)],
    mean: s.reduce((a, b) => a + b, 0) / Math.max(1, s.length),
    p90: s[Math.min(s.length - 1, Math.floor(s.length * 0.9))],
    min: s[0],
    n: s.length
  };
}

/** A process as a `processes` message lists it (a running child pid 1), with changes. */
export function processInfo(over: Partial<IProcessInfo>): IProcessInfo {
  return {
    key: 'vm:1',
    pid: 1,
    ppid: 100,
    host: 'vm',
    remote: false,
    role: 'child pid 1',
    kind: 'child',
    index: null,
    world: null,
    cell: null,
    started: 0,
    last_seen: 0,
    rss: 0,
    uss: null,
    pss: null,
    peak_rss: 0,
    peak_uss: 0,
    devices: {},
    peak_devices: {},
    dropped: 0,
    ended: null,
    exit: null,
    exit_code: null,
    signal: null,
    oom: false,
    ...over
  };
}

/** A `processes` message (incremental, nothing in it), with changes. */
export function processesMessage(
  over: Partial<IProcessesMessage>
): IProcessesMessage {
  return {
    type: 'processes',
    time: 0,
    full: false,
    processes: [],
    samples: {},
    findings: [],
    stats: { received: 0, dropped: 0, refused: 0, malformed: 0 },
    remote: null,
    ...over
  };
}

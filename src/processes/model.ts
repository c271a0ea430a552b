/**
 * The Processes section's state for one notebook session: the child processes and ranks the
 * kernel reports (`processes` messages, since 1.1), their lane points (bounded per lane), the
 * copy-on-access findings and the collector's counters. After every `hello` (a reload, a
 * restart) it asks for everything the kernel kept (`get_processes`).
 */
import { IDisposable } from '@lumino/disposable';
import { ISignal, Signal } from '@lumino/signaling';

import type {
  IProcessPeak,
  IProcessesMessage,
  IProcessFinding,
  IProcessInfo,
  IProcessStats,
  KernelMessage,
  ProcessPoint
} from '../protocol';
import type { ICellEntry, IMemorySession } from '../tokens';
import { validateKernelMessage } from '../validate';

/** Lane points kept per process (older ones are dropped). */
export const LANE_LIMIT = 3000;

/** The lane points one message brought (`full`: they replace every lane). */
export interface ISamplesApplied {
  full: boolean;
  samples: { readonly [key: string]: ReadonlyArray<ProcessPoint> };
}

/** A cell's child-process peaks, for the section's "Peaks per cell". */
export interface ICellPeaks {
  executionCount: number | null;
  codeHead: string;
  peaks: IProcessPeak[];
}

export class ProcessesModel implements IDisposable {
  constructor(session: IMemorySession) {
    this.session = session;
    session.messageReceived.connect(this._onMessage, this);
    session.cellRecorded.connect(this._onCell, this);
    if (session.status === 'connected') {
      void this.refresh();
    }
  }

  readonly session: IMemorySession;

  /** Every known process: running ones first, then by cell, kind and index. */
  get processes(): ReadonlyArray<IProcessInfo> {
    return this._processes;
  }

  get findings(): ReadonlyArray<IProcessFinding> {
    return this._findings;
  }

  get stats(): IProcessStats | null {
    return this._stats;
  }

  /** The UDP address remote ranks report to, when the kernel listens. */
  get remote(): string | null {
    return this._remote;
  }

  /**
   * The last `limit` cells whose record carries child processes' peaks
   * (`CellRecord.processes`, since 1.1), newest first.
   */
  cellPeaks(limit = 3): ICellPeaks[] {
    const out: ICellPeaks[] = [];
    const cells = this.session.cells;
    for (let i = cells.length - 1; i >= 0 && out.length < limit; i--) {
      const record = cells[i].record;
      const peaks = record.processes;
      if (peaks && Object.keys(peaks).length) {
        out.push({
          executionCount: record.execution_count,
          codeHead: record.code_head,
          peaks: Object.values(peaks).sort((a, b) =>
            a.role.localeCompare(b.role, undefined, { numeric: true })
          )
        });
      }
    }
    return out;
  }

  /** Lane points of one process, oldest first. */
  lane(key: string): ReadonlyArray<ProcessPoint> {
    return this._lanes.get(key) ?? [];
  }

  /** Emitted with each message's lane points, before `changed`. */
  get samplesApplied(): ISignal<this, ISamplesApplied> {
    return this._samplesApplied;
  }

  /** Emitted after every applied message. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  /** Ask the kernel for everything it kept (lanes included). */
  async refresh(): Promise<void> {
    try {
      const result = await this.session.request('get_processes', {});
      const msg = validateKernelMessage(result);
      if (typeof msg !== 'string' && msg.type === 'processes') {
        this.apply(msg);
      }
    } catch {
      // an older kernel bridge (1.0) has no processes: nothing to show
    }
  }

  /** Apply one message: `full` replaces the lanes, otherwise points are appended. */
  apply(msg: IProcessesMessage): void {
    if (this._disposed) {
      return;
    }
    if (msg.full) {
      this._lanes.clear();
    }
    for (const [key, points] of Object.entries(msg.samples)) {
      const lane = this._lanes.get(key) ?? [];
      lane.push(...points);
      if (lane.length > LANE_LIMIT) {
        lane.splice(0, lane.length - LANE_LIMIT);
      }
      this._lanes.set(key, lane);
    }
    const processes = msg.changed_only
      ? Private.merge(this._processes, msg.processes, msg.forgotten ?? [])
      : msg.processes;
    const known = new Set(processes.map(p => p.key));
    for (const key of [...this._lanes.keys()]) {
      if (!known.has(key)) {
        this._lanes.delete(key);
      }
    }
    this._processes = [...processes].sort(Private.order);
    this._findings = msg.findings;
    this._stats = msg.stats;
    this._remote = msg.remote;
    this._samplesApplied.emit({ full: msg.full, samples: msg.samples });
    this._changed.emit();
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    this.session.messageReceived.disconnect(this._onMessage, this);
    this.session.cellRecorded.disconnect(this._onCell, this);
    Signal.clearData(this);
  }

  private _onMessage(_: IMemorySession, msg: KernelMessage): void {
    if (msg.type === 'processes') {
      this.apply(msg);
    } else if (msg.type === 'hello') {
      void this.refresh();
    }
  }

  private _onCell(_: IMemorySession, entry: ICellEntry): void {
    if (entry.record.processes) {
      this._changed.emit();
    }
  }

  private _processes: IProcessInfo[] = [];
  private _findings: ReadonlyArray<IProcessFinding> = [];
  private _stats: IProcessStats | null = null;
  private _remote: string | null = null;
  private _lanes = new Map<string, ProcessPoint[]>();
  private _changed = new Signal<this, void>(this);
  private _samplesApplied = new Signal<this, ISamplesApplied>(this);
  private _disposed = false;
}

/** Newest cell first, then ranks, workers and other children, each by index (or pid). */
export function compareProcesses(a: IProcessInfo, b: IProcessInfo): number {
  return (
    (b.cell ?? -1) - (a.cell ?? -1) ||
    Private.KIND_ORDER[a.kind] - Private.KIND_ORDER[b.kind] ||
    (a.index ?? a.pid) - (b.index ?? b.pid)
  );
}

namespace Private {
  export const KIND_ORDER = { rank: 0, worker: 1, child: 2 };

  /** Running processes first, then as `compareProcesses`. */
  export function order(a: IProcessInfo, b: IProcessInfo): number {
    return (
      Number(a.ended !== null) - Number(b.ended !== null) ||
      compareProcesses(a, b)
    );
  }

  /**
   * An incremental message's processes applied to the known ones: changed ones replace
   * theirs by key, new ones are added, forgotten keys go.
   */
  export function merge(
    known: ReadonlyArray<IProcessInfo>,
    changed: ReadonlyArray<IProcessInfo>,
    forgotten: ReadonlyArray<string>
  ): IProcessInfo[] {
    const byKey = new Map(known.map(p => [p.key, p]));
    for (const key of forgotten) {
      byKey.delete(key);
    }
    for (const proc of changed) {
      byKey.set(proc.key, proc);
    }
    return [...byKey.values()];
  }
}

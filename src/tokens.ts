/**
 * Tokens and the interfaces shared between vramscope's models and views.
 *
 * Models (src/model/) implement these and emit signals; views (src/panel/, src/timeline/,
 * src/insight/, src/footer/) only read them and render.
 */
import { Token } from '@lumino/coreutils';
import { IDisposable } from '@lumino/disposable';
import { ISignal } from '@lumino/signaling';

import {
  ICellRecord,
  IDeviceInfo,
  IInsight,
  IKernelInfo,
  IRequestMap,
  ISample,
  ISettings,
  Method
} from './protocol';

/** Where a notebook's connection to its kernel bridge stands. */
export type ConnectionStatus =
  | 'idle' // no kernel yet
  | 'connecting' // bootstrapping the bridge / opening comms
  | 'connected'
  | 'restarting' // the kernel is restarting; history is kept, reconnect follows
  | 'no-bridge' // vramscope is not installed in the kernel's environment
  | 'unsupported-kernel' // not a Python kernel
  | 'protocol-mismatch'
  | 'error';

/** One executed cell as the front end keeps it. */
export interface ICellEntry {
  record: ICellRecord;
  /** Index of the kernel process the cell ran in (0 for the first, +1 per restart). */
  epoch: number;
}

/** A bounded, append-only ring buffer (oldest entries are dropped). */
export interface IRingBuffer<T> {
  readonly capacity: number;
  readonly length: number;
  /** Total number of items ever pushed (length + dropped). */
  readonly pushed: number;
  get(index: number): T;
  toArray(): T[];
}

/** The memory state of one notebook: history, devices, samples, insight. */
export interface IMemorySession extends IDisposable {
  /** The notebook's path (changes on rename). */
  readonly path: string;
  readonly status: ConnectionStatus;
  /** Human-readable explanation of `status` (e.g. the exact `%pip install` line). */
  readonly statusMessage: string;
  /** Warnings from the bridge or from invalid messages, newest last. */
  readonly warnings: ReadonlyArray<string>;
  readonly kernel: IKernelInfo | null;
  readonly devices: ReadonlyArray<IDeviceInfo>;
  readonly cells: ReadonlyArray<ICellEntry>;
  /** Kernel-timestamped samples, bounded. */
  readonly samples: IRingBuffer<ISample>;
  /** Kernel wall-clock times (UNIX seconds) at which the kernel was seen restarting. */
  readonly restarts: ReadonlyArray<number>;
  readonly insight: IInsight | null;
  readonly settings: ISettings | null;
  /** The current epoch (number of restarts seen). */
  readonly epoch: number;

  readonly statusChanged: ISignal<IMemorySession, ConnectionStatus>;
  readonly cellRecorded: ISignal<IMemorySession, ICellEntry>;
  readonly devicesChanged: ISignal<IMemorySession, ReadonlyArray<IDeviceInfo>>;
  readonly samplesAdded: ISignal<IMemorySession, ReadonlyArray<ISample>>;
  readonly insightChanged: ISignal<IMemorySession, IInsight | null>;
  /** Any other change (warnings, restarts, history cleared, settings). */
  readonly changed: ISignal<IMemorySession, void>;

  /** Send a typed request on the control comm. Rejects on error reply or timeout. */
  request<M extends Method>(
    method: M,
    params: IRequestMap[M]['params']
  ): Promise<IRequestMap[M]['result']>;
  /** Scroll the notebook to the cell with this id and select it (no-op if gone). */
  revealCell(cellId: string): void;
}

/** Follows notebooks and their sessions; the panel shows the active one. */
export interface IMemoryTracker {
  readonly activeSession: IMemorySession | null;
  readonly activeChanged: ISignal<IMemoryTracker, IMemorySession | null>;
  sessionFor(path: string): IMemorySession | null;
}

export const IMemoryTracker = new Token<IMemoryTracker>(
  'jupyterlab-vramscope:IMemoryTracker',
  'Tracks the vramscope memory session of each open notebook.'
);

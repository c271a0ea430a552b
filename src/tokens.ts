/**
 * Tokens and the interfaces shared between vramscope's models and views.
 *
 * Models (src/model/) implement these and emit signals; views (src/panel/, src/timeline/,
 * src/insight/, src/footer/) only read them and render.
 */
import { Token } from '@lumino/coreutils';
import { IDisposable } from '@lumino/disposable';
import { ISignal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import {
  ICellRecord,
  IDeviceInfo,
  IInsight,
  IKernelInfo,
  IRequestMap,
  ISample,
  KernelMessage,
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

/**
 * The cell the kernel is running now, known from this front end's own execute request and
 * the kernel's `execute_input` for it (the bridge reports a cell only once it has ended).
 */
export interface IRunningCell {
  /** The execute request's msg_id. */
  msgId: string;
  cellId: string | null;
  executionCount: number | null;
  /** Kernel wall-clock start (UNIX seconds): the date of the kernel's `execute_input`. */
  start: number;
  /** The first non-empty line of the cell's code. */
  codeHead: string;
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
  /** The cell running now (this front end's execute requests only), or null. */
  readonly runningCell: IRunningCell | null;
  readonly settings: ISettings | null;
  /** The current epoch (number of restarts seen). */
  readonly epoch: number;

  readonly statusChanged: ISignal<IMemorySession, ConnectionStatus>;
  readonly cellRecorded: ISignal<IMemorySession, ICellEntry>;
  readonly devicesChanged: ISignal<IMemorySession, ReadonlyArray<IDeviceInfo>>;
  readonly samplesAdded: ISignal<IMemorySession, ReadonlyArray<ISample>>;
  readonly insightChanged: ISignal<IMemorySession, IInsight | null>;
  readonly runningCellChanged: ISignal<IMemorySession, IRunningCell | null>;
  /** Any other change (warnings, restarts, history cleared, settings). */
  readonly changed: ISignal<IMemorySession, void>;
  /** Every valid kernel message, after the session applied it (feature models filter it). */
  readonly messageReceived: ISignal<IMemorySession, KernelMessage>;

  /** Send a typed request on the control comm. Rejects on error reply or timeout. */
  request<M extends Method>(
    method: M,
    params: IRequestMap[M]['params']
  ): Promise<IRequestMap[M]['result']>;
  /** Scroll the notebook to the cell with this id and select it (no-op if gone). */
  revealCell(cellId: string): void;
  /** Forget the local history (and ask the kernel to forget its own when connected). */
  clearHistory?(): Promise<void>;
  /** Run the bootstrap and open the comms again (e.g. after `%pip install vramscope`). */
  reconnect?(): void;
}

/** Front-end settings (schema/plugin.json), as the views read them. */
export interface IFrontendSettings {
  units: 'binary' | 'decimal';
  showFooter: boolean;
  /** Footer magnitude thresholds, bytes: below `footerMedium` is small, from `footerLarge` large. */
  footerMedium: number;
  footerLarge: number;
  sampleHz: number;
  cudaPeakPolicy: 'reset' | 'preserve';
  /** How the kernel finds a cell's CPU peak (setting `cpu_peak`). */
  cpuPeak: 'sampled' | 'exact';
  insight: boolean;
  insightBudgetMs: number;
}

/** A view that follows one session; the panel calls `setSession` when the notebook changes. */
export interface IMemorySessionView {
  setSession(session: IMemorySession | null): void;
}

/** Follows notebooks and their sessions; the panel shows the active one. */
export interface IMemoryTracker {
  readonly activeSession: IMemorySession | null;
  readonly activeChanged: ISignal<IMemoryTracker, IMemorySession | null>;
  sessionFor(path: string): IMemorySession | null;
  /** The session of a notebook widget (a `NotebookPanel`), or null. */
  sessionForWidget(widget: Widget): IMemorySession | null;
  /** A session was created for a newly opened notebook. */
  readonly sessionAdded: ISignal<IMemoryTracker, IMemorySessionAdded>;
  /** Front-end settings (defaults until the setting registry has loaded). */
  readonly settings: IFrontendSettings;
  readonly settingsChanged: ISignal<IMemoryTracker, IFrontendSettings>;
}

/** Payload of `IMemoryTracker.sessionAdded`. */
export interface IMemorySessionAdded {
  session: IMemorySession;
  /** The notebook widget (a `NotebookPanel`). */
  widget: Widget;
}

export const IMemoryTracker = new Token<IMemoryTracker>(
  'jupyterlab-vramscope:IMemoryTracker',
  'Tracks the vramscope memory session of each open notebook.'
);

/** What a section puts in its header's toolbar: named widgets (`ToolbarButton`s). */
export interface ISectionToolbarItem {
  name: string;
  widget: Widget;
}

/** Options of `IMemoryPanel.addSection`. */
export interface ISectionOptions {
  /** Lower first; built-in sections use 100 (devices) and 200 (cells). */
  rank?: number;
  /** Collapsed unless the user opened it before (the panel remembers). */
  collapsed?: boolean;
  /** Buttons in the section's header. */
  toolbar?: ReadonlyArray<ISectionToolbarItem>;
  /**
   * Its weight in sharing the height among the open panes, against theirs (default 2, a
   * whole number of at least 1): the timeline takes 3, since a plot cannot scroll where a
   * list can. It sets the first layout and the room a pane gets when it is opened; once the
   * user drags a divider, the panes keep the sizes the user gave them.
   */
  share?: number;
}

/** The best thing to do now, for the panel's answer line. */
export interface IBestAction {
  /** Plain text: "Checkpoint model.layers". */
  title: string;
  /** "-24.5 MiB saved activations" (formatted in the user's units), or '' when unknown. */
  saving: string;
  /** Bring the action's card into view. */
  reveal(): void;
}

/** Where the answer line takes its best action from (the Optimize plugin provides one). */
export interface IBestActionSource {
  /** Emitted when the followed session's best action may have changed. */
  readonly changed: ISignal<IBestActionSource, void>;
  /** Follow a session's advice (null: none). */
  setSession(session: IMemorySession | null): void;
  /** The best action now; null when there is advice and nothing to do, or no advice. */
  readonly best: IBestAction | null;
  /** Whether advice was computed for the followed session at all. */
  readonly hasAdvice: boolean;
  /** Ask for advice (opens the section that shows it). */
  open(): void;
}

/** The vramscope side panel; other plugins add sections to it. */
export interface IMemoryPanel {
  /**
   * Add a titled, collapsible pane (lower `rank` first). If `widget` implements
   * `IMemorySessionView`, the panel calls `setSession` with the active notebook's session now
   * and on every change.
   */
  addSection(
    title: string,
    widget: Widget,
    options?: ISectionOptions
  ): IDisposable;
  /** Expand the pane titled `title` and scroll it into view; resolves to its content. */
  revealSection(title: string): Widget | null;
  /** The answer line's best action comes from `source` (null: none). */
  setBestActionSource(source: IBestActionSource | null): void;
}

export const IMemoryPanel = new Token<IMemoryPanel>(
  'jupyterlab-vramscope:IMemoryPanel',
  'The vramscope side panel, to which sections can be added.'
);

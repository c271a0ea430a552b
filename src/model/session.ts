/**
 * `MemorySession`: the memory state of one notebook (no DOM, no kernel objects).
 *
 * The connection (`KernelBridge`) feeds it raw comm payloads through `handleMessage` and gives
 * it a transport for requests; its `KernelTraffic` (./traffic.ts) validates them, settles the
 * requests and hands the rest here. The session keeps the state, history across kernel
 * restarts included (each entry carries the epoch it ran in), and emits the signals the views
 * render from.
 */
import { ISignal, Signal } from '@lumino/signaling';

import {
  ICellRecord,
  IDeviceInfo,
  IHelloMessage,
  IInsight,
  IKernelInfo,
  IRequestMap,
  IRequestMessage,
  ISample,
  ISettings,
  KernelMessage,
  Method
} from '../protocol';
import {
  ConnectionStatus,
  ICellEntry,
  IMemorySession,
  IRunningCell
} from '../tokens';
import { freshSamples, mergeSamples } from './backfill';
import { CellHistory } from './history';
import { withLayers } from './insightlayers';
import { RingBuffer } from './ringbuffer';
import { KernelTraffic, StateMessage } from './traffic';
import { WarningList } from './warnings';

export { RequestError } from './requests';
export { cellKey } from './history';

export class MemorySession implements IMemorySession {
  constructor(options: MemorySession.IOptions) {
    this._path = options.path;
    this._samples = new RingBuffer<ISample>(options.sampleCapacity ?? 288000);
    this._traffic = new KernelTraffic({
      timeoutMs: options.requestTimeoutMs ?? 10000,
      sink: {
        status: () => this._status,
        setStatus: (status, message) => this.setStatus(status, message),
        addWarning: message => this.addWarning(message),
        hello: msg => this._onHello(msg),
        apply: msg => this._apply(msg),
        settingsApplied: settings => {
          this._settings = settings;
          this._changed.emit();
        },
        received: msg => this._messageReceived.emit(msg)
      }
    });
    this._history = new CellHistory(options.maxCells ?? 5000);
    this._revealHandler = options.revealCell ?? null;
    this._now = options.now ?? (() => Date.now() / 1000);
  }

  get path(): string {
    return this._path;
  }
  set path(value: string) {
    if (value !== this._path) {
      this._path = value;
      this._changed.emit();
    }
  }

  get status(): ConnectionStatus {
    return this._status;
  }
  get statusMessage(): string {
    return this._statusMessage;
  }
  get warnings(): ReadonlyArray<string> {
    return this._warningList.items;
  }
  get kernel(): IKernelInfo | null {
    return this._kernel;
  }
  get devices(): ReadonlyArray<IDeviceInfo> {
    return this._devices;
  }
  get cells(): ReadonlyArray<ICellEntry> {
    return this._history.entries;
  }
  get samples(): RingBuffer<ISample> {
    return this._samples;
  }
  get restarts(): ReadonlyArray<number> {
    return this._restarts;
  }
  get insight(): IInsight | null {
    return this._insight;
  }
  get settings(): ISettings | null {
    return this._settings;
  }
  get epoch(): number {
    return this._epoch;
  }
  /** The bridge version from the last `hello`. */
  get bridgeVersion(): string | null {
    return this._bridgeVersion;
  }
  /** The kernel process's `session_id` from the last `hello`. */
  get sessionId(): string | null {
    return this._sessionId;
  }
  get isDisposed(): boolean {
    return this._isDisposed;
  }

  get statusChanged(): ISignal<this, ConnectionStatus> {
    return this._statusChanged;
  }
  get cellRecorded(): ISignal<this, ICellEntry> {
    return this._cellRecorded;
  }
  get devicesChanged(): ISignal<this, ReadonlyArray<IDeviceInfo>> {
    return this._devicesChanged;
  }
  get samplesAdded(): ISignal<this, ReadonlyArray<ISample>> {
    return this._samplesAdded;
  }
  get runningCell(): IRunningCell | null {
    return this._running;
  }
  get runningCellChanged(): ISignal<this, IRunningCell | null> {
    return this._runningCellChanged;
  }
  get insightChanged(): ISignal<this, IInsight | null> {
    return this._insightChanged;
  }
  /**
   * Every valid kernel message, after the session has applied it. Feature models (advice,
   * exports, processes) follow the message types they own through this one signal.
   */
  get messageReceived(): ISignal<this, KernelMessage> {
    return this._messageReceived;
  }

  get changed(): ISignal<this, void> {
    return this._changed;
  }
  /** A valid `hello` was accepted (the connection sends the front-end settings then). */
  get helloReceived(): ISignal<this, IHelloMessage> {
    return this._helloReceived;
  }

  /** Set the connection status (called by the connection). */
  setStatus(status: ConnectionStatus, message = ''): void {
    if (status === this._status && message === this._statusMessage) {
      return;
    }
    this._status = status;
    this._statusMessage = message;
    this._statusChanged.emit(status);
  }

  /**
   * Where requests go: a function sending a payload on the control comm, or null when
   * disconnected (pending requests are then rejected).
   */
  setTransport(send: ((message: IRequestMessage) => void) | null): void {
    this._traffic.setTransport(send);
  }

  /** Set by the connection: what `reconnect()` does. */
  setReconnectHandler(handler: (() => void) | null): void {
    this._reconnectHandler = handler;
  }

  reconnect(): void {
    this._reconnectHandler?.();
  }

  /**
   * Handle one raw payload from a comm. Returns the validated message, or null when it was
   * invalid (then a warning is added). Never throws.
   */
  handleMessage(raw: unknown): KernelMessage | null {
    return this._isDisposed ? null : this._traffic.receive(raw);
  }

  /**
   * Mark a kernel restart (or a kernel change): bumps the epoch and records the time; the
   * history is kept. Pending requests are rejected.
   */
  markRestart(time?: number): void {
    this.cellEnded(null);
    this._epoch++;
    this._restarts.push(time ?? this._now());
    this._epochSessionId = null;
    this._kernel = null;
    this._traffic.rejectAll('restarted', 'the kernel restarted');
    this._changed.emit();
  }

  /** The kernel started running `cell` (one of this front end's execute requests). */
  cellStarted(cell: IRunningCell): void {
    this._running = { ...cell };
    this._runningCellChanged.emit(this._running);
  }

  /** The execute request `msgId` was answered; null: whatever was running is not any more. */
  cellEnded(msgId: string | null): void {
    if (!this._running || (msgId !== null && this._running.msgId !== msgId)) {
      return;
    }
    this._running = null;
    this._runningCellChanged.emit(null);
  }

  addWarning(message: string): void {
    if (this._warningList.add(message)) {
      this._changed.emit();
    }
  }

  /**
   * Replace the bridge's own warnings (from `hello`, updated by `devices`): the previous
   * ones are dropped, front-end warnings (e.g. invalid messages) are kept.
   */
  private _setBridgeWarnings(
    warnings: ReadonlyArray<string>,
    emit = true
  ): void {
    this._warningList.replaceBridge(warnings);
    for (const w of warnings) {
      this.addWarning(w);
    }
    if (this._status === 'connected') {
      this.setStatus('connected', warnings.join(' '));
    }
    if (emit) {
      this._changed.emit();
    }
  }

  clearWarnings(): void {
    if (this._warningList.clear()) {
      this._changed.emit();
    }
  }

  /** Forget the local history and restarts; asks the kernel too when connected. */
  async clearHistory(): Promise<void> {
    this._history.clear();
    this._restarts = [];
    this._samples.clear();
    this._changed.emit();
    if (this._traffic.isOpen && this._status === 'connected') {
      try {
        await this.request('clear_history', {});
      } catch (e) {
        this.addWarning(
          `Could not clear the kernel's history: ${(e as Error).message}`
        );
      }
    }
  }

  request<M extends Method>(
    method: M,
    params: IRequestMap[M]['params']
  ): Promise<IRequestMap[M]['result']> {
    return this._traffic.request(method, params);
  }

  revealCell(cellId: string): void {
    this._revealHandler?.(cellId);
  }

  /** Set what `revealCell` does (the tracker knows the notebook widget). */
  setRevealHandler(handler: ((cellId: string) => void) | null): void {
    this._revealHandler = handler;
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this._traffic.dispose();
    this._revealHandler = null;
    this._reconnectHandler = null;
    Signal.clearData(this);
  }

  /** Apply a message that changes the state (traffic took the hello, replies and errors). */
  private _apply(msg: StateMessage): void {
    switch (msg.type) {
      case 'cell':
      case 'cells':
        this._setDevices(msg.devices);
        for (const record of msg.type === 'cell' ? [msg.record] : msg.records) {
          this._addCell(record, true);
        }
        break;
      case 'samples':
        this._samples.push(...msg.samples);
        if (msg.samples.length) {
          this._samplesAdded.emit(msg.samples);
        }
        break;
      case 'devices':
        this._setDevices(msg.devices);
        if (msg.warnings) {
          this._setBridgeWarnings(msg.warnings);
        }
        break;
      case 'insight':
        this._insight = withLayers(msg.insight, this._insight);
        this._insightChanged.emit(this._insight);
        break;
      case 'notice':
        this.addWarning(msg.message);
        break;
    }
  }

  /** A `hello` that speaks our protocol (traffic checked the version). */
  private _onHello(msg: IHelloMessage): void {
    // A new kernel process that we did not see restarting (e.g. restarted elsewhere).
    if (
      this._epochSessionId !== null &&
      this._epochSessionId !== msg.session_id
    ) {
      this.markRestart();
    }
    this._epochSessionId = msg.session_id;
    this._sessionId = msg.session_id;
    this._bridgeVersion = msg.bridge_version;
    this._kernel = msg.kernel;
    this._settings = msg.settings;
    this._setBridgeWarnings(msg.warnings, false);
    this._setDevices(msg.devices);
    let added = 0;
    for (const record of msg.cells) {
      if (this._addCell(record, false)) {
        added++;
      }
    }
    if (added) {
      this._history.sort();
    }
    this._helloBoundary = this._samples.length
      ? this._samples.get(this._samples.length - 1).t
      : null;
    this.setStatus('connected', msg.warnings.join(' '));
    if (msg.insight) {
      // the kernel's last insight (since 1.1): a reloaded page shows it without asking
      this._insight = msg.insight;
      this._insightChanged.emit(msg.insight);
    }
    this._changed.emit();
    this._helloReceived.emit(msg);
  }

  /**
   * Fetch the samples the kernel kept that this session has not seen (a reloaded page, a
   * reconnect after a dropped comm), so the timeline loses nothing the kernel still has.
   */
  async backfillSamples(): Promise<void> {
    // from the newest sample held when the kernel greeted us: live samples that arrived
    // since (the request waits for an idle kernel) must not hide the older ones it kept
    const last = this._helloBoundary;
    const samples = await this._traffic.keptSamples(last);
    if (samples === null || this._isDisposed) {
      return; // an older bridge, or disconnected meanwhile: nothing to add
    }
    const fresh = freshSamples(this._samples, samples, last);
    if (typeof fresh === 'string') {
      this.addWarning(`Dropped an invalid sample from the kernel: ${fresh}`);
      return;
    }
    if (fresh.length) {
      this._samples = mergeSamples(this._samples, fresh);
      this._samplesAdded.emit(fresh);
    }
  }

  private _setDevices(devices: IDeviceInfo[]): void {
    this._devices = devices;
    this._devicesChanged.emit(devices);
  }

  /** Add a record unless already known; returns whether it was added. */
  private _addCell(record: ICellRecord, emit: boolean): boolean {
    const entry = this._history.add(record, this._epoch);
    if (entry && emit) {
      this._cellRecorded.emit(entry);
    }
    return entry !== null;
  }

  private _path: string;
  private _status: ConnectionStatus = 'idle';
  private _statusMessage = '';
  private _warningList = new WarningList();
  private _kernel: IKernelInfo | null = null;
  private _devices: IDeviceInfo[] = [];
  private _history: CellHistory;
  private _samples: RingBuffer<ISample>;
  private _restarts: number[] = [];
  private _insight: IInsight | null = null;
  private _settings: ISettings | null = null;
  private _epoch = 0;
  private _epochSessionId: string | null = null;
  private _sessionId: string | null = null;
  private _bridgeVersion: string | null = null;
  private _helloBoundary: number | null = null;
  private _traffic: KernelTraffic;
  private _revealHandler: ((cellId: string) => void) | null;
  private _reconnectHandler: (() => void) | null = null;
  private _now: () => number;
  private _isDisposed = false;
  private _statusChanged = new Signal<this, ConnectionStatus>(this);
  private _cellRecorded = new Signal<this, ICellEntry>(this);
  private _devicesChanged = new Signal<this, ReadonlyArray<IDeviceInfo>>(this);
  private _samplesAdded = new Signal<this, ReadonlyArray<ISample>>(this);
  private _insightChanged = new Signal<this, IInsight | null>(this);
  private _running: IRunningCell | null = null;
  private _runningCellChanged = new Signal<this, IRunningCell | null>(this);
  private _changed = new Signal<this, void>(this);
  private _messageReceived = new Signal<this, KernelMessage>(this);
  private _helloReceived = new Signal<this, IHelloMessage>(this);
}

export namespace MemorySession {
  export interface IOptions {
    /** The notebook's path. */
    path: string;
    /** Samples kept (default 288000: eight hours at 10 Hz; the timeline keeps typed copies). */
    sampleCapacity?: number;
    /** Request timeout in ms (default 10000). */
    requestTimeoutMs?: number;
    /** Cells kept in the history (default 5000; oldest dropped). */
    maxCells?: number;
    revealCell?: (cellId: string) => void;
    /** Clock in UNIX seconds (for tests). */
    now?: () => number;
  }
}

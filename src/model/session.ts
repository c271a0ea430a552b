/**
 * `MemorySession`: the memory state of one notebook (no DOM, no kernel objects).
 *
 * The connection (`KernelBridge`) feeds it raw comm payloads through `handleMessage` and gives
 * it a transport for requests; the session validates, keeps history across kernel restarts
 * (each entry carries the epoch it ran in), and emits signals the views render from.
 */
import { PromiseDelegate } from '@lumino/coreutils';
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
  Method,
  PROTOCOL_VERSION
} from '../protocol';
import {
  ConnectionStatus,
  ICellEntry,
  IMemorySession,
  IRunningCell
} from '../tokens';
import { validateKernelMessage, validateSample } from '../validate';
import { RingBuffer } from './ringbuffer';

/** A request rejected by the kernel with an `error` message (or by a timeout / disconnect). */
export class RequestError extends Error {
  constructor(
    message: string,
    readonly code: string
  ) {
    super(message);
    this.name = 'RequestError';
  }
}

export class MemorySession implements IMemorySession {
  constructor(options: MemorySession.IOptions) {
    this._path = options.path;
    this._samples = new RingBuffer<ISample>(options.sampleCapacity ?? 288000);
    this._timeoutMs = options.requestTimeoutMs ?? 10000;
    this._maxCells = options.maxCells ?? 5000;
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
    return this._warnings;
  }
  get kernel(): IKernelInfo | null {
    return this._kernel;
  }
  get devices(): ReadonlyArray<IDeviceInfo> {
    return this._devices;
  }
  get cells(): ReadonlyArray<ICellEntry> {
    return this._cells;
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
    this._transport = send;
    if (!send) {
      this._rejectPending(
        'disconnected',
        'the vramscope connection was closed'
      );
    }
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
    if (this._isDisposed) {
      return null;
    }
    const msg = validateKernelMessage(raw);
    if (typeof msg === 'string') {
      this.addWarning(`Dropped an invalid message from the kernel: ${msg}`);
      console.warn('vramscope: dropped an invalid kernel message:', msg, raw);
      this._reportInvalid(msg);
      return null;
    }
    try {
      this._dispatch(msg);
      this._messageReceived.emit(msg);
    } catch (e) {
      // A listener failing must not break the comm handler.
      console.error('vramscope: error while handling a kernel message', e);
    }
    return msg;
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
    this._rejectPending('restarted', 'the kernel restarted');
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
    if (this._warnings[this._warnings.length - 1] === message) {
      return;
    }
    this._warnings.push(message);
    if (this._warnings.length > Private.MAX_WARNINGS) {
      this._warnings.splice(0, this._warnings.length - Private.MAX_WARNINGS);
    }
    this._changed.emit();
  }

  /**
   * Replace the bridge's own warnings (from `hello`, updated by `devices`): the previous
   * ones are dropped, front-end warnings (e.g. invalid messages) are kept.
   */
  private _setBridgeWarnings(
    warnings: ReadonlyArray<string>,
    emit = true
  ): void {
    const previous = new Set(this._bridgeWarnings);
    this._warnings = this._warnings.filter(w => !previous.has(w));
    this._bridgeWarnings = [...warnings];
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
    if (this._warnings.length) {
      this._warnings = [];
      this._changed.emit();
    }
  }

  /** Forget the local history and restarts; asks the kernel too when connected. */
  async clearHistory(): Promise<void> {
    this._cells = [];
    this._keys.clear();
    this._restarts = [];
    this._samples.clear();
    this._changed.emit();
    if (this._transport && this._status === 'connected') {
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
    const send = this._transport;
    if (!send || this._isDisposed) {
      return Promise.reject(
        new RequestError(
          `vramscope is not connected (${this._status})`,
          'disconnected'
        )
      );
    }
    const id = `vs-${Private.ids.next++}`;
    const delegate = new PromiseDelegate<unknown>();
    const timer = setTimeout(() => {
      if (this._pending.delete(id)) {
        delegate.reject(
          new RequestError(
            `${method}: no reply within ${this._timeoutMs} ms`,
            'timeout'
          )
        );
      }
    }, this._timeoutMs);
    this._pending.set(id, { delegate, timer, method });
    try {
      send({ type: 'request', id, method, params } as IRequestMessage);
    } catch (e) {
      this._pending.delete(id);
      clearTimeout(timer);
      delegate.reject(
        new RequestError(`${method}: could not send (${String(e)})`, 'send')
      );
    }
    return delegate.promise as Promise<IRequestMap[M]['result']>;
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
    this._transport = null;
    this._rejectPending('disposed', 'the session was disposed');
    this._revealHandler = null;
    this._reconnectHandler = null;
    Signal.clearData(this);
  }

  private _dispatch(msg: KernelMessage): void {
    switch (msg.type) {
      case 'hello':
        this._onHello(msg);
        break;
      case 'cell':
        this._setDevices(msg.devices);
        this._addCell(msg.record, true);
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
        this._insight = msg.insight;
        this._insightChanged.emit(msg.insight);
        break;
      case 'notice':
        this.addWarning(msg.message);
        break;
      case 'error': {
        const pending = msg.in_reply_to
          ? this._pending.get(msg.in_reply_to)
          : undefined;
        if (pending && msg.in_reply_to) {
          this._settle(
            msg.in_reply_to,
            new RequestError(msg.message, msg.code)
          );
        } else if (msg.code === 'protocol_mismatch') {
          this.setStatus('protocol-mismatch', msg.message);
        } else {
          this.addWarning(`Kernel bridge error (${msg.code}): ${msg.message}`);
        }
        break;
      }
      case 'reply':
        if (this._pending.has(msg.id)) {
          const method = this._pending.get(msg.id)!.method;
          this._settle(msg.id, null, msg.result);
          if (method === 'set_settings' || method === 'clear_history') {
            this._onReply(method, msg.result);
          }
        }
        break;
    }
  }

  /** Answer an invalid kernel message with a `report_error` request (at most 20 a session). */
  private _reportInvalid(reason: string): void {
    if (this._status !== 'connected' || this._errorsReported >= 20) {
      return;
    }
    this._errorsReported++;
    this.request('report_error', {
      code: 'invalid_message',
      message: reason.slice(0, 480)
    }).catch(() => undefined);
  }

  private _onReply(method: Method, result: unknown): void {
    if (method === 'set_settings') {
      const settings = (result as { settings?: ISettings } | null)?.settings;
      if (settings && typeof settings === 'object') {
        this._settings = settings;
        this._changed.emit();
      }
    }
  }

  private _onHello(msg: IHelloMessage): void {
    const theirs = Private.major(msg.protocol_version);
    const ours = Private.major(PROTOCOL_VERSION);
    if (theirs !== ours) {
      this.setStatus(
        'protocol-mismatch',
        `Protocol mismatch: this front end speaks vramscope protocol ${PROTOCOL_VERSION}, ` +
          `the kernel bridge ${msg.protocol_version} (bridge ${msg.bridge_version}). ` +
          'Install matching versions of jupyterlab-vramscope and vramscope.'
      );
      return;
    }
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
      this._sortCells();
    }
    this._helloBoundary = this._samples.length
      ? this._samples.get(this._samples.length - 1).t
      : null;
    this.setStatus('connected', msg.warnings.join(' '));
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
    let samples: unknown;
    try {
      const result = await this.request(
        'get_samples',
        last === null ? {} : { since: last }
      );
      samples = result?.samples;
    } catch {
      return; // an older bridge, or disconnected meanwhile: nothing to add
    }
    if (!Array.isArray(samples) || this._isDisposed) {
      return;
    }
    const held = new Set<number>();
    for (let i = this._samples.length - 1; i >= 0; i--) {
      const t = this._samples.get(i).t;
      if (last !== null && t <= last) {
        break;
      }
      held.add(t); // live samples that came in while the request was answered
    }
    const fresh: ISample[] = [];
    for (const raw of samples) {
      const sample = validateSample(raw);
      if (typeof sample === 'string') {
        this.addWarning(`Dropped an invalid sample from the kernel: ${sample}`);
        return;
      }
      if ((last === null || sample.t > last) && !held.has(sample.t)) {
        fresh.push(sample);
      }
    }
    if (!fresh.length) {
      return;
    }
    this._insertSamples(fresh);
  }

  /**
   * Merge samples into the ones held, in time order. A new buffer object: views that mirror
   * the buffer (the timeline's series) see a different buffer and read it again from the start.
   */
  private _insertSamples(fresh: ISample[]): void {
    const all = [...fresh, ...this._samples.toArray()].sort(
      (a, b) => a.t - b.t
    );
    const ring = new RingBuffer<ISample>(this._samples.capacity);
    ring.push(...all.slice(-ring.capacity));
    this._samples = ring;
    this._samplesAdded.emit(fresh);
  }

  private _setDevices(devices: IDeviceInfo[]): void {
    this._devices = devices;
    this._devicesChanged.emit(devices);
  }

  /** Add a record unless already known; returns whether it was added. */
  private _addCell(record: ICellRecord, emit: boolean): boolean {
    const key = Private.cellKey(record);
    if (this._keys.has(key)) {
      return false;
    }
    this._keys.add(key);
    const entry: ICellEntry = { record, epoch: this._epoch };
    this._cells.push(entry);
    if (this._cells.length > this._maxCells) {
      const removed = this._cells.splice(
        0,
        this._cells.length - this._maxCells
      );
      for (const r of removed) {
        this._keys.delete(Private.cellKey(r.record));
      }
    }
    if (emit) {
      this._cellRecorded.emit(entry);
    }
    return true;
  }

  private _sortCells(): void {
    // Stable: epoch first (restart order), then kernel start time.
    this._cells.sort(
      (a, b) => a.epoch - b.epoch || a.record.start_time - b.record.start_time
    );
  }

  private _settle(id: string, error: Error | null, result?: unknown): void {
    const pending = this._pending.get(id);
    if (!pending) {
      return;
    }
    this._pending.delete(id);
    clearTimeout(pending.timer);
    if (error) {
      pending.delegate.reject(error);
    } else {
      pending.delegate.resolve(result);
    }
  }

  private _rejectPending(code: string, reason: string): void {
    for (const [id, p] of Array.from(this._pending)) {
      this._settle(id, new RequestError(`${p.method}: ${reason}`, code));
    }
  }

  private _path: string;
  private _status: ConnectionStatus = 'idle';
  private _statusMessage = '';
  private _warnings: string[] = [];
  private _bridgeWarnings: string[] = [];
  private _kernel: IKernelInfo | null = null;
  private _devices: IDeviceInfo[] = [];
  private _cells: ICellEntry[] = [];
  private _keys = new Set<string>();
  private _samples: RingBuffer<ISample>;
  private _restarts: number[] = [];
  private _insight: IInsight | null = null;
  private _settings: ISettings | null = null;
  private _epoch = 0;
  private _epochSessionId: string | null = null;
  private _sessionId: string | null = null;
  private _bridgeVersion: string | null = null;
  private _transport: ((message: IRequestMessage) => void) | null = null;
  private _errorsReported = 0;
  private _helloBoundary: number | null = null;
  private _pending = new Map<string, Private.IPending>();
  private _timeoutMs: number;
  private _maxCells: number;
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

/** The key that identifies one execution: cell_id + execution_count + start_time. */
export function cellKey(record: ICellRecord): string {
  return Private.cellKey(record);
}

namespace Private {
  export const MAX_WARNINGS = 20;
  export const ids = { next: 1 };

  export interface IPending {
    delegate: PromiseDelegate<unknown>;
    timer: ReturnType<typeof setTimeout>;
    method: Method;
  }

  export function cellKey(r: ICellRecord): string {
    return `${r.cell_id ?? ''}|${r.execution_count ?? ''}|${r.start_time}`;
  }

  export function major(version: string): string {
    return version.split('.')[0].trim();
  }
}

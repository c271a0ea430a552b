/**
 * The Optimize section's state for one notebook session: the kernel's latest advice, whether
 * a request is in flight, and the last error. It follows `advice` messages (sent by the kernel
 * when an outcome changes) always, and asks for fresh advice (`get_advice`) only while the
 * section is shown (`active`): a closed section costs the kernel nothing per cell.
 */
import { IDisposable } from '@lumino/disposable';
import { ISignal, Signal } from '@lumino/signaling';

import type { IAdvice, IBatchSearch, KernelMessage } from '../protocol';
import type { ConnectionStatus, IMemorySession } from '../tokens';
import { validateAdvice } from '../validate';

export class OptimizeModel implements IDisposable {
  constructor(session: IMemorySession, options: OptimizeModel.IOptions = {}) {
    this.session = session;
    this._delay = options.refreshDelayMs ?? 200;
    session.messageReceived.connect(this._onMessage, this);
    session.cellRecorded.connect(this._onCell, this);
    session.insightChanged.connect(this._onCell, this);
    session.statusChanged.connect(this._onStatus, this);
  }

  readonly session: IMemorySession;

  /** The latest advice (null until the first answer). */
  get advice(): IAdvice | null {
    return this._advice;
  }

  /**
   * The latest batch-size search (`vramscope.find_batch_size` progress), null before any.
   * Updated by `batch_search` messages whether the section is shown or not.
   */
  get search(): IBatchSearch | null {
    return this._search;
  }

  /** Why the last request failed ('' when it did not). */
  get error(): string {
    return this._error;
  }

  /** A `get_advice` request is in flight. */
  get busy(): boolean {
    return this._busy;
  }

  /** Whether the advice may be out of date (cells ran since it was computed). */
  get stale(): boolean {
    return this._stale;
  }

  /**
   * Whether the section is shown. While active, new cells trigger a refresh (coalesced);
   * becoming active refreshes stale advice.
   */
  get active(): boolean {
    return this._active;
  }
  set active(value: boolean) {
    if (value === this._active) {
      return;
    }
    this._active = value;
    if (!value) {
      this._cancelTimer();
    } else if (this._stale) {
      void this.refresh();
    }
  }

  /** Emitted on every change of advice, busy, error or staleness. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  /**
   * Ask the kernel for fresh advice now. One request at a time: a call while one is in
   * flight asks once more after it; every call resolves when the advice is up to date.
   */
  refresh(): Promise<void> {
    if (this.session.isDisposed) {
      this.dispose();
    }
    if (this._isDisposed) {
      return Promise.resolve();
    }
    this._cancelTimer();
    if (this._running) {
      this._again = true;
      return this._running;
    }
    if (this.session.status !== 'connected') {
      this._stale = true;
      this._changed.emit();
      return Promise.resolve();
    }
    this._running = this._fetch().finally(() => {
      this._running = null;
    });
    return this._running;
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this._cancelTimer();
    const s = this.session;
    s.messageReceived.disconnect(this._onMessage, this);
    s.cellRecorded.disconnect(this._onCell, this);
    s.insightChanged.disconnect(this._onCell, this);
    s.statusChanged.disconnect(this._onStatus, this);
    Signal.clearData(this);
  }

  private async _fetch(): Promise<void> {
    this._busy = true;
    do {
      this._again = false;
      this._stale = false;
      this._changed.emit();
      try {
        const advice = await requestAdvice(this.session);
        if (!this._isDisposed) {
          this._advice = advice;
          this._error = '';
        }
      } catch (err) {
        if (!this._isDisposed) {
          this._error = `Could not get advice: ${(err as Error)?.message ?? String(err)}`;
        }
      }
    } while (this._again && !this._isDisposed);
    this._busy = false;
    if (!this._isDisposed) {
      this._changed.emit();
    }
  }

  private _onMessage(_: IMemorySession, message: KernelMessage): void {
    // The session validated the message (validate.ts) before emitting it.
    if (message.type === 'advice') {
      this._advice = message.advice;
      this._error = '';
      this._changed.emit();
    } else if (message.type === 'batch_search') {
      this._search = message.search;
      this._changed.emit();
    }
  }

  /** A cell ran (or its insight came): the advice may have changed. */
  private _onCell(): void {
    this._markStale();
  }

  private _onStatus(_: IMemorySession, status: ConnectionStatus): void {
    this._markStale(status === 'connected');
  }

  private _markStale(schedule = true): void {
    const was = this._stale;
    this._stale = true;
    if (this._active && schedule) {
      this._schedule();
    } else if (!was) {
      this._changed.emit();
    }
  }

  private _schedule(): void {
    if (this._timer !== null) {
      return;
    }
    this._timer = setTimeout(() => {
      this._timer = null;
      void this.refresh();
    }, this._delay);
  }

  private _cancelTimer(): void {
    if (this._timer !== null) {
      clearTimeout(this._timer);
      this._timer = null;
    }
  }

  private _advice: IAdvice | null = null;
  private _search: IBatchSearch | null = null;
  private _error = '';
  private _busy = false;
  private _again = false;
  private _running: Promise<void> | null = null;
  private _stale = true;
  private _active = false;
  private _delay: number;
  private _timer: ReturnType<typeof setTimeout> | null = null;
  private _isDisposed = false;
  private _changed = new Signal<this, void>(this);
}

export namespace OptimizeModel {
  export interface IOptions {
    /** Wait after a cell before asking for advice (coalesces cell + insight); default 200. */
    refreshDelayMs?: number;
  }
}

/**
 * One model per session, created on first use. A disposed session has cleared its signals;
 * its model disposes itself on its next refresh and is garbage with the session.
 */
export class OptimizeModels {
  constructor(options: OptimizeModel.IOptions = {}) {
    this._options = options;
  }

  modelFor(session: IMemorySession): OptimizeModel {
    let model = this._models.get(session);
    if (!model || model.isDisposed) {
      model = new OptimizeModel(session, this._options);
      this._models.set(session, model);
    }
    return model;
  }

  private _options: OptimizeModel.IOptions;
  private _models = new WeakMap<IMemorySession, OptimizeModel>();
}

/** `get_advice` for the session's watched model; the answer is validated (protocol 1.1). */
export async function requestAdvice(session: IMemorySession): Promise<IAdvice> {
  const result = await session.request('get_advice', {});
  const advice = validateAdvice(
    (result as { advice?: unknown } | null)?.advice
  );
  if (typeof advice === 'string') {
    throw new Error(`the kernel sent invalid advice (${advice})`);
  }
  return advice;
}

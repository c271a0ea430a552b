/**
 * `QuietBackfill`: when a connection fetches the samples the kernel kept (`get_samples`, via
 * `MemorySession.backfillSamples`) after a `hello`: once the kernel has been quiet for a
 * moment: idle, and no execute request sent on this connection still unanswered.
 *
 * While a cell runs, ipykernel serves comm requests on another thread, and that work
 * (ipykernel's own included, ~200 KB measured the first time) shows in the running cell's CPU
 * memory figures. "Run All" queues every cell at once and goes idle for an instant between
 * them, and the idle status of the last cell can arrive before the busy of a cell just sent:
 * hence both conditions and the quiet period.
 */
import { Kernel } from '@jupyterlab/services';

import { ExecuteTracker } from './executes';
import type { MemorySession } from './session';

export class QuietBackfill {
  constructor(options: QuietBackfill.IOptions) {
    this._session = options.session;
    this._kernel = options.kernel;
    this._quietMs = options.quietMs;
    this._executes = new ExecuteTracker({
      sink: this._session,
      lostReplyMs: options.lostReplyMs,
      onChange: () => this.check()
    });
  }

  /** A `hello` arrived: fetch once the kernel is quiet. */
  helloReceived(): void {
    this._pending = true;
    this.check();
  }

  /** A message on the followed kernel connection (its execute requests and replies). */
  handle(args: Kernel.IAnyMessageArgs): void {
    this._executes.handle(args);
  }

  /** Forget the execute requests followed (a new kernel, a restart: none will be answered). */
  forget(): void {
    this._executes.forget();
  }

  /**
   * (Re)start the quiet period when the kernel is quiet, else cancel it (a status change, a
   * request sent or answered).
   */
  check(): void {
    if (this._timer) {
      clearTimeout(this._timer);
      this._timer = 0;
    }
    if (!this._pending || !this._kernelQuiet()) {
      return;
    }
    this._timer = window.setTimeout(() => {
      this._timer = 0;
      if (
        this._pending &&
        !this._isDisposed &&
        this._kernelQuiet() &&
        this._session.status === 'connected'
      ) {
        this._pending = false;
        void this._session.backfillSamples();
      }
    }, this._quietMs);
  }

  dispose(): void {
    this._isDisposed = true;
    clearTimeout(this._timer);
  }

  /** The kernel is idle and has no execute request of this connection left to answer. */
  private _kernelQuiet(): boolean {
    if (this._kernel()?.status !== 'idle') {
      return false;
    }
    this._executes.dropLost();
    return this._executes.size === 0;
  }

  private _session: MemorySession;
  private _kernel: () => Kernel.IKernelConnection | null;
  private _quietMs: number;
  /** This connection's execute requests not answered yet. */
  private _executes: ExecuteTracker;
  private _pending = false;
  private _timer = 0;
  private _isDisposed = false;
}

export namespace QuietBackfill {
  export interface IOptions {
    session: MemorySession;
    /** The kernel connection followed now (null: none). */
    kernel: () => Kernel.IKernelConnection | null;
    /** Quiet (idle) time before the fetch. */
    quietMs: number;
    /** An execute request still unanswered this long while the kernel is idle lost its reply. */
    lostReplyMs: number;
  }
}

/**
 * `ConnectWatchdog`: a connection attempt that stays `connecting` too long (no bootstrap
 * reply, a `hello` that never came) is tried again a few times, then reported as an error.
 * An attempt waiting behind running cells (kernel busy) keeps waiting.
 */
import { Kernel } from '@jupyterlab/services';

import type { MemorySession } from './session';

export class ConnectWatchdog {
  constructor(options: ConnectWatchdog.IOptions) {
    this._session = options.session;
    this._kernel = options.kernel;
    this._isCurrent = options.isCurrent;
    this._retry = options.retry;
    this._timeoutMs = options.timeoutMs;
    this._maxRetries = options.maxRetries;
  }

  /** Watch attempt `gen` (replaces the watch of any earlier one). */
  arm(gen: number): void {
    this.clear();
    this._timer = setTimeout(() => {
      this._timer = undefined;
      if (!this._isCurrent(gen) || this._session.status !== 'connecting') {
        return;
      }
      const kernel = this._kernel();
      if (kernel && kernel.status === 'busy') {
        // The bootstrap waits behind running cells: keep waiting.
        this.arm(gen);
        return;
      }
      if (this._retries < this._maxRetries) {
        this._retries++;
        this._retry();
      } else {
        this._session.setStatus(
          'error',
          'The vramscope bridge did not answer. Reconnect to try again.'
        );
      }
    }, this._timeoutMs);
  }

  /** The attempt settled (connected, failed, or superseded): stop watching it. */
  clear(): void {
    if (this._timer !== undefined) {
      clearTimeout(this._timer);
      this._timer = undefined;
    }
  }

  /** A `hello` came, or the user asked to reconnect: the retries start over. */
  resetRetries(): void {
    this._retries = 0;
  }

  private _session: MemorySession;
  private _kernel: () => Kernel.IKernelConnection | null;
  private _isCurrent: (gen: number) => boolean;
  private _retry: () => void;
  private _timeoutMs: number;
  private _maxRetries: number;
  private _retries = 0;
  private _timer: ReturnType<typeof setTimeout> | undefined = undefined;
}

export namespace ConnectWatchdog {
  export interface IOptions {
    session: MemorySession;
    /** The session context's kernel now (null: none). */
    kernel: () => Kernel.IKernelConnection | null;
    /** Whether attempt `gen` is still the current one (and the bridge not disposed). */
    isCurrent: (gen: number) => boolean;
    /** Try again (a new attempt). */
    retry: () => void;
    /** How long an attempt may stay `connecting` (kernel idle). */
    timeoutMs: number;
    /** Retries before the status becomes `error`. */
    maxRetries: number;
  }
}

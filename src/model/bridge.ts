/**
 * `KernelBridge`: connects one notebook's `ISessionContext` to its `MemorySession`.
 *
 * - detects non-Python kernels (kernel spec language);
 * - runs the silent bootstrap (`__import__("vramscope")._bootstrap()`: it binds no name in the
 *   user's namespace, which stays as a plain kernel's);
 *   a `ModuleNotFoundError` naming vramscope means the bridge is not installed;
 * - opens the `stream` and `control` comms (metadata: protocol version) and feeds the
 *   session; requests go out on `control`;
 * - on a kernel restart marks the restart in the session (history kept) and reconnects when
 *   the kernel is back; on a kernel change reconnects to the new kernel;
 * - pushes the front-end settings (`set_settings`) after each `hello` when they differ from
 *   the kernel's, and on change;
 * - after each `hello`, has the samples the kernel kept fetched once the kernel is quiet
 *   (./quietbackfill.ts); an attempt that hangs is retried (./watchdog.ts).
 *
 * Every connection attempt belongs to a *generation*: a restart, a kernel change, a manual
 * reconnect or `dispose()` starts a new one, and async work of an older generation (a late
 * bootstrap reply, a comm of the previous kernel process) is discarded when it resumes.
 */
import { ISessionContext } from '@jupyterlab/apputils';
import { Kernel } from '@jupyterlab/services';
import { IDisposable } from '@lumino/disposable';

import { IHelloMessage, ISettings } from '../protocol';
import { BridgeComms } from './comms';
import {
  BOOTSTRAP_CODE,
  bootstrapFailure,
  executeSilently,
  isKernelGoing,
  kernelLanguage,
  settingsDiffer
} from './kernel';
import { QuietBackfill } from './quietbackfill';
import { MemorySession } from './session';
import { ConnectWatchdog } from './watchdog';

export { BOOTSTRAP_CODE, INSTALL_LINE } from './kernel';

export class KernelBridge implements IDisposable {
  constructor(options: KernelBridge.IOptions) {
    this._context = options.sessionContext;
    this._session = options.session;
    this._backfill = new QuietBackfill({
      session: this._session,
      kernel: () => this._watched,
      quietMs: KernelBridge.BACKFILL_QUIET_MS,
      lostReplyMs: KernelBridge.LOST_REPLY_MS
    });
    this._watchdog = new ConnectWatchdog({
      session: this._session,
      kernel: () => this._context.session?.kernel ?? null,
      isCurrent: gen => !this._isDisposed && gen === this._generation,
      retry: () => void this.connect(),
      timeoutMs: options.connectTimeoutMs ?? KernelBridge.CONNECT_TIMEOUT_MS,
      maxRetries: KernelBridge.MAX_RETRIES
    });
    this._getSettings = options.getSettings ?? (() => null);
    this._context.kernelChanged.connect(this._onKernelChanged, this);
    this._context.statusChanged.connect(this._onContextStatus, this);
    this._session.helloReceived.connect(this._onHello, this);
    this._session.statusChanged.connect(this._onSessionStatus, this);
    this._session.setReconnectHandler(() => {
      this._watchdog.resetRetries();
      void this.connect();
    });
    this._watchKernel(this._context.session?.kernel ?? null);
    void this._context.ready.then(() => {
      if (!this._isDisposed && this._session.status === 'idle') {
        void this.connect();
      }
    });
  }

  get session(): MemorySession {
    return this._session;
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  /** The current connection generation (bumped by restarts, kernel changes, reconnects). */
  get generation(): number {
    return this._generation;
  }

  /**
   * (Re)connect to the current kernel: wait until it is ready, bootstrap the bridge, open the
   * comms. Safe to call at any time; an older attempt still in flight is dropped.
   */
  async connect(): Promise<void> {
    const gen = this._newGeneration();
    this._awaitingKernel = false;
    const kernel = this._context.session?.kernel ?? null;
    this._watchKernel(kernel);
    if (!kernel) {
      this._session.setStatus('idle', 'No kernel: start one to see memory.');
      return;
    }
    this._session.setStatus(
      'connecting',
      'Loading the vramscope bridge in the kernel…'
    );
    this._watchdog.arm(gen);
    const stale = () => gen !== this._generation || this._isDisposed;
    try {
      const language = await kernelLanguage(kernel);
      if (stale()) {
        return;
      }
      if (language !== null && !/^python/i.test(language)) {
        this._watchdog.clear();
        this._session.setStatus(
          'unsupported-kernel',
          `vramscope needs a Python kernel (this one is ${language})`
        );
        return;
      }
      // The execute is queued by the kernel connection until the (restarted) kernel answers
      // kernel_info, so it runs before any cell sent after the restart. Only the shell reply
      // is awaited: an iopub `idle` lost while the new process subscribes must not hang us.
      const reply = await executeSilently(kernel, BOOTSTRAP_CODE);
      if (stale()) {
        return;
      }
      const failure = bootstrapFailure(reply);
      if (failure) {
        this._watchdog.clear();
        this._session.setStatus(failure.status, failure.message);
        return;
      }
      this._openComms(kernel, gen);
    } catch (e) {
      if (!stale()) {
        // A future disposed by a restart that we have not heard of yet: the restart
        // handling reconnects; anything else is shown.
        if (isKernelGoing(kernel)) {
          return;
        }
        this._watchdog.clear();
        this._session.setStatus(
          'error',
          `Could not connect to the kernel: ${String(e)}`
        );
      }
    }
  }

  /** Send the front-end settings to the kernel when they differ from the kernel's. */
  async pushSettings(): Promise<void> {
    const params = this._getSettings();
    if (
      !params ||
      this._session.status !== 'connected' ||
      !this._comms.isOpen
    ) {
      return;
    }
    if (!settingsDiffer(params, this._session.settings)) {
      // Nothing to change: no request (each one is a busy/idle cycle in the kernel).
      return;
    }
    try {
      await this._session.request('set_settings', params);
    } catch (e) {
      this._session.addWarning(
        `Could not apply settings in the kernel: ${(e as Error).message}`
      );
    }
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this._backfill.dispose();
    this._newGeneration();
    this._watchKernel(null);
    this._context.kernelChanged.disconnect(this._onKernelChanged, this);
    this._context.statusChanged.disconnect(this._onContextStatus, this);
    this._session.helloReceived.disconnect(this._onHello, this);
    this._session.statusChanged.disconnect(this._onSessionStatus, this);
    this._session.setReconnectHandler(null);
  }

  /**
   * Start a new generation: stale work is dropped, the comms of the old one forgotten
   * (closed in the kernel only when `graceful` and the kernel is alive; a restarting or
   * replaced kernel has dropped them already).
   */
  private _newGeneration(graceful = true): number {
    this._generation++;
    this._watchdog.clear();
    this._closeComms(graceful);
    return this._generation;
  }

  private _openComms(kernel: Kernel.IKernelConnection, gen: number): void {
    this._session.setTransport(
      this._comms.open(kernel, () => gen === this._generation)
    );
  }

  /** The kernel closed a comm of the current generation. */
  private _onCommClosed(): void {
    this._closeComms();
    this._watchdog.clear();
    const status = this._session.status;
    if (status === 'protocol-mismatch' || status === 'restarting') {
      return;
    }
    this._session.setStatus(
      'error',
      'The kernel closed the vramscope connection. Reconnect to try again.'
    );
  }

  /** Forget (and close, unless the kernel already dropped them) the current comms. */
  private _closeComms(graceful = true): void {
    this._session.setTransport(null);
    this._comms.close(graceful ? this._watched : null);
  }

  private _onHello(_: MemorySession, msg: IHelloMessage): void {
    this._watchdog.clear();
    this._watchdog.resetRetries();
    void this.pushSettings();
    this._backfill.helloReceived();
  }

  /** Follow this connection's execute requests (see `QuietBackfill`). */
  private _onAnyMessage(
    kernel: Kernel.IKernelConnection,
    args: Kernel.IAnyMessageArgs
  ): void {
    if (kernel === this._watched) {
      this._backfill.handle(args);
    }
  }

  /** A protocol mismatch (in `hello` or the kernel's error): stop using the comms. */
  private _onSessionStatus(_: MemorySession, status: string): void {
    if (status === 'protocol-mismatch') {
      this._newGeneration();
    }
  }

  /** Follow the kernel connection object's own status (restarts, death, readiness). */
  private _watchKernel(kernel: Kernel.IKernelConnection | null): void {
    if (kernel === this._watched) {
      return;
    }
    if (this._watched && !this._watched.isDisposed) {
      this._watched.statusChanged.disconnect(this._onKernelStatus, this);
      this._watched.connectionStatusChanged.disconnect(
        this._onConnectionStatus,
        this
      );
      this._watched.anyMessage.disconnect(this._onAnyMessage, this);
    }
    this._watched = kernel;
    this._backfill.forget();
    if (kernel) {
      this._hadKernel = true;
      kernel.statusChanged.connect(this._onKernelStatus, this);
      kernel.anyMessage.connect(this._onAnyMessage, this);
      kernel.connectionStatusChanged.connect(this._onConnectionStatus, this);
    }
  }

  private _onKernelChanged(
    _: ISessionContext,
    change: {
      oldValue: Kernel.IKernelConnection | null;
      newValue: Kernel.IKernelConnection | null;
    }
  ): void {
    // SessionContext.restartKernel() emits kernelChanged with the same kernel once the
    // kernel connection is back: the restart was marked through the status signals.
    if (change.oldValue === change.newValue) {
      if (this._awaitingKernel) {
        this._reconnectWhenReady();
      }
      return;
    }
    const hadKernel = this._hadKernel && !!change.oldValue;
    this._newGeneration(false);
    this._watchKernel(change.newValue);
    if (hadKernel && this._session.status !== 'restarting') {
      // A different kernel process: a new epoch, the history is kept.
      this._session.markRestart();
    }
    if (change.newValue) {
      this._awaitingKernel = true;
      this._session.setStatus('connecting', 'Waiting for the new kernel…');
      this._reconnectWhenReady();
    } else {
      this._awaitingKernel = false;
      this._session.setStatus('idle', 'No kernel: start one to see memory.');
    }
  }

  private _onContextStatus(_: ISessionContext, status: Kernel.Status): void {
    // The session context says `restarting` before it asks the kernel to restart.
    if (status === 'restarting' || status === 'autorestarting') {
      this._onRestart();
    }
  }

  private _onKernelStatus(
    kernel: Kernel.IKernelConnection,
    status: Kernel.Status
  ): void {
    if (kernel !== this._watched || this._isDisposed) {
      return;
    }
    if (status === 'restarting' || status === 'autorestarting') {
      this._onRestart();
    } else if (status === 'dead') {
      this._newGeneration(false);
      this._backfill.forget();
      this._awaitingKernel = true;
      this._session.setStatus(
        'error',
        'The kernel died. Restart it to reconnect.'
      );
    } else if (
      this._awaitingKernel &&
      (status === 'idle' || status === 'busy')
    ) {
      // A status message from the (new) kernel process: its iopub reaches us.
      this._reconnectWhenReady();
    } else {
      this._backfill.check(); // idle: (re)start the quiet period; busy: cancel it
    }
  }

  private _onConnectionStatus(kernel: Kernel.IKernelConnection): void {
    if (kernel === this._watched && this._awaitingKernel) {
      this._reconnectWhenReady();
    }
  }

  /** The kernel is restarting: new generation, restart marked, reconnect once it is back. */
  private _onRestart(): void {
    if (this._awaitingKernel && this._session.status === 'restarting') {
      return; // already handled (the context and the kernel both say so)
    }
    this._newGeneration(false);
    this._backfill.forget(); // the restarted kernel answers none of them
    this._awaitingKernel = true;
    this._session.markRestart();
    this._session.setStatus(
      'restarting',
      'The kernel is restarting; history is kept.'
    );
  }

  /**
   * Reconnect once the kernel is usable: its websocket is connected and it has reported an
   * execution state (`idle`/`busy`) since the restart, or the session context finished the
   * restart (`kernelChanged`), whichever comes first. Until then, keep waiting.
   */
  private _reconnectWhenReady(): void {
    const kernel = this._context.session?.kernel ?? null;
    if (!this._awaitingKernel || this._isDisposed) {
      return;
    }
    if (!kernel) {
      this._awaitingKernel = false;
      this._session.setStatus('idle', 'No kernel: start one to see memory.');
      return;
    }
    if (
      kernel.isDisposed ||
      kernel.connectionStatus !== 'connected' ||
      this._context.isRestarting ||
      isKernelGoing(kernel)
    ) {
      return;
    }
    this._awaitingKernel = false;
    void this.connect();
  }

  private _context: ISessionContext;
  private _session: MemorySession;
  private _getSettings: () => Partial<ISettings> | null;
  private _comms = new BridgeComms({
    onMessage: data => this._session.handleMessage(data),
    onClosed: () => this._onCommClosed()
  });
  private _watched: Kernel.IKernelConnection | null = null;
  private _generation = 0;
  private _awaitingKernel = false;
  private _hadKernel = false;
  private _isDisposed = false;
  private _backfill: QuietBackfill;
  private _watchdog: ConnectWatchdog;
}

export namespace KernelBridge {
  /** Quiet (idle) time before the kernel-kept samples are fetched after a hello. */
  export const BACKFILL_QUIET_MS = 500;
  /** An execute request still unanswered this long while the kernel is idle lost its reply. */
  export const LOST_REPLY_MS = 10_000;
  /** How long an attempt may stay `connecting` (kernel idle) before it is retried. */
  export const CONNECT_TIMEOUT_MS = 8000;
  /** Retries after a timeout before the status becomes `error`. */
  export const MAX_RETRIES = 3;

  export interface IOptions {
    sessionContext: ISessionContext;
    session: MemorySession;
    /** The kernel-side settings to push after `hello` and on change (null: leave as is). */
    getSettings?: () => Partial<ISettings> | null;
    /** Overrides `CONNECT_TIMEOUT_MS` (tests). */
    connectTimeoutMs?: number;
  }
}

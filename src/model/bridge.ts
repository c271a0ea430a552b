/**
 * `KernelBridge`: connects one notebook's `ISessionContext` to its `MemorySession`.
 *
 * - detects non-Python kernels (kernel spec language);
 * - runs the silent bootstrap (`import vramscope as _vramscope; _vramscope._bootstrap()`);
 *   a `ModuleNotFoundError` naming vramscope means the bridge is not installed;
 * - opens the `stream` and `control` comms (metadata: protocol version) and feeds the
 *   session; requests go out on `control`;
 * - on a kernel restart marks the restart in the session (history kept) and reconnects when
 *   the kernel is back; on a kernel change reconnects to the new kernel;
 * - pushes the front-end settings (`set_settings`) after each `hello` when they differ from
 *   the kernel's, and on change.
 *
 * Every connection attempt belongs to a *generation*: a restart, a kernel change, a manual
 * reconnect or `dispose()` starts a new one, and async work of an older generation (a late
 * bootstrap reply, a comm of the previous kernel process) is discarded when it resumes.
 */
import { ISessionContext } from '@jupyterlab/apputils';
import { Kernel, KernelMessage } from '@jupyterlab/services';
import { IDisposable } from '@lumino/disposable';

import {
  COMM_TARGET,
  Channel,
  IHelloMessage,
  ISettings,
  PROTOCOL_VERSION
} from '../protocol';
import { MemorySession } from './session';

/** The code the front end runs silently to load the bridge in the kernel. */
export const BOOTSTRAP_CODE =
  'import vramscope as _vramscope; _vramscope._bootstrap()';

/** The exact line shown when the bridge is not installed. */
export const INSTALL_LINE = '%pip install vramscope';

export class KernelBridge implements IDisposable {
  constructor(options: KernelBridge.IOptions) {
    this._context = options.sessionContext;
    this._session = options.session;
    this._getSettings = options.getSettings ?? (() => null);
    this._connectTimeoutMs =
      options.connectTimeoutMs ?? KernelBridge.CONNECT_TIMEOUT_MS;
    this._context.kernelChanged.connect(this._onKernelChanged, this);
    this._context.statusChanged.connect(this._onContextStatus, this);
    this._session.helloReceived.connect(this._onHello, this);
    this._session.statusChanged.connect(this._onSessionStatus, this);
    this._session.setReconnectHandler(() => {
      this._retries = 0;
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
    this._armWatchdog(gen);
    const stale = () => gen !== this._generation || this._isDisposed;
    try {
      const language = await Private.kernelLanguage(kernel);
      if (stale()) {
        return;
      }
      if (language !== null && !/^python/i.test(language)) {
        this._clearWatchdog();
        this._session.setStatus(
          'unsupported-kernel',
          `vramscope needs a Python kernel (this one is ${language})`
        );
        return;
      }
      // The execute is queued by the kernel connection until the (restarted) kernel answers
      // kernel_info, so it runs before any cell sent after the restart. Only the shell reply
      // is awaited: an iopub `idle` lost while the new process subscribes must not hang us.
      const reply = await Private.execute(kernel, BOOTSTRAP_CODE);
      if (stale()) {
        return;
      }
      if (reply.status === 'error') {
        this._clearWatchdog();
        if (
          reply.ename === 'ModuleNotFoundError' &&
          /vramscope/.test(reply.evalue ?? '')
        ) {
          this._session.setStatus(
            'no-bridge',
            `vramscope is not installed in this kernel's environment. Run: ${INSTALL_LINE}`
          );
        } else {
          this._session.setStatus(
            'error',
            `The vramscope bridge failed to load: ${reply.ename}: ${reply.evalue}`
          );
        }
        return;
      }
      if (reply.status !== 'ok') {
        this._clearWatchdog();
        this._session.setStatus('error', `The bootstrap was ${reply.status}.`);
        return;
      }
      this._openComms(kernel, gen);
    } catch (e) {
      if (!stale()) {
        // A future disposed by a restart that we have not heard of yet: the restart
        // handling reconnects; anything else is shown.
        if (Private.isKernelGoing(kernel)) {
          return;
        }
        this._clearWatchdog();
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
    if (!params || this._session.status !== 'connected' || !this._control) {
      return;
    }
    if (!Private.differs(params, this._session.settings)) {
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
    clearTimeout(this._backfillTimer);
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
    this._clearWatchdog();
    this._closeComms(graceful);
    return this._generation;
  }

  /**
   * If this generation is still `connecting` after a while (no bootstrap reply, a `hello`
   * that never came), try again a few times, then report an error.
   */
  private _armWatchdog(gen: number): void {
    this._clearWatchdog();
    this._watchdog = setTimeout(() => {
      this._watchdog = undefined;
      if (
        this._isDisposed ||
        gen !== this._generation ||
        this._session.status !== 'connecting'
      ) {
        return;
      }
      const kernel = this._context.session?.kernel ?? null;
      if (kernel && kernel.status === 'busy') {
        // The bootstrap waits behind running cells: keep waiting.
        this._armWatchdog(gen);
        return;
      }
      if (this._retries < KernelBridge.MAX_RETRIES) {
        this._retries++;
        void this.connect();
      } else {
        this._session.setStatus(
          'error',
          'The vramscope bridge did not answer. Reconnect to try again.'
        );
      }
    }, this._connectTimeoutMs);
  }

  private _clearWatchdog(): void {
    if (this._watchdog !== undefined) {
      clearTimeout(this._watchdog);
      this._watchdog = undefined;
    }
  }

  private _openComms(kernel: Kernel.IKernelConnection, gen: number): void {
    const metadata = { protocol_version: PROTOCOL_VERSION };
    const open = (channel: Channel): Kernel.IComm => {
      const comm = kernel.createComm(COMM_TARGET);
      comm.onMsg = (msg: KernelMessage.ICommMsgMsg) => {
        if (
          gen === this._generation &&
          (comm === this._stream || comm === this._control)
        ) {
          this._session.handleMessage(msg.content.data);
        }
      };
      comm.onClose = () => this._onCommClosed(comm, gen);
      comm.open({ channel }, metadata);
      return comm;
    };
    // Control first: `hello` arrives on stream, and the settings request follows on control.
    this._control = open('control');
    this._stream = open('stream');
    const control = this._control;
    this._session.setTransport(message => {
      if (control.isDisposed || gen !== this._generation) {
        throw new Error('the control comm is closed');
      }
      control.send(
        message as unknown as KernelMessage.ICommMsgMsg['content']['data']
      );
    });
  }

  private _onCommClosed(comm: Kernel.IComm, gen: number): void {
    if (
      gen !== this._generation ||
      (comm !== this._stream && comm !== this._control)
    ) {
      return;
    }
    this._closeComms();
    const status = this._session.status;
    if (status === 'protocol-mismatch' || status === 'restarting') {
      this._clearWatchdog();
      return;
    }
    this._clearWatchdog();
    this._session.setStatus(
      'error',
      'The kernel closed the vramscope connection. Reconnect to try again.'
    );
  }

  /** Forget (and close, unless the kernel already dropped them) the current comms. */
  private _closeComms(graceful = true): void {
    const comms = [this._stream, this._control];
    this._stream = null;
    this._control = null;
    this._session.setTransport(null);
    for (const comm of comms) {
      if (comm && !comm.isDisposed) {
        comm.onClose = () => undefined;
        comm.onMsg = () => undefined;
        const kernel = this._watched;
        const alive =
          graceful &&
          kernel &&
          !kernel.isDisposed &&
          kernel.connectionStatus === 'connected' &&
          !Private.isKernelGoing(kernel);
        try {
          if (alive) {
            comm.close();
          } else {
            comm.dispose();
          }
        } catch {
          comm.dispose();
        }
      }
    }
  }

  private _onHello(_: MemorySession, msg: IHelloMessage): void {
    this._clearWatchdog();
    this._retries = 0;
    void this.pushSettings();
    this._backfillPending = true;
    this._maybeBackfill();
  }

  /**
   * Fetch the samples the kernel kept (`get_samples`) once the kernel has been quiet for a
   * moment: idle, and no execute request sent on this connection still unanswered. While a
   * cell runs, ipykernel serves comm requests on another thread, and that work (ipykernel's
   * own included, ~200 KB measured the first time) shows in the running cell's CPU memory
   * figures. "Run All" queues every cell at once and goes idle for an instant between them,
   * and the idle status of the last cell can arrive before the busy of a cell just sent:
   * hence both conditions and the quiet period.
   */
  private _maybeBackfill(): void {
    if (this._backfillTimer) {
      clearTimeout(this._backfillTimer);
      this._backfillTimer = 0;
    }
    if (!this._backfillPending || !this._kernelQuiet()) {
      return;
    }
    this._backfillTimer = window.setTimeout(() => {
      this._backfillTimer = 0;
      if (
        this._backfillPending &&
        !this._isDisposed &&
        this._kernelQuiet() &&
        this._session.status === 'connected'
      ) {
        this._backfillPending = false;
        void this._session.backfillSamples();
      }
    }, KernelBridge.BACKFILL_QUIET_MS);
  }

  /** The kernel is idle and has no execute request of this connection left to answer. */
  private _kernelQuiet(): boolean {
    if (this._watched?.status !== 'idle') {
      return false;
    }
    this._dropLostExecutes();
    return this._executing.size === 0;
  }

  /**
   * An idle kernel is not working on a request sent long ago: its reply was lost (a dropped
   * websocket), and it must not hold the backfill (or the running band) for ever.
   */
  private _dropLostExecutes(): void {
    const now = Date.now();
    for (const [msgId, execute] of this._executing) {
      if (now - execute.sentAt > KernelBridge.LOST_REPLY_MS) {
        this._executing.delete(msgId);
        this._session.cellEnded(msgId);
      }
    }
  }

  /** No reply will come for the execute requests sent so far (another kernel, a restart). */
  private _forgetExecutes(): void {
    this._executing.clear();
    this._session.cellEnded(null);
  }

  /**
   * Follow this connection's execute requests: kept until their replies come (see
   * `_maybeBackfill`), and the session told which cell runs from the kernel's
   * `execute_input` until the reply (the timeline draws its band while it runs).
   */
  private _onAnyMessage(
    kernel: Kernel.IKernelConnection,
    args: Kernel.IAnyMessageArgs
  ): void {
    if (kernel !== this._watched) {
      return;
    }
    const { msg, direction } = args;
    const type = msg.header.msg_type;
    if (direction === 'send') {
      if (type === 'execute_request') {
        const content = (msg.content ?? {}) as Partial<
          KernelMessage.IExecuteRequestMsg['content']
        >;
        const cellId = (msg.metadata as { cellId?: unknown } | undefined)
          ?.cellId;
        this._executing.set(msg.header.msg_id, {
          sentAt: Date.now(),
          cellId: typeof cellId === 'string' && cellId ? cellId : null,
          code: typeof content.code === 'string' ? content.code : '',
          silent: content.silent === true
        });
        this._maybeBackfill(); // cancels a quiet period in progress
      }
      return;
    }
    const parentId = (msg.parent_header as Partial<KernelMessage.IHeader>)
      .msg_id;
    const execute = parentId ? this._executing.get(parentId) : undefined;
    if (!parentId || !execute) {
      return;
    }
    if (type === 'execute_input' && !execute.silent) {
      const count = ((msg.content ?? {}) as { execution_count?: unknown })
        .execution_count;
      this._session.cellStarted({
        msgId: parentId,
        cellId: execute.cellId,
        executionCount: typeof count === 'number' ? count : null,
        start: Private.kernelTime(msg.header.date),
        codeHead: Private.codeHead(execute.code)
      });
    } else if (type === 'execute_reply') {
      this._executing.delete(parentId);
      this._session.cellEnded(parentId);
      this._maybeBackfill();
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
    this._forgetExecutes();
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
      this._forgetExecutes();
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
      this._maybeBackfill(); // idle: (re)start the quiet period; busy: cancel it
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
    this._forgetExecutes(); // the restarted kernel answers none of them
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
      Private.isKernelGoing(kernel)
    ) {
      return;
    }
    this._awaitingKernel = false;
    void this.connect();
  }

  private _context: ISessionContext;
  private _session: MemorySession;
  private _getSettings: () => Partial<ISettings> | null;
  private _connectTimeoutMs: number;
  private _stream: Kernel.IComm | null = null;
  private _control: Kernel.IComm | null = null;
  private _watched: Kernel.IKernelConnection | null = null;
  private _generation = 0;
  private _awaitingKernel = false;
  private _hadKernel = false;
  private _isDisposed = false;
  private _backfillPending = false;
  private _backfillTimer = 0;
  /** Execute requests sent on the watched connection and not answered yet, by msg_id. */
  private _executing = new Map<string, Private.IExecute>();
  private _retries = 0;
  private _watchdog: ReturnType<typeof setTimeout> | undefined = undefined;
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

namespace Private {
  export interface IExecuteResult {
    status: string;
    ename?: string;
    evalue?: string;
  }

  /** An execute request sent on the watched connection, not answered yet. */
  export interface IExecute {
    /** `Date.now()` when it was sent. */
    sentAt: number;
    /** JupyterLab's cell id (the request's `metadata.cellId`), null if none. */
    cellId: string | null;
    code: string;
    silent: boolean;
  }

  /** A kernel message date (ISO 8601) in UNIX seconds; now when it is missing or invalid. */
  export function kernelTime(date: unknown): number {
    const ms = typeof date === 'string' ? Date.parse(date) : NaN;
    return (Number.isFinite(ms) ? ms : Date.now()) / 1000;
  }

  /** The first non-empty line of `code`, trimmed, at most 120 characters (the bridge's). */
  export function codeHead(code: string): string {
    for (const line of code.split('\n')) {
      const text = line.trim();
      if (text) {
        return text.slice(0, 120);
      }
    }
    return '';
  }

  /** Whether the kernel is on its way out or between processes. */
  export function isKernelGoing(kernel: Kernel.IKernelConnection): boolean {
    const s = kernel.status;
    return (
      kernel.isDisposed ||
      s === 'restarting' ||
      s === 'autorestarting' ||
      s === 'dead' ||
      s === 'terminating'
    );
  }

  /** Whether applying `patch` would change `current` (null: unknown, so yes). */
  export function differs(
    patch: Partial<ISettings>,
    current: ISettings | null
  ): boolean {
    if (!current) {
      return true;
    }
    return (Object.keys(patch) as (keyof ISettings)[]).some(
      k => patch[k] !== undefined && patch[k] !== current[k]
    );
  }

  export async function kernelLanguage(
    kernel: Kernel.IKernelConnection
  ): Promise<string | null> {
    try {
      const spec = await kernel.spec;
      if (spec?.language) {
        return spec.language;
      }
    } catch {
      // fall through to kernel_info
    }
    try {
      const info = await kernel.info;
      return info?.language_info?.name ?? null;
    } catch {
      return null;
    }
  }

  /** Run `code` silently; resolves with the shell reply (not waiting for iopub `idle`). */
  export function execute(
    kernel: Kernel.IKernelConnection,
    code: string
  ): Promise<IExecuteResult> {
    return new Promise<IExecuteResult>((resolve, reject) => {
      const future = kernel.requestExecute(
        {
          code,
          silent: true,
          store_history: false,
          allow_stdin: false,
          stop_on_error: false
        },
        true
      );
      future.onReply = (reply: KernelMessage.IExecuteReplyMsg) => {
        const content =
          reply.content as KernelMessage.IExecuteReplyMsg['content'] & {
            ename?: string;
            evalue?: string;
          };
        resolve({
          status: content.status,
          ename: content.ename,
          evalue: content.evalue
        });
      };
      // Rejects when the future is disposed before its reply (restart, shutdown).
      future.done.then(
        () => reject(new Error('the bootstrap got no reply')),
        (e: unknown) => reject(e instanceof Error ? e : new Error(String(e)))
      );
    });
  }
}

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
 * - pushes the front-end settings (`set_settings`) after each `hello` and on change.
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
    this._context.kernelChanged.connect(this._onKernelChanged, this);
    this._context.statusChanged.connect(this._onKernelStatus, this);
    this._session.helloReceived.connect(this._onHello, this);
    this._session.setReconnectHandler(() => {
      this._retries = 0;
      void this.connect();
    });
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

  /** (Re)connect to the current kernel. Safe to call at any time; stale attempts are dropped. */
  async connect(): Promise<void> {
    const attempt = ++this._attempt;
    this._closeComms();
    const kernel = this._context.session?.kernel ?? null;
    if (!kernel) {
      this._session.setStatus('idle', 'No kernel: start one to see memory.');
      return;
    }
    this._session.setStatus(
      'connecting',
      'Loading the vramscope bridge in the kernel…'
    );
    this._armWatchdog(attempt);
    try {
      const language = await Private.kernelLanguage(kernel);
      if (attempt !== this._attempt || this._isDisposed) {
        return;
      }
      if (language !== null && !/^python/i.test(language)) {
        this._session.setStatus(
          'unsupported-kernel',
          `vramscope needs a Python kernel (this one is ${language})`
        );
        return;
      }
      const reply = await Private.execute(kernel, BOOTSTRAP_CODE);
      if (attempt !== this._attempt || this._isDisposed) {
        return;
      }
      if (reply.status === 'error') {
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
        this._session.setStatus('error', `The bootstrap was ${reply.status}.`);
        return;
      }
      this._openComms(kernel);
    } catch (e) {
      if (attempt === this._attempt && !this._isDisposed) {
        this._session.setStatus(
          'error',
          `Could not connect to the kernel: ${String(e)}`
        );
      }
    }
  }

  /**
   * If this attempt is still `connecting` after a while (a bootstrap lost in a kernel restart,
   * a `hello` that never came), try again a few times, then report an error.
   */
  private _armWatchdog(attempt: number): void {
    clearTimeout(this._watchdog);
    this._watchdog = setTimeout(() => {
      if (
        this._isDisposed ||
        attempt !== this._attempt ||
        this._session.status !== 'connecting'
      ) {
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
    }, KernelBridge.CONNECT_TIMEOUT_MS);
  }

  /** Send the front-end settings to the kernel (no-op when not connected). */
  async pushSettings(): Promise<void> {
    const params = this._getSettings();
    if (!params || this._session.status !== 'connected' || !this._control) {
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
    this._attempt++;
    clearTimeout(this._watchdog);
    this._context.kernelChanged.disconnect(this._onKernelChanged, this);
    this._context.statusChanged.disconnect(this._onKernelStatus, this);
    this._session.helloReceived.disconnect(this._onHello, this);
    this._session.setReconnectHandler(null);
    this._closeComms();
  }

  private _openComms(kernel: Kernel.IKernelConnection): void {
    const metadata = { protocol_version: PROTOCOL_VERSION };
    const open = (channel: Channel): Kernel.IComm => {
      const comm = kernel.createComm(COMM_TARGET);
      comm.onMsg = (msg: KernelMessage.ICommMsgMsg) => {
        if (comm === this._stream || comm === this._control) {
          this._session.handleMessage(msg.content.data);
        }
      };
      comm.onClose = () => this._onCommClosed(comm);
      comm.open({ channel }, metadata);
      return comm;
    };
    // Control first: `hello` arrives on stream, and the settings request follows on control.
    this._control = open('control');
    this._stream = open('stream');
    const control = this._control;
    this._session.setTransport(message => {
      if (control.isDisposed) {
        throw new Error('the control comm is closed');
      }
      control.send(
        message as unknown as KernelMessage.ICommMsgMsg['content']['data']
      );
    });
  }

  private _onCommClosed(comm: Kernel.IComm): void {
    if (comm !== this._stream && comm !== this._control) {
      return;
    }
    this._closeComms();
    const status = this._session.status;
    if (status === 'protocol-mismatch' || status === 'restarting') {
      return;
    }
    this._session.setStatus(
      'error',
      'The kernel closed the vramscope connection. Reconnect to try again.'
    );
  }

  /** Forget (and close, unless the kernel is gone) the current comms. */
  private _closeComms(): void {
    const comms = [this._stream, this._control];
    this._stream = null;
    this._control = null;
    this._session.setTransport(null);
    for (const comm of comms) {
      if (comm && !comm.isDisposed) {
        comm.onClose = () => undefined;
        try {
          comm.close();
        } catch {
          comm.dispose();
        }
      }
    }
  }

  private _onHello(_: MemorySession, msg: IHelloMessage): void {
    if (this._session.status === 'protocol-mismatch') {
      this._closeComms();
      return;
    }
    this._retries = 0;
    void this.pushSettings();
  }

  private _onKernelChanged(
    _: ISessionContext,
    change: {
      oldValue: Kernel.IKernelConnection | null;
      newValue: Kernel.IKernelConnection | null;
    }
  ): void {
    // SessionContext.restartKernel() emits kernelChanged with the same kernel: the restart
    // itself is handled through statusChanged.
    if (change.oldValue === change.newValue) {
      if (this._needsReconnect || this._session.status !== 'connected') {
        this._needsReconnect = false;
        void this.connect();
      }
      return;
    }
    this._attempt++;
    this._stream = null;
    this._control = null;
    this._session.setTransport(null);
    if (change.oldValue && this._hadKernel) {
      this._session.markRestart();
    }
    this._hadKernel = this._hadKernel || !!change.newValue;
    this._needsReconnect = false;
    if (change.newValue) {
      void this.connect();
    } else {
      this._session.setStatus('idle', 'No kernel: start one to see memory.');
    }
  }

  private _onKernelStatus(_: ISessionContext, status: Kernel.Status): void {
    this._hadKernel = this._hadKernel || !!this._context.session?.kernel;
    if (status === 'restarting' || status === 'autorestarting') {
      if (!this._needsReconnect) {
        this._needsReconnect = true;
        this._attempt++;
        // The kernel drops its comms; ours are disposed by the kernel connection.
        this._stream = null;
        this._control = null;
        this._session.setTransport(null);
        this._session.markRestart();
        this._session.setStatus(
          'restarting',
          'The kernel is restarting; history is kept.'
        );
      }
    } else if (status === 'dead') {
      this._needsReconnect = true;
      this._session.setTransport(null);
      this._session.setStatus(
        'error',
        'The kernel died. Restart it to reconnect.'
      );
    } else if (
      (status === 'idle' || status === 'busy') &&
      this._needsReconnect
    ) {
      this._needsReconnect = false;
      void this.connect();
    }
  }

  private _context: ISessionContext;
  private _session: MemorySession;
  private _getSettings: () => Partial<ISettings> | null;
  private _stream: Kernel.IComm | null = null;
  private _control: Kernel.IComm | null = null;
  private _attempt = 0;
  private _needsReconnect = false;
  private _hadKernel = false;
  private _isDisposed = false;
  private _retries = 0;
  private _watchdog: ReturnType<typeof setTimeout> | undefined = undefined;
}

export namespace KernelBridge {
  /** How long an attempt may stay `connecting` before it is retried. */
  export const CONNECT_TIMEOUT_MS = 8000;
  /** Retries after a timeout before the status becomes `error`. */
  export const MAX_RETRIES = 3;

  export interface IOptions {
    sessionContext: ISessionContext;
    session: MemorySession;
    /** The kernel-side settings to push after `hello` and on change (null: leave as is). */
    getSettings?: () => Partial<ISettings> | null;
  }
}

namespace Private {
  export interface IExecuteResult {
    status: string;
    ename?: string;
    evalue?: string;
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

  export async function execute(
    kernel: Kernel.IKernelConnection,
    code: string
  ): Promise<IExecuteResult> {
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
    const reply = await future.done;
    const content =
      reply.content as KernelMessage.IExecuteReplyMsg['content'] & {
        ename?: string;
        evalue?: string;
      };
    return {
      status: content.status,
      ename: content.ename,
      evalue: content.evalue
    };
  }
}

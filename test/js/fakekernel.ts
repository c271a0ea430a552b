/**
 * Fakes of a kernel connection, its comms and a session context, as KernelBridge sees them
 * (shared by the bridge and tracker tests).
 */
import { Signal } from '@lumino/signaling';

export type Status = string;

export interface IReply {
  status: string;
  ename?: string;
  evalue?: string;
}

/** A comm as the bridge sees it; the test drives `onMsg` / `onClose`. */
export class FakeComm {
  constructor(
    readonly kernel: FakeKernel,
    readonly targetName: string
  ) {}
  isDisposed = false;
  channel: string | null = null;
  metadata: unknown = null;
  sent: any[] = [];
  closed = false;
  onMsg: (msg: any) => void = () => undefined;
  onClose: (msg: any) => void = () => undefined;
  open(data: { channel: string }, metadata: unknown): void {
    this.channel = data.channel;
    this.metadata = metadata;
  }
  send(data: unknown): void {
    this.sent.push(data);
  }
  close(): void {
    this.closed = true;
    this.isDisposed = true;
  }
  dispose(): void {
    this.isDisposed = true;
  }
  /** A message from the kernel on this comm. */
  receive(data: unknown): void {
    this.onMsg({ content: { comm_id: 'x', data } });
  }
}

/** An execute request sent through `FakeKernel.sendExecute`. */
export interface IFakeExecute {
  msgId: string;
  /** The kernel's `execute_input`: the cell starts (date: ISO 8601, default now). */
  input(executionCount: number, date?: string): void;
  reply(): void;
}

/** An execute the kernel has not answered yet. */
export interface IPendingExecute {
  code: string;
  reply(content: IReply): void;
  cancel(): void;
}

export class FakeKernel {
  constructor(
    readonly id: string,
    language = 'python'
  ) {
    this._language = language;
  }
  status: Status = 'idle';
  handleComms = true;
  connectionStatus = 'connected';
  isDisposed = false;
  statusChanged = new Signal<FakeKernel, Status>(this);
  connectionStatusChanged = new Signal<FakeKernel, string>(this);
  /** Like `IKernelConnection.anyMessage`: execute requests sent and their replies. */
  anyMessage = new Signal<FakeKernel, { msg: any; direction: 'send' | 'recv' }>(
    this
  );
  comms: FakeComm[] = [];
  executes: IPendingExecute[] = [];
  /** Answer bootstraps at once with this reply (null: leave them pending). */
  autoReply: IReply | null = { status: 'ok' };

  get spec(): Promise<{ language: string }> {
    return Promise.resolve({ language: this._language });
  }
  get info(): Promise<unknown> {
    return Promise.resolve({ language_info: { name: this._language } });
  }

  setStatus(status: Status): void {
    this.status = status;
    this.statusChanged.emit(status);
  }
  setConnection(status: string): void {
    this.connectionStatus = status;
    this.connectionStatusChanged.emit(status);
  }

  /**
   * An execute request sent on this connection (by the notebook, as "Run All" does): the
   * `anyMessage` of the request now; the returned `input` and `reply` emit the kernel's
   * `execute_input` (the cell starts) and `execute_reply` for it.
   */
  sendExecute(
    options: { code?: string; cellId?: string; silent?: boolean } = {}
  ): IFakeExecute {
    const msgId = `exec-${++this._msgCount}`;
    const parent = { msg_id: msgId, msg_type: 'execute_request' };
    const recv = (msgType: string, content: unknown, date?: string) =>
      this.anyMessage.emit({
        msg: {
          header: {
            msg_id: `${msgType}-${msgId}`,
            msg_type: msgType,
            date: date ?? new Date().toISOString()
          },
          parent_header: parent,
          metadata: {},
          content
        },
        direction: 'recv'
      });
    this.anyMessage.emit({
      msg: {
        header: { ...parent },
        parent_header: {},
        metadata: options.cellId ? { cellId: options.cellId } : {},
        content: {
          code: options.code ?? 'pass',
          silent: options.silent ?? false
        }
      },
      direction: 'send'
    });
    return {
      msgId,
      input: (executionCount: number, date?: string) =>
        recv(
          'execute_input',
          { code: options.code ?? 'pass', execution_count: executionCount },
          date
        ),
      reply: () => recv('execute_reply', { status: 'ok' })
    };
  }

  requestExecute(content: { code: string; silent?: boolean }): any {
    const execute = this.sendExecute({
      code: content.code,
      silent: content.silent ?? false
    });
    let resolveDone: () => void = () => undefined;
    let rejectDone: (e: Error) => void = () => undefined;
    const done = new Promise<void>((res, rej) => {
      resolveDone = res;
      rejectDone = rej;
    });
    done.catch(() => undefined);
    const future: any = { onReply: () => undefined, done };
    const pending: IPendingExecute = {
      code: content.code,
      reply: (c: IReply) => {
        execute.reply();
        future.onReply({ content: c });
        resolveDone();
      },
      cancel: () => rejectDone(new Error('Canceled future'))
    };
    this.executes.push(pending);
    if (this.autoReply) {
      const reply = this.autoReply;
      void Promise.resolve().then(() => pending.reply(reply));
    }
    return future;
  }

  createComm(target: string): FakeComm {
    const comm = new FakeComm(this, target);
    this.comms.push(comm);
    return comm;
  }

  /** The comms currently open on a channel. */
  open(channel: string): FakeComm[] {
    return this.comms.filter(c => c.channel === channel && !c.isDisposed);
  }

  private _msgCount = 0;
  private _language: string;
}

export class FakeContext {
  constructor(kernel: FakeKernel | null) {
    this.session = kernel ? { kernel } : null;
  }
  session: { kernel: FakeKernel } | null;
  isRestarting = false;
  ready = Promise.resolve();
  kernelChanged = new Signal<FakeContext, any>(this);
  statusChanged = new Signal<FakeContext, Status>(this);

  /** What SessionContext.restartKernel() emits, around a kernel restart. */
  async restart(
    kernel: FakeKernel,
    between?: () => Promise<void>
  ): Promise<void> {
    this.isRestarting = true;
    this.statusChanged.emit('restarting');
    kernel.setStatus('restarting');
    for (const c of kernel.comms) {
      c.dispose(); // KernelConnection._clearKernelState
    }
    kernel.connectionStatus = 'connecting'; // set before the 'unknown' status, as in JupyterLab
    kernel.setStatus('unknown');
    kernel.connectionStatusChanged.emit('connecting');
    kernel.setConnection('connected');
    if (between) {
      await between();
    }
    this.isRestarting = false;
    this.statusChanged.emit(kernel.status);
    this.kernelChanged.emit({
      name: 'kernel',
      oldValue: kernel,
      newValue: kernel
    });
  }

  changeKernel(kernel: FakeKernel | null): void {
    const old = this.session?.kernel ?? null;
    this.session = kernel ? { kernel } : null;
    this.kernelChanged.emit({
      name: 'kernel',
      oldValue: old,
      newValue: kernel
    });
  }
}

export const flush = async (n = 10): Promise<void> => {
  for (let i = 0; i < n; i++) {
    await Promise.resolve();
  }
};

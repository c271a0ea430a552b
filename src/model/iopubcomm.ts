/**
 * `IopubComm`: a comm on a kernel connection that does not handle comms.
 *
 * JupyterLab lets one connection per kernel in a page handle comms: a second notebook
 * switched to a kernel another notebook already uses gets a connection whose
 * `createComm()` throws "Comms are disabled on this kernel connection". Such a connection
 * still sends shell messages and still emits every iopub message, comm messages included,
 * so a comm can run over it by hand: `comm_open`, `comm_msg` and `comm_close` go out on
 * shell, and the kernel's `comm_msg` / `comm_close` for this comm's id are picked out of
 * `iopubMessage`. The connection that handles comms ignores them (the id is not one of
 * its comms), so nothing is handled twice and this comm does not depend on the other
 * notebook staying open.
 */
import { JSONObject, UUID } from '@lumino/coreutils';
import { Kernel, KernelMessage } from '@jupyterlab/services';

type Data = KernelMessage.ICommMsgMsg['content']['data'];

export class IopubComm {
  constructor(kernel: Kernel.IKernelConnection, targetName: string) {
    this._kernel = kernel;
    this.targetName = targetName;
    kernel.iopubMessage.connect(this._onIopub, this);
    kernel.disposed.connect(this.dispose, this);
  }

  readonly commId = UUID.uuid4();
  readonly targetName: string;
  onMsg: (msg: KernelMessage.ICommMsgMsg) => void | PromiseLike<void> = () =>
    undefined;
  onClose: (msg: KernelMessage.ICommCloseMsg) => void | PromiseLike<void> =
    () => undefined;

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  open(data?: Data, metadata?: JSONObject): void {
    this._send(
      'comm_open',
      {
        comm_id: this.commId,
        target_name: this.targetName,
        data: data ?? {}
      },
      metadata
    );
  }

  send(data: Data): void {
    this._send('comm_msg', { comm_id: this.commId, data });
  }

  close(data?: Data): void {
    this._send('comm_close', { comm_id: this.commId, data: data ?? {} });
    this.dispose();
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    if (!this._kernel.isDisposed) {
      this._kernel.iopubMessage.disconnect(this._onIopub, this);
      this._kernel.disposed.disconnect(this.dispose, this);
    }
  }

  private _send(
    msgType: 'comm_open' | 'comm_msg' | 'comm_close',
    content: any,
    metadata: KernelMessage.IMessage['metadata'] = {}
  ): void {
    if (this._isDisposed || this._kernel.isDisposed) {
      throw new Error(`Cannot send ${msgType}: the comm is disposed`);
    }
    const msg = KernelMessage.createMessage({
      msgType,
      channel: 'shell',
      username: this._kernel.username,
      session: this._kernel.clientId,
      content,
      metadata
    } as any);
    this._kernel.sendShellMessage(msg as any, false, true);
  }

  private _onIopub(
    _: Kernel.IKernelConnection,
    msg: KernelMessage.IIOPubMessage
  ): void {
    const type = msg.header.msg_type;
    if (
      this._isDisposed ||
      (type !== 'comm_msg' && type !== 'comm_close') ||
      (msg.content as { comm_id?: unknown }).comm_id !== this.commId
    ) {
      return;
    }
    if (type === 'comm_msg') {
      void this.onMsg(msg as KernelMessage.ICommMsgMsg);
    } else {
      this.dispose();
      void this.onClose(msg as KernelMessage.ICommCloseMsg);
    }
  }

  private _kernel: Kernel.IKernelConnection;
  private _isDisposed = false;
}

/**
 * `BridgeComms`: the two comms of one connection to the kernel bridge: `stream` (the kernel's
 * messages) and `control` (requests and their replies). Opened with the protocol version in
 * the metadata; closed in the kernel only when it is alive (a restarting or replaced kernel
 * has dropped them already).
 */
import { JSONObject } from '@lumino/coreutils';
import { Kernel, KernelMessage } from '@jupyterlab/services';

import {
  COMM_TARGET,
  Channel,
  IRequestMessage,
  PROTOCOL_VERSION
} from '../protocol';
import { IopubComm } from './iopubcomm';
import { isKernelGoing } from './kernel';

/** What the bridge uses of a comm: JupyterLab's, or an `IopubComm`. */
interface IComm {
  readonly isDisposed: boolean;
  onMsg: (msg: KernelMessage.ICommMsgMsg) => void | PromiseLike<void>;
  onClose: (msg: KernelMessage.ICommCloseMsg) => void | PromiseLike<void>;
  open(data: { channel: Channel }, metadata: JSONObject): unknown;
  send(data: KernelMessage.ICommMsgMsg['content']['data']): unknown;
  close(): unknown;
  dispose(): void;
}

export class BridgeComms {
  constructor(options: BridgeComms.IOptions) {
    this._options = options;
  }

  /** Whether the comms are open. */
  get isOpen(): boolean {
    return this._control !== null;
  }

  /**
   * Open both comms on `kernel`; returns the transport that sends requests on `control`.
   * Their messages and closing are reported while `current()` says they are still wanted.
   */
  open(
    kernel: Kernel.IKernelConnection,
    current: () => boolean
  ): (message: IRequestMessage) => void {
    const metadata = { protocol_version: PROTOCOL_VERSION };
    const mine = (comm: IComm) =>
      current() && (comm === this._stream || comm === this._control);
    const open = (channel: Channel): IComm => {
      // A second connection to a kernel in this page does not handle comms (see IopubComm).
      const comm: IComm = kernel.handleComms
        ? kernel.createComm(COMM_TARGET)
        : new IopubComm(kernel, COMM_TARGET);
      comm.onMsg = (msg: KernelMessage.ICommMsgMsg) => {
        if (mine(comm)) {
          this._options.onMessage(msg.content.data);
        }
      };
      comm.onClose = () => {
        if (mine(comm)) {
          this._options.onClosed();
        }
      };
      comm.open({ channel }, metadata);
      return comm;
    };
    // Control first: `hello` arrives on stream, and the settings request follows on control.
    const control = (this._control = open('control'));
    this._stream = open('stream');
    return message => {
      if (control.isDisposed || !current()) {
        throw new Error('the control comm is closed');
      }
      control.send(
        message as unknown as KernelMessage.ICommMsgMsg['content']['data']
      );
    };
  }

  /**
   * Forget the comms; close them in the kernel when `kernel` is given and alive, else only
   * dispose of them here.
   */
  close(kernel: Kernel.IKernelConnection | null): void {
    const comms = [this._stream, this._control];
    this._stream = null;
    this._control = null;
    for (const comm of comms) {
      if (comm && !comm.isDisposed) {
        comm.onClose = () => undefined;
        comm.onMsg = () => undefined;
        const alive =
          kernel &&
          !kernel.isDisposed &&
          kernel.connectionStatus === 'connected' &&
          !isKernelGoing(kernel);
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

  private _options: BridgeComms.IOptions;
  private _stream: IComm | null = null;
  private _control: IComm | null = null;
}

export namespace BridgeComms {
  export interface IOptions {
    /** A raw payload from either comm. */
    onMessage: (data: unknown) => void;
    /** The kernel closed one of the comms. */
    onClosed: () => void;
  }
}

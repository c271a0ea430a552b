/**
 * `KernelTraffic`: one session's traffic with the kernel bridge, both ways.
 *
 * In: each raw comm payload is validated (an invalid one becomes a warning and, while
 * connected, a `report_error` request), `hello` passes the protocol-version gate, and the
 * kernel's answers (`reply`, `error` with `in_reply_to`) settle the pending requests. Every
 * other message goes to the session's state through its `ISink`. Out: typed requests on the
 * control comm (`RequestChannel`). No state of its own beyond the pending requests.
 */
import {
  IErrorMessage,
  IHelloMessage,
  IReplyMessage,
  IRequestMap,
  IRequestMessage,
  ISettings,
  KernelMessage,
  Method
} from '../protocol';
import { ConnectionStatus } from '../tokens';
import { validateKernelMessage } from '../validate';
import { protocolMismatch } from './kernel';
import { RequestChannel, RequestError } from './requests';

/** The kernel messages that change the session's state (the rest are traffic's own). */
export type StateMessage = Exclude<
  KernelMessage,
  IHelloMessage | IErrorMessage | IReplyMessage
>;

export class KernelTraffic {
  constructor(options: KernelTraffic.IOptions) {
    this._sink = options.sink;
    this._requests = new RequestChannel({ timeoutMs: options.timeoutMs });
  }

  /** Whether requests can be sent (a transport is set). */
  get isOpen(): boolean {
    return this._requests.isOpen;
  }

  /**
   * Where requests go: a function sending a payload on the control comm, or null when
   * disconnected (pending requests are then rejected).
   */
  setTransport(send: ((message: IRequestMessage) => void) | null): void {
    this._requests.setTransport(send);
  }

  request<M extends Method>(
    method: M,
    params: IRequestMap[M]['params']
  ): Promise<IRequestMap[M]['result']> {
    return this._requests.request(method, params, this._sink.status());
  }

  /** Reject every pending request (`code`: the RequestError's code). */
  rejectAll(code: string, reason: string): void {
    this._requests.rejectAll(code, reason);
  }

  /**
   * The samples the kernel kept newer than `since` (all of them when null), unchecked; null
   * when it cannot say (an older bridge, or disconnected meanwhile).
   */
  async keptSamples(since: number | null): Promise<unknown[] | null> {
    let samples: unknown;
    try {
      const result = await this.request(
        'get_samples',
        since === null ? {} : { since }
      );
      samples = result?.samples;
    } catch {
      return null;
    }
    return Array.isArray(samples) ? samples : null;
  }

  /**
   * Take one raw payload from a comm. Returns the validated message, or null when it was
   * invalid (then a warning is added). Never throws.
   */
  receive(raw: unknown): KernelMessage | null {
    const msg = validateKernelMessage(raw);
    if (typeof msg === 'string') {
      this._sink.addWarning(
        `Dropped an invalid message from the kernel: ${msg}`
      );
      console.warn('vramscope: dropped an invalid kernel message:', msg, raw);
      if (this._sink.status() === 'connected') {
        this._requests.reportInvalid(msg);
      }
      return null;
    }
    try {
      this._route(msg);
      this._sink.received(msg);
    } catch (e) {
      // A listener failing must not break the comm handler.
      console.error('vramscope: error while handling a kernel message', e);
    }
    return msg;
  }

  /** Reject what is pending and send nothing more. */
  dispose(): void {
    this._requests.dispose();
  }

  private _route(msg: KernelMessage): void {
    switch (msg.type) {
      case 'hello': {
        const mismatch = protocolMismatch(msg);
        if (mismatch) {
          this._sink.setStatus('protocol-mismatch', mismatch);
        } else {
          this._sink.hello(msg);
        }
        break;
      }
      case 'error':
        this._onError(msg);
        break;
      case 'reply': {
        const method = this._requests.pendingMethod(msg.id);
        this._requests.settle(msg.id, null, msg.result);
        const settings = (msg.result as { settings?: ISettings } | null)
          ?.settings;
        if (method === 'set_settings' && settings instanceof Object) {
          this._sink.settingsApplied(settings);
        }
        break;
      }
      default:
        this._sink.apply(msg);
    }
  }

  /** An error answers a pending request, or reports a protocol mismatch, or is shown. */
  private _onError(msg: IErrorMessage): void {
    const pending = msg.in_reply_to
      ? this._requests.pendingMethod(msg.in_reply_to)
      : undefined;
    if (pending && msg.in_reply_to) {
      this._requests.settle(
        msg.in_reply_to,
        new RequestError(msg.message, msg.code)
      );
    } else if (msg.code === 'protocol_mismatch') {
      this._sink.setStatus('protocol-mismatch', msg.message);
    } else {
      this._sink.addWarning(
        `Kernel bridge error (${msg.code}): ${msg.message}`
      );
    }
  }

  private _sink: KernelTraffic.ISink;
  private _requests: RequestChannel;
}

export namespace KernelTraffic {
  /** What the kernel's messages change: the session's state. */
  export interface ISink {
    /** The connection status now (a request's "not connected" reason, reports). */
    status(): ConnectionStatus;
    setStatus(status: ConnectionStatus, message: string): void;
    addWarning(message: string): void;
    /** A `hello` that speaks our protocol major. */
    hello(msg: IHelloMessage): void;
    /** A message that changes the session's state (cells, samples, devices, ...). */
    apply(msg: StateMessage): void;
    /** The kernel's settings after a `set_settings` this session sent. */
    settingsApplied(settings: ISettings): void;
    /** Every valid message, once routed. */
    received(msg: KernelMessage): void;
  }

  export interface IOptions {
    sink: ISink;
    /** Request timeout in ms. */
    timeoutMs: number;
  }
}

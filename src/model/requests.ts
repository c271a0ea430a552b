/**
 * `RequestChannel`: the request/reply plumbing of one session: each request gets an id, goes
 * out through the transport (the control comm), and is settled by the kernel's `reply` or
 * `error` carrying that id, or rejected by a timeout, a disconnect or a restart.
 */
import { PromiseDelegate } from '@lumino/coreutils';

import { IRequestMap, IRequestMessage, Method } from '../protocol';

/** A request rejected by the kernel with an `error` message (or by a timeout / disconnect). */
export class RequestError extends Error {
  constructor(
    message: string,
    readonly code: string
  ) {
    super(message);
    this.name = 'RequestError';
  }
}

export class RequestChannel {
  constructor(options: RequestChannel.IOptions) {
    this._timeoutMs = options.timeoutMs;
  }

  /** Whether requests can be sent. */
  get isOpen(): boolean {
    return this._transport !== null;
  }

  /**
   * Where requests go: a function sending a payload on the control comm, or null when
   * disconnected (pending requests are then rejected).
   */
  setTransport(send: ((message: IRequestMessage) => void) | null): void {
    this._transport = send;
    if (!send) {
      this.rejectAll('disconnected', 'the vramscope connection was closed');
    }
  }

  /** The method of pending request `id` (undefined: none pending). */
  pendingMethod(id: string): Method | undefined {
    return this._pending.get(id)?.method;
  }

  /**
   * Send a request; `unavailable` names why it cannot be sent when there is no transport
   * (e.g. the connection status).
   */
  request<M extends Method>(
    method: M,
    params: IRequestMap[M]['params'],
    unavailable: string
  ): Promise<IRequestMap[M]['result']> {
    const send = this._transport;
    if (!send) {
      return Promise.reject(
        new RequestError(
          `vramscope is not connected (${unavailable})`,
          'disconnected'
        )
      );
    }
    const id = `vs-${Private.ids.next++}`;
    const delegate = new PromiseDelegate<unknown>();
    const timer = setTimeout(() => {
      if (this._pending.delete(id)) {
        delegate.reject(
          new RequestError(
            `${method}: no reply within ${this._timeoutMs} ms`,
            'timeout'
          )
        );
      }
    }, this._timeoutMs);
    this._pending.set(id, { delegate, timer, method });
    try {
      send({ type: 'request', id, method, params } as IRequestMessage);
    } catch (e) {
      this._pending.delete(id);
      clearTimeout(timer);
      delegate.reject(
        new RequestError(`${method}: could not send (${String(e)})`, 'send')
      );
    }
    return delegate.promise as Promise<IRequestMap[M]['result']>;
  }

  /** Settle pending request `id` with an error or a result. */
  settle(id: string, error: Error | null, result?: unknown): void {
    const pending = this._pending.get(id);
    if (!pending) {
      return;
    }
    this._pending.delete(id);
    clearTimeout(pending.timer);
    if (error) {
      pending.delegate.reject(error);
    } else {
      pending.delegate.resolve(result);
    }
  }

  /** Reject every pending request (`code`: the RequestError's code). */
  rejectAll(code: string, reason: string): void {
    for (const [id, p] of Array.from(this._pending)) {
      this.settle(id, new RequestError(`${p.method}: ${reason}`, code));
    }
  }

  /**
   * Answer an invalid kernel message with a `report_error` request (at most 20 per channel).
   */
  reportInvalid(reason: string): void {
    if (this._errorsReported >= 20) {
      return;
    }
    this._errorsReported++;
    this.request(
      'report_error',
      { code: 'invalid_message', message: reason.slice(0, 480) },
      'report_error'
    ).catch(() => undefined);
  }

  /** Reject what is pending and send nothing more. */
  dispose(): void {
    this._transport = null;
    this.rejectAll('disposed', 'the session was disposed');
  }

  private _timeoutMs: number;
  private _transport: ((message: IRequestMessage) => void) | null = null;
  private _pending = new Map<string, Private.IPending>();
  private _errorsReported = 0;
}

export namespace RequestChannel {
  export interface IOptions {
    /** Request timeout in ms. */
    timeoutMs: number;
  }
}

namespace Private {
  export const ids = { next: 1 };

  export interface IPending {
    delegate: PromiseDelegate<unknown>;
    timer: ReturnType<typeof setTimeout>;
    method: Method;
  }
}

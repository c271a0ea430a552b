/**
 * `ExecuteTracker`: follows the execute requests this front end sends on one kernel
 * connection, from the request to its reply. The bridge waits for them before it asks the
 * kernel anything (see `KernelBridge`), and the session hears which cell runs from the
 * kernel's `execute_input` until the reply (the timeline draws its band while it runs).
 */
import { Kernel, KernelMessage } from '@jupyterlab/services';

import type { IRunningCell } from '../tokens';
import { codeHead, kernelTime } from './kernel';

/** Who hears when a cell starts and ends (the session). */
export interface IRunningCellSink {
  cellStarted(cell: IRunningCell): void;
  cellEnded(msgId: string | null): void;
}

export class ExecuteTracker {
  constructor(options: ExecuteTracker.IOptions) {
    this._sink = options.sink;
    this._lostReplyMs = options.lostReplyMs;
    this._onChange = options.onChange;
  }

  /** Requests sent and not answered yet. */
  get size(): number {
    return this._executing.size;
  }

  /** A message on the followed connection (its `anyMessage` signal). */
  handle(args: Kernel.IAnyMessageArgs): void {
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
        this._onChange(); // cancels a quiet period in progress
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
      this._sink.cellStarted({
        msgId: parentId,
        cellId: execute.cellId,
        executionCount: typeof count === 'number' ? count : null,
        start: kernelTime(msg.header.date),
        codeHead: codeHead(execute.code)
      });
    } else if (type === 'execute_reply') {
      this._executing.delete(parentId);
      this._sink.cellEnded(parentId);
      this._onChange();
    }
  }

  /**
   * An idle kernel is not working on a request sent long ago: its reply was lost (a dropped
   * websocket), and it must not hold the bridge (or the running band) for ever.
   */
  dropLost(): void {
    const now = Date.now();
    for (const [msgId, execute] of this._executing) {
      if (now - execute.sentAt > this._lostReplyMs) {
        this._executing.delete(msgId);
        this._sink.cellEnded(msgId);
      }
    }
  }

  /** No reply will come for the requests sent so far (another kernel, a restart). */
  forget(): void {
    this._executing.clear();
    this._sink.cellEnded(null);
  }

  private _sink: IRunningCellSink;
  private _lostReplyMs: number;
  private _onChange: () => void;
  /** Execute requests sent on the followed connection and not answered yet, by msg_id. */
  private _executing = new Map<string, ExecuteTracker.IExecute>();
}

export namespace ExecuteTracker {
  export interface IOptions {
    sink: IRunningCellSink;
    /** A request unanswered this long while the kernel is idle lost its reply. */
    lostReplyMs: number;
    /** A request was sent or answered. */
    onChange: () => void;
  }

  /** An execute request sent on the followed connection, not answered yet. */
  export interface IExecute {
    /** `Date.now()` when it was sent. */
    sentAt: number;
    /** JupyterLab's cell id (the request's `metadata.cellId`), null if none. */
    cellId: string | null;
    code: string;
    silent: boolean;
  }
}

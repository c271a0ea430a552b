import { ISignal, Signal } from '@lumino/signaling';

import { formatBytes } from './format';
import { KernelMessage } from './protocol';
import { IMemorySession } from './tokens';

/**
 * vramscope's own memory in the kernel (protocol 1.1 `self_bytes` on `hello` and `cell`),
 * followed per session from `IMemorySession.messageReceived`. `changed` fires only when
 * the shown text changes, so the status view re-renders at most once per visible change.
 */
export class SelfMemory {
  constructor(session: IMemorySession) {
    this._session = session;
    this._changed = new Signal<IMemorySession, void>(session);
    session.messageReceived.connect(this._onMessage, this);
  }

  /** The latest figure in bytes; null before the kernel sent one (a 1.0 bridge never does). */
  get bytes(): number | null {
    return this._bytes;
  }

  /** `vramscope itself: 3.2 MiB`, or null when unknown. */
  get text(): string | null {
    return this._bytes === null ? null : selfMemoryText(this._bytes);
  }

  /** Emitted with the session as sender (what the panel's session views listen to). */
  get changed(): ISignal<IMemorySession, void> {
    return this._changed;
  }

  dispose(): void {
    this._session.messageReceived.disconnect(this._onMessage, this);
    Signal.disconnectAll(this._changed);
  }

  private _onMessage(_: IMemorySession, msg: KernelMessage): void {
    if (msg.type !== 'hello' && msg.type !== 'cell' && msg.type !== 'cells') {
      return;
    }
    const value = msg.self_bytes;
    const bytes = typeof value === 'number' ? value : null;
    if (msg.type !== 'hello' && bytes === null) {
      return; // keep the last figure
    }
    const before = this.text;
    this._bytes = bytes;
    if (this.text !== before) {
      this._changed.emit();
    }
  }

  private _session: IMemorySession;
  private _bytes: number | null = null;
  private _changed: Signal<IMemorySession, void>;
}

export function selfMemoryText(bytes: number): string {
  return `vramscope itself: ${formatBytes(bytes)}`;
}

/** The one `SelfMemory` of a session (made on first use, gone with the session). */
export function selfMemoryOf(session: IMemorySession): SelfMemory {
  let model = Private.models.get(session);
  if (!model) {
    model = new SelfMemory(session);
    Private.models.set(session, model);
  }
  return model;
}

namespace Private {
  export const models = new WeakMap<IMemorySession, SelfMemory>();
}

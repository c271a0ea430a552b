import { ISignal } from '@lumino/signaling';
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { IMemorySession, IMemorySessionView, IMemoryTracker } from '../tokens';

/**
 * Base of the panel's views: follows one session, re-renders (coalesced through Lumino's
 * update request, and only while visible) when any of `signalsOf(session)` or the settings
 * change. A change of session renders hidden views too: a closed pane never keeps the figures
 * of a notebook no longer followed (closed or switched from), shown or not. Views keep no
 * state beyond UI state.
 */
export abstract class SessionView extends Widget implements IMemorySessionView {
  constructor(tracker: IMemoryTracker) {
    super();
    this.tracker = tracker;
    tracker.settingsChanged.connect(this._onChange, this);
  }

  get session(): IMemorySession | null {
    return this._session;
  }

  setSession(session: IMemorySession | null): void {
    if (session === this._session) {
      return;
    }
    if (this._session) {
      for (const signal of this.signalsOf(this._session)) {
        signal.disconnect(this._onChange, this);
      }
    }
    this._session = session;
    if (session) {
      for (const signal of this.signalsOf(session)) {
        signal.connect(this._onChange, this);
      }
    }
    this._sessionChanged = true;
    this.update();
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this.setSession(null);
    this.tracker.settingsChanged.disconnect(this._onChange, this);
    super.dispose();
  }

  /** The session signals this view re-renders on. */
  protected abstract signalsOf(
    session: IMemorySession
  ): ISignal<IMemorySession, unknown>[];

  /** Rebuild the DOM from the session (null: no notebook). */
  protected abstract render(session: IMemorySession | null): void;

  protected onUpdateRequest(msg: Message): void {
    if (this.isDisposed) {
      return;
    }
    if (!this.isVisible && this.isAttached && !this._sessionChanged) {
      this._stale = true;
      return;
    }
    this._stale = false;
    this._sessionChanged = false;
    this.render(this._session);
  }

  protected onAfterShow(msg: Message): void {
    if (this._stale) {
      this.update();
    }
  }

  private _onChange(): void {
    this.update();
  }

  protected readonly tracker: IMemoryTracker;
  private _session: IMemorySession | null = null;
  private _stale = false;
  /** The session changed since the last render (rendered even while hidden). */
  private _sessionChanged = false;
}

/** `document.createElement` with a class name, text and attributes. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className = '',
  text?: string,
  attrs: { [name: string]: string } = {}
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  if (className) {
    el.className = className;
  }
  if (text !== undefined) {
    el.textContent = text;
  }
  for (const [k, v] of Object.entries(attrs)) {
    el.setAttribute(k, v);
  }
  return el;
}

/**
 * `TimelineModel`: what the timeline shows, no DOM. The session followed (its samples
 * mirrored per device in `series`, its child processes in `lanes`), the device picked, the
 * followed window, and whether the x-range follows the newest samples or stays where the user
 * panned or zoomed. Views render from it and redraw on `changed`.
 */
import { IDisposable } from '@lumino/disposable';
import { ISignal, Signal } from '@lumino/signaling';

import type { Units } from '../format';
import type { IMemorySession } from '../tokens';
import { ProcessLanes } from './lanes';
import { DeviceSeries, TimelineSeries } from './series';

export class TimelineModel implements IDisposable {
  constructor(options: TimelineModel.IOptions = {}) {
    this._windowSeconds = options.windowSeconds ?? 300;
  }

  /** The session shown (null: none). */
  get session(): IMemorySession | null {
    return this._session;
  }

  /** The per-device series mirrored from the session. */
  get series(): TimelineSeries {
    return this._series;
  }

  /** The session's child processes, a lane each. */
  get lanes(): ProcessLanes {
    return this._lanes;
  }

  /**
   * `data`: the session, or what it holds, changed (the series are synced again); `view`:
   * the device, the window or the x-range changed.
   */
  get changed(): ISignal<this, TimelineModel.Change> {
    return this._changed;
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  /** Follow a session; `null` clears. The x-range follows the newest samples again. */
  setSession(session: IMemorySession | null): void {
    if (session === this._session) {
      return;
    }
    if (this._session) {
      for (const signal of Private.followed(this._session)) {
        signal.disconnect(this._onSessionChanged, this);
      }
    }
    this._session = session;
    this._lanes.setSession(session);
    this._series.reset();
    this._userRange = null;
    this._follow = true;
    if (session) {
      for (const signal of Private.followed(session)) {
        signal.connect(this._onSessionChanged, this);
      }
      this._series.sync(session);
    }
    this._changed.emit('data');
  }

  /** Whether the x-range tracks the latest samples. */
  get follow(): boolean {
    return this._follow;
  }
  set follow(value: boolean) {
    if (value === this._follow) {
      return;
    }
    this._follow = value;
    if (value) {
      this._userRange = null;
    }
    this._changed.emit('view');
  }

  /** The byte units of the y axis and the tooltip (the units setting). */
  get units(): Units {
    return this._units;
  }
  set units(value: Units) {
    if (value !== this._units) {
      this._units = value;
      this._changed.emit('view');
    }
  }

  /** The followed window in seconds (`Infinity` = the whole history). */
  get windowSeconds(): number {
    return this._windowSeconds;
  }
  set windowSeconds(value: number) {
    this._windowSeconds = value > 0 ? value : Infinity;
    this._changed.emit('view');
  }

  /** A window picked in the toolbar: follow the newest samples over it. */
  chooseWindow(seconds: number): void {
    this._windowSeconds = seconds;
    this._follow = true;
    this._userRange = null;
    this._changed.emit('view');
  }

  /** The device shown; defaults to the first CUDA device, else MPS, else CPU. */
  get deviceId(): string | null {
    return this.currentDevice()?.id ?? null;
  }
  set deviceId(id: string | null) {
    this._deviceId = id;
    this._changed.emit('view');
  }

  /** The series of the device shown (undefined: no device yet). */
  currentDevice(): DeviceSeries | undefined {
    if (this._deviceId) {
      const d = this._series.device(this._deviceId);
      if (d) {
        return d;
      }
    }
    const devs = this._series.devices;
    return (
      devs.find(d => d.kind === 'cuda') ??
      devs.find(d => d.kind === 'mps') ??
      devs[0]
    );
  }

  /** The x-range the user panned or zoomed to, in kernel seconds (null: none). */
  get userRange(): [number, number] | null {
    return this._userRange;
  }

  /** Bumped when plotly must take the x-range given rather than keep the user's. */
  get uirevision(): number {
    return this._uirevision;
  }

  /**
   * The user panned or zoomed the plot (a range), or double-clicked it (`autorange`: show
   * everything; plotly autoranged to its own traces, not the lines, which are a canvas, so a
   * new uirevision makes it take our range). Either way the range stops following.
   */
  zoom(change: [number, number] | 'autorange'): void {
    if (change === 'autorange') {
      this._userRange = null;
      this._uirevision++;
    } else {
      this._userRange = change;
    }
    this._follow = false;
    this._changed.emit('view');
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this.setSession(null);
    this._lanes.dispose();
    this._isDisposed = true;
    Signal.clearData(this);
  }

  private _onSessionChanged(): void {
    if (this._session) {
      this._series.sync(this._session);
    }
    this._changed.emit('data');
  }

  private _session: IMemorySession | null = null;
  private _series = new TimelineSeries();
  private _lanes = new ProcessLanes();
  private _follow = true;
  private _units: Units = 'binary';
  private _windowSeconds: number;
  private _userRange: [number, number] | null = null;
  private _deviceId: string | null = null;
  private _uirevision = 0;
  private _isDisposed = false;
  private _changed = new Signal<this, TimelineModel.Change>(this);
}

export namespace TimelineModel {
  export type Change = 'data' | 'view';

  export interface IOptions {
    /** Initial "follow live" window in seconds (default 300; Infinity = all). */
    windowSeconds?: number;
  }
}

namespace Private {
  /** The session's signals after which the series are synced again. */
  export function followed(
    session: IMemorySession
  ): ISignal<IMemorySession, unknown>[] {
    return [
      session.samplesAdded,
      session.cellRecorded,
      session.changed,
      session.runningCellChanged,
      session.devicesChanged
    ];
  }
}

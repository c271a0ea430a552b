/**
 * Draw scheduling for the timeline: at most one draw per interval, aligned on an animation
 * frame; a draw requested while one is in progress runs once after it; a hidden view only
 * notes that it is out of date.
 */
export class DrawScheduler {
  constructor(options: DrawScheduler.IOptions) {
    this._render = options.render;
    this._isVisible = options.isVisible;
    this._minIntervalMs = 1000 / Math.max(1, options.maxRedrawsPerSecond ?? 10);
  }

  /** Whether a draw was skipped while hidden (draw again when shown). */
  get dirty(): boolean {
    return this._dirty;
  }

  /** Draw soon: at most one draw per interval, on an animation frame. */
  schedule(): void {
    if (this._scheduled || this._isDisposed) {
      return;
    }
    this._scheduled = true;
    const wait = Math.max(
      0,
      this._minIntervalMs - (performance.now() - this._lastDrawAt)
    );
    this._timer = window.setTimeout(() => {
      this._timer = 0;
      this._raf = requestAnimationFrame(() => {
        this._raf = 0;
        this._scheduled = false;
        void this.drawNow();
      });
    }, wait);
  }

  /** Draw now (a draw in progress: once more after it); resolves when drawn. */
  async drawNow(): Promise<void> {
    if (this._isDisposed) {
      return;
    }
    if (!this._isVisible()) {
      this._dirty = true;
      return;
    }
    if (this._drawing) {
      this._again = true;
      return this._drawing;
    }
    this._dirty = false;
    this._lastDrawAt = performance.now();
    this._drawing = this._render().finally(() => {
      this._drawing = null;
      if (this._again) {
        this._again = false;
        this.schedule();
      }
    });
    return this._drawing;
  }

  /** Drop a scheduled draw. */
  cancel(): void {
    if (this._timer) {
      clearTimeout(this._timer);
      this._timer = 0;
    }
    if (this._raf) {
      cancelAnimationFrame(this._raf);
      this._raf = 0;
    }
    this._scheduled = false;
  }

  dispose(): void {
    this._isDisposed = true;
    this.cancel();
  }

  private _render: () => Promise<void>;
  private _isVisible: () => boolean;
  private _minIntervalMs: number;
  private _isDisposed = false;
  private _lastDrawAt = -Infinity;
  private _scheduled = false;
  private _timer = 0;
  private _raf = 0;
  private _drawing: Promise<void> | null = null;
  private _again = false;
  private _dirty = false;
}

export namespace DrawScheduler {
  export interface IOptions {
    /** Draw (resolves when drawn). */
    render: () => Promise<void>;
    /** Whether drawing now is useful. */
    isVisible: () => boolean;
    /** Throttle (default 10 per second). */
    maxRedrawsPerSecond?: number;
  }
}

/**
 * `WarningList`: a session's warnings, newest last, at most `MAX` of them. The bridge's own
 * warnings (from `hello`, updated by `devices`) replace each other; the front end's (e.g.
 * invalid messages) are kept.
 */
export class WarningList {
  static readonly MAX = 20;

  get items(): ReadonlyArray<string> {
    return this._items;
  }

  /** Add a warning unless it repeats the last one; returns whether it was added. */
  add(message: string): boolean {
    if (this._items[this._items.length - 1] === message) {
      return false;
    }
    this._items.push(message);
    if (this._items.length > WarningList.MAX) {
      this._items.splice(0, this._items.length - WarningList.MAX);
    }
    return true;
  }

  /** Drop the bridge's previous warnings and remember `warnings` as its new ones (not added). */
  replaceBridge(warnings: ReadonlyArray<string>): void {
    const previous = new Set(this._bridge);
    this._items = this._items.filter(w => !previous.has(w));
    this._bridge = [...warnings];
  }

  /** Drop every warning; returns whether there were any. */
  clear(): boolean {
    if (!this._items.length) {
      return false;
    }
    this._items = [];
    return true;
  }

  private _items: string[] = [];
  private _bridge: string[] = [];
}

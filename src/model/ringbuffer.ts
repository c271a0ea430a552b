import { IRingBuffer } from '../tokens';

/**
 * A bounded, append-only ring buffer: once full, each push drops the oldest item.
 */
export class RingBuffer<T> implements IRingBuffer<T> {
  constructor(capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) {
      throw new RangeError(
        `RingBuffer capacity must be a positive integer, got ${capacity}`
      );
    }
    this.capacity = capacity;
    this._items = new Array<T>(capacity);
  }

  readonly capacity: number;

  get length(): number {
    return this._length;
  }

  get pushed(): number {
    return this._pushed;
  }

  /** Items dropped so far because the buffer was full. */
  get dropped(): number {
    return this._pushed - this._length;
  }

  push(...items: T[]): void {
    for (const item of items) {
      this._items[(this._start + this._length) % this.capacity] = item;
      if (this._length < this.capacity) {
        this._length++;
      } else {
        this._start = (this._start + 1) % this.capacity;
      }
      this._pushed++;
    }
  }

  /** The item at `index` (0 = oldest kept). Throws a RangeError out of bounds. */
  get(index: number): T {
    if (!Number.isInteger(index) || index < 0 || index >= this._length) {
      throw new RangeError(
        `RingBuffer index ${index} out of range [0, ${this._length})`
      );
    }
    return this._items[(this._start + index) % this.capacity];
  }

  /** The newest item, or undefined when empty. */
  last(): T | undefined {
    return this._length ? this.get(this._length - 1) : undefined;
  }

  /** The kept items, oldest first. */
  toArray(): T[] {
    const out: T[] = new Array(this._length);
    for (let i = 0; i < this._length; i++) {
      out[i] = this._items[(this._start + i) % this.capacity];
    }
    return out;
  }

  clear(): void {
    this._items = new Array<T>(this.capacity);
    this._start = 0;
    this._length = 0;
  }

  private _items: T[];
  private _start = 0;
  private _length = 0;
  private _pushed = 0;
}

import { RingBuffer } from '../../src/model/ringbuffer';

describe('RingBuffer', () => {
  it('keeps at most capacity items, dropping the oldest', () => {
    const rb = new RingBuffer<number>(3);
    rb.push(1, 2);
    expect(rb.toArray()).toEqual([1, 2]);
    rb.push(3, 4, 5);
    expect(rb.length).toBe(3);
    expect(rb.pushed).toBe(5);
    expect(rb.dropped).toBe(2);
    expect(rb.toArray()).toEqual([3, 4, 5]);
    expect(rb.get(0)).toBe(3);
    expect(rb.get(2)).toBe(5);
    expect(rb.last()).toBe(5);
  });

  it('throws RangeError out of bounds and on a bad capacity', () => {
    const rb = new RingBuffer<number>(2);
    expect(() => rb.get(0)).toThrow(RangeError);
    rb.push(1);
    expect(() => rb.get(1)).toThrow(RangeError);
    expect(() => rb.get(-1)).toThrow(RangeError);
    expect(() => new RingBuffer(0)).toThrow(RangeError);
  });

  it('wraps many times and clears', () => {
    const rb = new RingBuffer<number>(4);
    for (let i = 0; i < 1003; i++) {
      rb.push(i);
    }
    expect(rb.toArray()).toEqual([999, 1000, 1001, 1002]);
    rb.clear();
    expect(rb.length).toBe(0);
    expect(rb.toArray()).toEqual([]);
    expect(rb.last()).toBeUndefined();
  });
});

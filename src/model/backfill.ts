/**
 * Merging the samples the kernel kept (`get_samples`, after a reload or a reconnect) into the
 * ones a session holds, without duplicates and in time order.
 */
import type { ISample } from '../protocol';
import { validateSample } from '../validate';
import { RingBuffer } from './ringbuffer';

/**
 * The kernel's samples (`raw`, unvalidated) newer than `last` that `held` lacks; a string
 * says why the reply was dropped (an invalid sample).
 */
export function freshSamples(
  held: RingBuffer<ISample>,
  raw: ReadonlyArray<unknown>,
  last: number | null
): ISample[] | string {
  const seen = new Set<number>();
  for (let i = held.length - 1; i >= 0; i--) {
    const t = held.get(i).t;
    if (last !== null && t <= last) {
      break;
    }
    seen.add(t); // live samples that came in while the request was answered
  }
  const fresh: ISample[] = [];
  for (const item of raw) {
    const sample = validateSample(item);
    if (typeof sample === 'string') {
      return sample;
    }
    if ((last === null || sample.t > last) && !seen.has(sample.t)) {
      fresh.push(sample);
    }
  }
  return fresh;
}

/**
 * `fresh` merged into `held`, in time order, in a new buffer of the same capacity: views that
 * mirror the buffer (the timeline's series) see a different buffer and read it again.
 */
export function mergeSamples(
  held: RingBuffer<ISample>,
  fresh: ReadonlyArray<ISample>
): RingBuffer<ISample> {
  const all = [...fresh, ...held.toArray()].sort((a, b) => a.t - b.t);
  const ring = new RingBuffer<ISample>(held.capacity);
  ring.push(...all.slice(-ring.capacity));
  return ring;
}

/**
 * A continued holders scan's `insight` message (`layers_unchanged`, since 1.1) carries no
 * layer rows: they are those of the previous message, which for a 10,000-module model were
 * ~120 KB re-sent with every budget-sized slice of the scan.
 */
import type { IInsight } from '../protocol';

/**
 * The insight to keep: `next` itself, or with `layers_unchanged` the previous insight's
 * layers (for the same model; without one, `next` as it came).
 */
export function withLayers(
  next: IInsight,
  previous: IInsight | null
): IInsight {
  if (!next.layers_unchanged || !previous || previous.model !== next.model) {
    return next;
  }
  const merged: IInsight = { ...next, layers: previous.layers };
  delete merged.layers_unchanged;
  return merged;
}

"""Min/max downsampling of a sampled series that keeps every peak and every trough.

A series of ``n`` points is cut into ``buckets`` runs of consecutive points; each run keeps its
lowest and its highest point (in time order), so the drawn line reaches exactly the same
extremes as the full series. The first and last points are always kept.
"""

from __future__ import annotations

from collections.abc import Sequence


def minmax(
    times: Sequence[float], values: Sequence[int], buckets: int
) -> tuple[list[float], list[int]]:
    """At most ``2 * buckets + 2`` points of ``(times, values)``, every extreme kept.

    ``times`` and ``values`` have the same length; the result is in time order.
    """
    n = len(values)
    if n != len(times):
        raise ValueError("times and values differ in length")
    if buckets < 1:
        raise ValueError("buckets must be >= 1")
    if n <= 2 * buckets + 2:
        return list(times), list(values)
    keep: list[int] = [0]
    for b in range(buckets):
        lo = 1 + (n - 2) * b // buckets
        hi = 1 + (n - 2) * (b + 1) // buckets
        if lo >= hi:
            continue
        chunk = values[lo:hi]
        i_min = lo + chunk.index(min(chunk))
        i_max = lo + chunk.index(max(chunk))
        if i_min == i_max:
            keep.append(i_min)
        else:
            keep.extend((i_min, i_max) if i_min < i_max else (i_max, i_min))
    keep.append(n - 1)
    return [times[i] for i in keep], [values[i] for i in keep]

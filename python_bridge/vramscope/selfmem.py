"""vramscope's own memory in the kernel: an estimate of the bytes its structures hold.

The figure is ``sys.getsizeof`` summed over everything reachable from the bridge's
``Runtime`` through vramscope's own objects and the builtin containers they hold (the sample
ring buffer, the cell records, the insight and advice caches, the processes history, ...).
The walk never enters an object of another package (the IPython shell, comms, threads, a
user's module or tensor: counted as 0, never followed) nor the user's namespace dicts, so it
measures vramscope alone and costs the same with a 10 GB model as without.

Long homogeneous containers (the 36,000-sample ring, up to 10,000 cell records) are
estimated from evenly spaced items: the mean deep size of ``SAMPLE_ITEMS`` of them times
the length, which keeps one estimate under ~1 ms. ``SelfMemory`` recomputes it at most once
per ``MIN_INTERVAL_S`` and never raises.
"""

from __future__ import annotations

import collections
import contextlib
import sys
import time
from collections.abc import Iterable
from typing import Any, Callable

#: Containers longer than this are estimated from ``SAMPLE_ITEMS`` evenly spaced items.
EXACT_LEN = 64
SAMPLE_ITEMS = 32
#: At most this many objects are visited per estimate (the rest counted as 0).
MAX_OBJECTS = 50_000
MIN_INTERVAL_S = 2.0

_ATOMS = (str, bytes, bytearray, int, float, bool, complex, type(None))
_CONTAINERS = (dict, list, tuple, set, frozenset, collections.deque)


def _ours(obj: object) -> bool:
    module = getattr(type(obj), "__module__", "") or ""
    return module == "vramscope" or module.startswith("vramscope.")


class _Walk:
    def __init__(self, skip: Iterable[object]) -> None:
        self.seen: set[int] = {id(o) for o in skip}
        self.visited = 0

    def size(self, obj: object) -> int:
        """Deep size of ``obj`` (our objects and builtin containers only)."""
        if id(obj) in self.seen or self.visited >= MAX_OBJECTS:
            return 0
        if isinstance(obj, _ATOMS):
            self.seen.add(id(obj))
            self.visited += 1
            return sys.getsizeof(obj)
        if isinstance(obj, _CONTAINERS):
            self.seen.add(id(obj))
            self.visited += 1
            return sys.getsizeof(obj) + self._items(obj)
        if not _ours(obj) or isinstance(obj, type):
            return 0
        self.seen.add(id(obj))
        self.visited += 1
        total = sys.getsizeof(obj)
        attrs = getattr(obj, "__dict__", None)
        if isinstance(attrs, dict):
            total += self.size(attrs)
        for slot in _slots(type(obj)):
            total += self.size(getattr(obj, slot, None))
        return total

    def _items(self, obj: object) -> int:
        # list() of a builtin container is one C call: safe while the sampler thread appends
        items: list[Any] = list(obj.items()) if isinstance(obj, dict) else list(obj)  # type: ignore[call-overload]
        if len(items) <= EXACT_LEN:
            return sum(self._item(item) for item in items)
        step = len(items) / SAMPLE_ITEMS
        picked = [items[int(i * step)] for i in range(SAMPLE_ITEMS)]
        return int(sum(self._item(item) for item in picked) * len(items) / SAMPLE_ITEMS)

    def _item(self, item: Any) -> int:
        if isinstance(item, tuple) and len(item) == 2 and not isinstance(item[0], _CONTAINERS):
            return self.size(item[0]) + self.size(item[1])  # a dict entry
        return self.size(item)


def _slots(cls: type) -> list[str]:
    names: list[str] = []
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        names.extend([slots] if isinstance(slots, str) else list(slots))
    return [n for n in names if n not in ("__dict__", "__weakref__")]


def estimate_bytes(root: object, skip: Iterable[object] = ()) -> int:
    """Deep size estimate of ``root``; objects in ``skip`` (the user's namespaces) count 0."""
    return _Walk(skip).size(root)


class SelfMemory:
    """The cached figure for one runtime (``hello``/``cell`` messages' ``self_bytes``)."""

    def __init__(
        self,
        root: Callable[[], object],
        skip: Callable[[], Iterable[object]],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._root = root
        self._skip = skip
        self._clock = clock
        self._at: float | None = None
        self.value: int | None = None

    def bytes(self, fresh: bool = False) -> int | None:
        """The estimate, recomputed when older than MIN_INTERVAL_S (or ``fresh``)."""
        now = self._clock()
        if fresh or self._at is None or now - self._at >= MIN_INTERVAL_S:
            self._at = now
            with contextlib.suppress(Exception):  # keeps the previous figure
                self.value = estimate_bytes(self._root(), self._skip())
        return self.value

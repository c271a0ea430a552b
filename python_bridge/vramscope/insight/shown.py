"""What the last after-cell insight showed, to tell whether a cell changed any of it (issue 19).

A cell that ran no model, bound no name to another object and moved no device's total by more
than :data:`QUIET_BYTES` changes nothing an insight shows: ``InsightEngine.unchanged`` then
skips the after-cell insight and its message (a ``pass`` cell beside a 1,000-module model:
a ~60 us check in place of ~0.7 ms). This module keeps the figures that check compares with:
the activation tracker's state, the layer rows, and each device's total, read again once the
insight has been sent (its own temporaries, ~100 KB with the demo's model, are freed then).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

from .breakdown import TotalFn, initialized_cuda_devices, measured_totals, namespace_tensors

#: A device total that moved no further than this since the last insight is unchanged: a
#: trivial cell moves the CPU's by IPython's history, ~10 KB; an insight's figures show 0.1
#: MiB. An accelerator's allocator moves only with tensors: 64 KiB there is no visible change
#: either.
QUIET_BYTES = 64 << 10


@dataclass
class Shown:
    tracker: tuple[int, int]  # the activation tracker's (epoch, live saved bytes)
    totals: dict[str, int]  # each device's total
    rows: Any  # the layer rows (the list object: new rows are a new list)
    tensors: tuple[int, ...]  # the namespace's tensors the breakdown's other_tensors sums

    def settle(self, total_fn: Optional[TotalFn]) -> None:
        """The insight went out: its devices' totals, read again."""
        self.totals = measured_totals(list(self.totals), total_fn)

    def holds(
        self, tracker: Any, rows: Any, ns: Mapping[str, Any], total_fn: Optional[TotalFn]
    ) -> bool:
        """No forward measured and the same live activations, the same rows (their peaks
        not reset since), the same tensors in the namespace (a tensor appended to a list:
        the breakdown's ``other_tensors``), no device came or went, and none's total moved
        past QUIET_BYTES."""
        if self.tracker != (tracker.epoch, tracker.total_bytes()) or rows is not self.rows:
            return False
        if tensor_ids(ns) != self.tensors:
            return False
        now = measured_totals(set(self.totals) | initialized_cuda_devices(), total_fn)
        if set(now) != set(self.totals):
            return False
        return all(abs(total - self.totals[dev]) <= QUIET_BYTES for dev, total in now.items())


def tensor_ids(ns: Mapping[str, Any]) -> tuple[int, ...]:
    """The ids of the namespace's tensors that the breakdown looks at."""
    return tuple(id(t) for t in namespace_tensors(ns))

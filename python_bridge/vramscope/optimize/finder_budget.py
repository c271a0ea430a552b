"""The batch-size finder's own budget off CUDA: a trial is stopped the moment the bytes it
holds pass the limit, the way a CUDA out-of-memory error stops it.

On CPU (and MPS) nothing stops a step that outgrows memory: the machine swaps or the kernel
dies. So each trial runs under ``BudgetPeak``, the step watch's op-by-op count
(``peak.StepPeak``: every storage an op creates counts from that op until it is freed, a
weakref finalizer on the storage; views and in-place results are not new memory), which
raises ``_BudgetExceeded`` from the op whose result takes the live bytes past the limit, and
``_OutOfTime`` once the search's deadline passed. Both are BaseExceptions, so a step's own
``except Exception`` does not swallow them. The overshoot is at most that one op's result.

The default budget off CUDA is explicit and modest: ``min(2 GiB, 25% of the RAM available
now)`` (on MPS also at most what Metal recommends minus what is allocated).
"""

from __future__ import annotations

import time
from typing import Any

from .peak import tracker

DEFAULT_CAP = 2 * 2**30
DEFAULT_SHARE = 0.25

_CLASSES: dict[int, Any] = {}


class _BudgetExceeded(BaseException):
    """A trial's live bytes passed the finder's limit."""


class _OutOfTime(BaseException):
    """The search's ``max_seconds`` ran out during a trial."""


def _budget_class(torch: Any) -> Any:
    step_peak = type(tracker(torch))

    class BudgetPeak(step_peak):  # type: ignore[misc, valid-type]
        def __init__(self, limit: int | None, deadline: float | None) -> None:
            super().__init__(False)
            self.limit = limit
            self.deadline = deadline
            self.stopped: str | None = None  # "budget" or "time"
            self.at_stop = 0  # the live bytes when it stopped

        def _count(self, func: Any, args: Any, kwargs: Any, out: Any) -> None:
            super()._count(func, args, kwargs, out)
            if self.limit is not None and self.current > self.limit:
                self.stopped, self.at_stop = "budget", self.current
                raise _BudgetExceeded(self.current)
            if self.deadline is not None and time.monotonic() > self.deadline:
                self.stopped, self.at_stop = "time", self.current
                raise _OutOfTime()

    return BudgetPeak


def budget_peak(torch: Any, limit: int | None, deadline: float | None) -> Any:
    """A new dispatch mode counting a trial's live bytes, stopping it past ``limit``."""
    cls = _CLASSES.get(id(torch))
    if cls is None:
        cls = _CLASSES[id(torch)] = _budget_class(torch)
    return cls(limit, deadline)


def available_ram() -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:
        pass
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except Exception:
        pass
    return None


def default_budget(torch: Any, device: Any) -> int:
    """Bytes a search may use on ``device`` when no budget is given."""
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    ram = available_ram()
    budget = DEFAULT_CAP if ram is None else min(DEFAULT_CAP, int(ram * DEFAULT_SHARE))
    if device.type == "mps":
        try:
            room = int(torch.mps.recommended_max_memory()) - int(
                torch.mps.driver_allocated_memory()
            )
            if room > 0:
                budget = min(budget, room)
        except Exception:
            pass
    return max(budget, 1)

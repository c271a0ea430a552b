"""``find_batch_size``: the largest batch whose training step fits a memory budget.

Grows the batch (doubling) until a step's peak passes the budget (or runs out of memory),
then bisects. Each step's peak is measured: on CUDA the allocator's peak above what was
allocated before the step; elsewhere the tensor bytes the step allocated, followed op by op
(``peak.StepPeak``). Out-of-memory errors are caught and their memory freed. The model's
parameters, buffers and gradients and the optimizer's state are put back after every step.
"""

from __future__ import annotations

import gc
import re
import uuid
from typing import Any, Callable

from ..messages.optimize import BatchSearch, Trial
from .peak import measure_peak
from .restore import Snapshot, training_objects

_UNITS = {"": 1, "b": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmgt]i?)?b?\s*$", re.IGNORECASE)


def parse_bytes(value: int | float | str) -> int:
    """``6442450944``, ``"6GiB"``, ``"512 MiB"``, ``"1.5GB"`` -> bytes. ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"budget must be bytes or a size like '6GiB', got {value!r}")
    if isinstance(value, (int, float)):
        if value <= 0:
            raise ValueError(f"budget must be positive, got {value!r}")
        return int(value)
    match = _SIZE.match(str(value))
    if match is None:
        raise ValueError(f"budget must be bytes or a size like '6GiB', got {value!r}")
    number, unit = float(match.group(1)), (match.group(2) or "").lower()
    factor = _BINARY.get(unit) or _UNITS[unit[:1]]
    if number <= 0:
        raise ValueError(f"budget must be positive, got {value!r}")
    return int(number * factor)


def _device(torch: Any, device: Any) -> Any:
    if device is not None:
        return torch.device(device)
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _is_oom(torch: Any, exc: BaseException) -> bool:
    oom = getattr(torch, "OutOfMemoryError", None)
    if isinstance(oom, type) and isinstance(exc, oom):
        return True
    return isinstance(exc, MemoryError) or (
        isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()
    )


def _free(torch: Any, device: Any) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


class BatchFinder:
    """One search; ``publish`` gets a ``BatchSearch`` after every size tried and at the end."""

    def __init__(
        self,
        torch: Any,
        step_fn: Callable[[int], Any],
        budget: Any,
        margin: float,
        target_batch: int | None,
        snapshot: Snapshot,
        device: Any,
        publish: Callable[[BatchSearch], None] | None,
        max_batch: int,
    ) -> None:
        if not 0 <= margin < 1:
            raise ValueError(f"margin must be in [0, 1), got {margin!r}")
        if target_batch is not None and (not isinstance(target_batch, int) or target_batch < 1):
            raise ValueError(f"target_batch must be a positive int, got {target_batch!r}")
        self.torch, self.step_fn, self.snapshot = torch, step_fn, snapshot
        self.device = _device(torch, device)
        if budget is None:
            if self.device.type != "cuda":
                raise ValueError(
                    f"find_batch_size on {self.device.type}: pass budget= (bytes or a size "
                    "like '6GiB'); only on CUDA does it default to the free device memory"
                )
            free, _total = torch.cuda.mem_get_info(self.device)
            budget = free
        self.budget = parse_bytes(budget)
        self.limit = int(self.budget * (1.0 - margin))
        self.target_batch = target_batch
        self.publish = publish
        self.max_batch = max_batch
        self.tried: list[Trial] = []
        self.search_id = uuid.uuid4().hex[:12]

    def _report(self, state: str, best: int | None, message: str | None) -> BatchSearch:
        search: BatchSearch = {
            "search_id": self.search_id,
            "state": state,  # type: ignore[typeddict-item]
            "device": str(self.device) if self.device.type == "cuda" else self.device.type,
            "budget_bytes": self.budget,
            "tried": list(self.tried),
            "batch_size": best,
            "accumulation_steps": self._accumulation(best),
            "target_batch": self.target_batch,
            "message": message,
        }
        if self.publish is not None:
            self.publish(search)
        return search

    def _accumulation(self, best: int | None) -> int | None:
        if best is None or self.target_batch is None:
            return None
        return max(1, -(-self.target_batch // best))

    def trial(self, batch_size: int) -> bool:
        peak: int | None = None
        oom = False
        try:
            peak = measure_peak(self.torch, self.device, lambda: self.step_fn(batch_size))
        except Exception as exc:
            if not _is_oom(self.torch, exc):
                raise
            oom = True
        finally:
            self.snapshot.restore()
            if oom:
                _free(self.torch, self.device)
        fits = not oom and peak is not None and peak <= self.limit
        self.tried.append({"batch_size": batch_size, "peak_bytes": peak, "fits": fits, "oom": oom})
        self._report("running", None, None)
        return fits

    def run(self, start: int = 1) -> BatchSearch:
        try:
            good, bad = 0, None
            size = start
            while size <= self.max_batch:
                if not self.trial(size):
                    bad = size
                    break
                good = size
                size *= 2
            if bad is None:
                message = f"every size up to {good} fits (max_batch)"
            else:
                # to within 1/32 of the answer: the last sizes each differ by a few percent
                while bad - good > max(1, good // 32):
                    mid = (good + bad) // 2
                    if self.trial(mid):
                        good = mid
                    else:
                        bad = mid
                message = None
            _free(self.torch, self.device)
            if good == 0:
                return self._report("failed", None, f"batch size {start} does not fit the budget")
            return self._report("done", good, message)
        except BaseException as exc:
            self._report("failed", None, f"{type(exc).__name__}: {exc}")
            raise


def find_batch_size(
    step_fn: Callable[[int], Any],
    budget: Any = None,
    margin: float = 0.1,
    target_batch: int | None = None,
    *,
    model: Any = None,
    optimizer: Any = None,
    device: Any = None,
    start: int = 1,
    max_batch: int = 1 << 16,
    publish: Callable[[BatchSearch], None] | None = None,
) -> dict[str, Any]:
    import torch

    models, optimizers = training_objects(torch, step_fn, model, optimizer)
    snapshot = Snapshot(torch, models, optimizers)
    finder = BatchFinder(
        torch, step_fn, budget, margin, target_batch, snapshot, device, publish, max_batch
    )
    search = finder.run(start)
    return {
        "batch_size": search["batch_size"],
        "accumulation_steps": search["accumulation_steps"],
        "target_batch": target_batch,
        "budget_bytes": search["budget_bytes"],
        "limit_bytes": finder.limit,
        "device": search["device"],
        "peaks": {t["batch_size"]: t["peak_bytes"] for t in search["tried"]},
        "tried": search["tried"],
    }

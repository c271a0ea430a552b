"""``find_batch_size``: the largest batch whose training step fits a memory budget.

Grows the batch (doubling, from 2: BatchNorm refuses 1) until a step's peak passes the limit
(the budget less the margin) or runs out of memory, then bisects. Each step's peak is
measured: on CUDA the allocator's peak above what was allocated before the step; elsewhere
the tensor bytes the step allocated, followed op by op, and the trial is stopped the moment
they pass the limit (``finder_budget.py``): a search cannot take the machine down. The whole
search is bounded in time (``max_seconds``) and publishes each trial as it ends.

After every trial everything the step reaches is put back (``restore.py``: parameters,
buffers, gradients, optimizer and LR scheduler state, the random number generators),
including models and optimizers found only as they ran (global hooks during the trial); the
result lists what was restored and what could not be. Ctrl-C stops the step, never the
restore (``finder_guard.py``). Trials are invisible to model insight and the Estimator
(``vramscope.trials``).
"""

from __future__ import annotations

import contextlib
import gc
import re
import threading
import time
import traceback
import uuid
from collections.abc import Iterator
from typing import Any, Callable

from .. import trials
from ..messages.optimize import BatchSearch, Trial
from .finder_budget import _BudgetExceeded, _OutOfTime, budget_peak, default_budget
from .finder_guard import InterruptGuard
from .finder_reach import reach, schedulers_of
from .peak import measure_peak
from .restore import Snapshot

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
        max_seconds: float | None = 120.0,
    ) -> None:
        if not 0 <= margin < 1:
            raise ValueError(f"margin must be in [0, 1), got {margin!r}")
        if target_batch is not None and (not isinstance(target_batch, int) or target_batch < 1):
            raise ValueError(f"target_batch must be a positive int, got {target_batch!r}")
        if max_seconds is not None and not max_seconds > 0:
            raise ValueError(f"max_seconds must be positive or None, got {max_seconds!r}")
        self.torch, self.step_fn, self.snapshot = torch, step_fn, snapshot
        self.device = _device(torch, device)
        self.budget = parse_bytes(default_budget(torch, self.device) if budget is None else budget)
        self.limit = int(self.budget * (1.0 - margin))
        self.target_batch = target_batch
        self.publish = publish
        self.max_batch = max_batch
        self.max_seconds = max_seconds
        self.deadline: float | None = None
        self.tried: list[Trial] = []
        self.stopped: dict[int, str] = {}  # batch size -> "budget" / "oom" / "time"
        self.timed_out = False
        self.search_id = uuid.uuid4().hex[:12]
        self.guard = InterruptGuard(
            protected=[self._prepare, self._settle, self._on_forward, self._on_step],
            # the trial's own lines, and the count's storage finalizer (Python drops an
            # exception raised in a weakref callback: a Ctrl-C there would be lost)
            own=[self.trial, budget_peak(torch, None, None)._gone],
        )
        self._mode: Any = None
        self._hooks: list[Any] = []
        self._in_trial = False
        self._oom = False
        self._thread = threading.get_ident()

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

    # -- one trial: set-up and restore are protected from Ctrl-C, the step is not ---------

    def trial(self, batch_size: int) -> bool | None:
        """Whether ``batch_size`` fits; None when the search ran out of time in it."""
        self.guard.raise_pending()
        try:
            self._prepare()
            peak, stop = self._step(batch_size)
        finally:
            self._settle()
        self.guard.raise_pending()
        if stop == "time":
            self.timed_out = True
            return None
        if stop is not None:
            self.stopped[batch_size] = stop
        fits = stop is None and peak is not None and peak <= self.limit
        oom = stop == "oom"
        self.tried.append({"batch_size": batch_size, "peak_bytes": peak, "fits": fits, "oom": oom})
        self._report("running", None, None)
        return fits

    def _prepare(self) -> None:
        import torch.nn.modules.module as module_hooks
        from torch.optim.optimizer import register_optimizer_step_pre_hook

        self._in_trial = True
        self._thread = threading.get_ident()
        trials.begin()
        self._hooks = [
            module_hooks.register_module_forward_pre_hook(self._on_forward),
            register_optimizer_step_pre_hook(self._on_step),
        ]
        if self.device.type != "cuda":
            self._mode = budget_peak(self.torch, self.limit, self.deadline)
            self._mode.__enter__()

    def _step(self, batch_size: int) -> tuple[int | None, str | None]:
        torch, mode = self.torch, self._mode
        try:
            if mode is None:
                return measure_peak(torch, self.device, lambda: self.step_fn(batch_size)), None
            self.step_fn(batch_size)
        except (_BudgetExceeded, _OutOfTime) as exc:
            traceback.clear_frames(exc.__traceback__)
        except BaseException as exc:
            traceback.clear_frames(exc.__traceback__)  # a kept traceback keeps the trial
            if mode is not None and mode.stopped:
                pass  # the stop, re-raised as another error by code between
            elif isinstance(exc, Exception) and _is_oom(torch, exc):
                self._oom = True
                return None, "oom"
            else:
                raise
        if mode is None:
            return None, None
        if mode.failed:
            raise RuntimeError("the step's peak could not be followed op by op on this device")
        peak = int(mode.at_stop if mode.stopped else mode.peak)
        return peak, mode.stopped

    def _settle(self) -> None:
        mode, self._mode = self._mode, None
        if mode is not None:
            mode.closed = True
            with contextlib.suppress(Exception):
                mode.__exit__(None, None, None)
        for handle in self._hooks:
            handle.remove()
        self._hooks = []
        if self._in_trial:
            self._in_trial = False
            trials.end()
        self.snapshot.restore()
        oom, self._oom = self._oom, False
        if oom or (mode is not None and mode.stopped and mode.current):
            self._free()  # off CUDA only when reference cycles still hold the trial's tensors

    def _free(self) -> None:
        gc.collect()
        if self.device.type == "cuda":
            self.torch.cuda.empty_cache()
        elif self.device.type == "mps":
            self.torch.mps.empty_cache()

    def _on_forward(self, module: Any, _args: Any) -> None:
        """A module that ran and that no name reached: kept from now (before its forward)."""
        if self.snapshot.knows_module(module) or threading.get_ident() != self._thread:
            return  # known, or run by another thread (not the step's)
        if next(iter(module.parameters()), None) is None and not list(module.buffers()):
            return  # nothing to put back (a loss or activation module made in the step)
        with self._paused():
            name = "a model found as it ran"
            self.snapshot.add_model(name, module, grads_known=False)

    def _on_step(self, optimizer: Any, _args: Any, _kwargs: Any) -> None:
        if self.snapshot.knows_optimizer(optimizer) or threading.get_ident() != self._thread:
            return
        with self._paused():
            name = "an optimizer found as it stepped"
            self.snapshot.add_optimizer(name, optimizer, grads_known=False)
            for _path, scheduler in schedulers_of(self.torch, [optimizer], set()):
                name = "an LR scheduler found as its optimizer stepped"
                self.snapshot.add_scheduler(name, scheduler)

    @contextlib.contextmanager
    def _paused(self) -> Iterator[None]:
        """The snapshot's own copies are not the trial's bytes."""
        mode = self._mode
        if mode is not None:
            mode.closed = True
        try:
            yield
        finally:
            if mode is not None:
                mode.closed = False

    # -- the search -----------------------------------------------------------------------

    def _out_of_time(self) -> bool:
        if self.deadline is not None and time.monotonic() > self.deadline:
            self.timed_out = True
        return self.timed_out

    def run(self, start: int = 2) -> BatchSearch:
        if self.max_seconds is not None:
            self.deadline = time.monotonic() + self.max_seconds
        self.guard.open()
        try:
            return self._search(start)
        except BaseException as exc:
            self._report("failed", None, f"{type(exc).__name__}: {exc}")
            raise
        finally:
            self.guard.close()

    def _search(self, start: int) -> BatchSearch:
        good, bad = 0, None
        size = start
        while size <= self.max_batch and not self._out_of_time():
            fits = self.trial(size)
            if not fits:
                bad = None if fits is None else size
                break
            good = size
            size *= 2
        # to within 1/32 of the answer: the last sizes each differ by a few percent
        while bad is not None and bad - good > max(1, good // 32) and not self._out_of_time():
            mid = (good + bad) // 2
            fits = self.trial(mid)
            if fits is None:
                break
            if fits:
                good = mid
            else:
                bad = mid
        notes = []
        if self.timed_out:
            notes.append(
                f"stopped after max_seconds={self.max_seconds:g}: the largest size that fit so far"
            )
        elif bad is None:
            notes.append(f"every size up to {good} fits (max_batch)")
        late = [name for name in self.snapshot.restored if " found as it" in name]
        if late:
            notes.append(
                "found only as the step ran (no name it uses reaches them), restored too: "
                + ", ".join(late)
                + "; pass model= / optimizer= to find_batch_size"
            )
        if self.snapshot.not_restored:
            notes.append("not restored: " + "; ".join(self.snapshot.not_restored))
        message = " | ".join(notes) or None
        if good == 0:
            why = f"batch size {start} does not fit the budget"
            if start > 1 and not self.timed_out:
                why += " (start=1 tries a batch of one)"
            return self._report("failed", None, " | ".join([why, *notes]))
        return self._report("done", good, message)


def find_batch_size(
    step_fn: Callable[[int], Any],
    budget: Any = None,
    margin: float = 0.1,
    target_batch: int | None = None,
    *,
    model: Any = None,
    optimizer: Any = None,
    scheduler: Any = None,
    device: Any = None,
    start: int = 2,
    max_batch: int = 1 << 16,
    max_seconds: float | None = 120.0,
    publish: Callable[[BatchSearch], None] | None = None,
) -> dict[str, Any]:
    import torch

    if not isinstance(start, int) or start < 1:
        raise ValueError(f"start must be a positive int, got {start!r}")
    found = reach(torch, step_fn, {"model": model, "optimizer": optimizer, "scheduler": scheduler})
    snapshot = Snapshot(torch)
    for path, value in found.models:
        snapshot.add_model(path, value)
    for path, value in found.optimizers:
        snapshot.add_optimizer(path, value)
    for path, value in found.schedulers:
        snapshot.add_scheduler(path, value)
    snapshot.add_rng()
    finder = BatchFinder(
        torch,
        step_fn,
        budget,
        margin,
        target_batch,
        snapshot,
        device,
        publish,
        max_batch,
        max_seconds,
    )
    began = time.monotonic()
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
        "stopped": dict(finder.stopped),
        "timed_out": finder.timed_out,
        "seconds": round(time.monotonic() - began, 3),
        "restored": list(snapshot.restored),
        "not_restored": list(snapshot.not_restored),
        "message": search["message"],
    }

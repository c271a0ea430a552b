"""A training step's peak memory: the CUDA allocator's peak, or (any device) the bytes of the
tensors the step allocated, followed op by op through a dispatch mode.

The op-by-op count is allocator-independent: a storage counts from the op that created it
until it is freed (a weakref finalizer on the storage), views and in-place results of an
op's inputs are not new memory.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable


def _tracker_class(torch: Any) -> Any:
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class StepPeak(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.live: dict[int, int] = {}
            self.current = 0
            self.peak = 0

        def _gone(self, key: int) -> None:
            self.current -= self.live.pop(key, 0)

        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            out = func(*args, **(kwargs or {}))
            inputs = {
                a.untyped_storage().data_ptr()
                for a in tree_flatten((args, kwargs))[0]
                if isinstance(a, torch.Tensor) and a.layout == torch.strided
            }
            for t in tree_flatten(out)[0]:
                if not isinstance(t, torch.Tensor) or t.layout != torch.strided:
                    continue
                storage = t.untyped_storage()
                key = storage.data_ptr()
                if not key or key in inputs or key in self.live:
                    continue
                nbytes = storage.nbytes()
                self.live[key] = nbytes
                self.current += nbytes
                if self.current > self.peak:
                    self.peak = self.current
                weakref.finalize(storage, self._gone, key)
            return out

    return StepPeak


def measure_peak(torch: Any, device: Any, step: Callable[[], Any]) -> int:
    """Peak bytes ``step`` added on ``device`` above what was allocated when it started."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        base = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        step()
        torch.cuda.synchronize(device)
        return max(0, int(torch.cuda.max_memory_allocated(device)) - base)
    tracker = _tracker_class(torch)()
    with tracker:
        step()
    return int(tracker.peak)

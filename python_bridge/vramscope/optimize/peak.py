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

    Tensor, strided = torch.Tensor, torch.strided

    def _storages(args: Any, kwargs: Any) -> set[int]:
        """The storages of an op's tensor arguments (and of tensors in list arguments)."""
        found = set()
        for group in (args, kwargs.values() if kwargs else ()):
            for a in group:
                if isinstance(a, Tensor):
                    if a.layout == strided:
                        found.add(a.untyped_storage().data_ptr())
                elif isinstance(a, (list, tuple)):
                    for b in a:
                        if isinstance(b, Tensor) and b.layout == strided:
                            found.add(b.untyped_storage().data_ptr())
        return found

    aten = torch.ops.aten
    softmax_ops = {aten._softmax.default, aten.softmax.int}
    graph_task = torch._C._current_graph_task_id

    class StepPeak(TorchDispatchMode):
        def __init__(self, record: bool = False) -> None:
            super().__init__()
            self.live: dict[int, int] = {}
            self.current = 0
            self.peak = 0
            self.closed = False  # gone through: a mode left pushed by accident counts nothing
            self.failed = False  # the count broke off (an op's result it could not read)
            # with ``record``: every allocation (key, +bytes) and free (key, -bytes) in order
            self.events: list[tuple[int, int]] | None = [] if record else None
            # with ``record``, attention-like score matrices made in the forward: square
            # softmax outputs ([..., T, T]) by storage; ``attention``: their bytes and the
            # bytes of one float32 per row (what a fused kernel keeps instead: logsumexp)
            self.scores: set[int] = set()
            self.attention = [0, 0]
            self._refs: dict[Any, int] = {}  # weakref to a storage -> its key

        def _gone(self, ref: Any) -> None:
            key = self._refs.pop(ref, 0)
            nbytes = self.live.pop(key, 0)
            self.current -= nbytes
            if nbytes and self.events is not None and not self.closed:
                self.events.append((key, -nbytes))

        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            out = func(*args, **(kwargs or {}))
            if not self.closed:
                try:
                    self._count(func, args, kwargs, out)
                except Exception:  # never into the user's op: this measurement stops
                    self.closed = self.failed = True
            return out

        def _count(self, func: Any, args: Any, kwargs: Any, out: Any) -> None:
            inputs: set[int] | None = None  # made only when an output is not a known storage
            outs = out if isinstance(out, (tuple, list)) else (out,)
            for t in outs:
                if not isinstance(t, Tensor) or t.layout != strided:
                    continue
                storage = t.untyped_storage()
                key = storage.data_ptr()
                if not key or key in self.live:
                    continue  # a view or in-place result of a tensor made in the step
                if inputs is None:
                    inputs = _storages(args, kwargs)
                if key in inputs:
                    continue  # ... of a tensor from before the step
                nbytes = storage.nbytes()
                self.live[key] = nbytes
                self.current += nbytes
                if self.current > self.peak:
                    self.peak = self.current
                if self.events is not None:
                    self.events.append((key, nbytes))
                self._refs[weakref.ref(storage, self._gone)] = key
            if self.events is not None and func in softmax_ops:
                self._scores(out)

        def _scores(self, out: Any) -> None:
            if graph_task() != -1 or not isinstance(out, Tensor):
                return  # in backward
            shape = out.shape
            key = out.untyped_storage().data_ptr()
            if len(shape) >= 2 and shape[-1] == shape[-2] > 1 and key not in self.scores:
                self.scores.add(key)
                self.attention[0] += out.numel() * out.element_size()
                self.attention[1] += out.numel() // shape[-1] * 4

    return StepPeak


_CLASSES: dict[int, Any] = {}


def tracker(torch: Any, record: bool = False) -> Any:
    """A new op-by-op peak tracker (a ``TorchDispatchMode``; the class is made once)."""
    cls = _CLASSES.get(id(torch))
    if cls is None:
        cls = _CLASSES[id(torch)] = _tracker_class(torch)
    return cls(record)


def measure_peak(torch: Any, device: Any, step: Callable[[], Any]) -> int:
    """Peak bytes ``step`` added on ``device`` above what was allocated when it started."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        base = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        step()
        torch.cuda.synchronize(device)
        return max(0, int(torch.cuda.max_memory_allocated(device)) - base)
    mode = tracker(torch)
    with mode:
        step()
    if mode.failed:
        raise RuntimeError("the step's peak could not be followed op by op on this device")
    return int(mode.peak)

"""Exact per-cell CPU peaks: torch's CPU storages followed op by op for the whole cell.

The sampler reads the CPU ten times a second, so a peak between two readings is missed (a
re-run ``y = torch.ones(n)`` holds the new and the old ``y`` for microseconds). With
``cpu_peak: "exact"`` (``vramscope profile`` turns it on; off by default, since it puts a
Python dispatch mode under every op of the cell) a ``TorchDispatchMode`` is pushed when a cell
starts and popped when it ends. It counts:

- every CPU storage an op creates (an output whose storage is neither known nor one of the
  op's inputs: views and in-place results are not new memory), from its op until it is freed
  (a weakref callback on the storage; storages made in earlier armed cells stay followed);
- a storage from before arming that an op reads: from then on its free counts too.

``current`` is the net of those bytes; a cell's peak is the highest ``current`` minus its
value at the cell's start. What the counter cannot see (memory outside torch storages: numpy,
Python objects; a free of a storage it never met) is in glibc's delta, which the CPU device
adds (devices/cpu.py). Like the step watch's count (optimize/peak.py) the mode says
``ignore_compile_internals`` (Dynamo compiles as without it), runs the op first and never
raises into it: a count that breaks is marked failed and the cell falls back to the sampled
peak. Only the main thread's ops are seen (dispatch modes are per thread).
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

_CLASSES: dict[int, Any] = {}


def _counter_class(torch: Any) -> Any:
    from torch.utils._python_dispatch import TorchDispatchMode

    Tensor, strided = torch.Tensor, torch.strided
    no_torch_function = torch._C.DisableTorchFunction

    class CellCounter(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.live: dict[int, int] = {}  # storage key -> bytes, of every followed storage
            self._refs: dict[Any, int] = {}  # weakref to a storage -> its key
            self.current = 0
            self.peak = 0
            self.counting = False
            self.failed = False

        @classmethod
        def ignore_compile_internals(cls) -> bool:
            return True

        def _gone(self, ref: Any) -> None:
            key = self._refs.pop(ref, None)
            if key is not None:
                self.current -= self.live.pop(key, 0)

        def _follow(self, storage: Any, key: int) -> int:
            nbytes = int(storage.nbytes())
            self.live[key] = nbytes
            self._refs[weakref.ref(storage, self._gone)] = key
            return nbytes

        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            out = func(*args, **(kwargs or {}))
            if self.counting:
                try:
                    with no_torch_function():  # unseen by the user's tensor subclasses
                        self._count(args, kwargs, out)
                except Exception:  # never into the user's op: this cell is not exact
                    self.failed = True
            return out

        def _count(self, args: Any, kwargs: Any, out: Any) -> None:
            inputs: set[int] = set()
            for group in (args, kwargs.values() if kwargs else ()):
                for a in group:
                    for t in a if isinstance(a, (list, tuple)) else (a,):
                        if isinstance(t, Tensor) and t.layout == strided and t.device.type == "cpu":
                            storage = t.untyped_storage()
                            key = storage.data_ptr()
                            inputs.add(key)
                            if key and key not in self.live:  # from before: its free counts
                                self._follow(storage, key)
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if not isinstance(t, Tensor) or t.layout != strided or t.device.type != "cpu":
                    continue
                storage = t.untyped_storage()
                key = storage.data_ptr()
                if not key or key in self.live or key in inputs:
                    continue  # a view or an in-place result
                self.current += self._follow(storage, key)
                if self.current > self.peak:
                    self.peak = self.current

    return CellCounter


class ExactCounter:
    """Arms the op-by-op count for one cell at a time (main thread); never raises."""

    def __init__(self) -> None:
        self._mode: Any = None
        self._base = 0
        self._armed = False
        self._result: tuple[int, int] | None = None  # what the last ``end`` gave

    @property
    def armed(self) -> bool:
        return self._armed

    def begin(self) -> bool:
        """Push the counter for the cell now starting: False (nothing pushed) without torch,
        inside backward, or while an earlier cell's counter is still under a user's mode."""
        self._armed, self._result = False, None
        torch = sys.modules.get("torch")
        if torch is None:
            return False
        try:
            if torch._C._current_graph_task_id() != -1 or self._on_stack(torch):
                return False
            mode = self._mode
            if mode is None:
                cls = _CLASSES.get(id(torch))
                if cls is None:
                    cls = _CLASSES[id(torch)] = _counter_class(torch)
                mode = self._mode = cls()
                with mode:  # the first op under a Python mode imports and caches ~7 MiB
                    torch.ones(1).add(1)
            mode.failed = False
            self._base = mode.peak = mode.current
            mode.__enter__()
            mode.counting = self._armed = True
        except Exception:
            return False
        return True

    def end(self) -> tuple[int, int] | None:
        """Stop counting; ``(peak rise, net change)`` of the cell's torch CPU storages in
        bytes, or None when the count was not armed for the whole cell or broke off. Called
        again before the next ``begin`` (a reading taken twice), the same answer."""
        if not self._armed:
            return self._result
        mode = self._mode
        self._armed = mode.counting = False
        self._pop()
        if not mode.failed:
            self._result = (max(0, mode.peak - self._base), mode.current - self._base)
        return self._result

    def _on_stack(self, torch: Any) -> bool:
        """Our mode is still pushed (a user's mode was above it at the last cell's end): pop
        it if it is on top now, else say so."""
        if self._mode is None:
            return False
        self._pop()
        from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

        return any(m is self._mode for m in _get_current_dispatch_mode_stack())

    def _pop(self) -> None:
        """Pop our mode if it is the top of the dispatch stack (a mode the user pushed in
        the cell and left open stays above it: ours waits, counting nothing)."""
        try:
            from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

            stack = _get_current_dispatch_mode_stack()
            if stack and stack[-1] is self._mode:
                self._mode.__exit__(None, None, None)
        except Exception:
            pass


def armed_modes() -> int:
    """Dispatch modes of this module on the current thread's stack (0 or 1): the step watch
    and others that stand aside for a user's mode need not stand aside for this one."""
    torch = sys.modules.get("torch")
    cls = _CLASSES.get(id(torch)) if torch is not None else None
    if cls is None:
        return 0
    try:
        from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

        return sum(1 for m in _get_current_dispatch_mode_stack() if isinstance(m, cls))
    except Exception:
        return 0

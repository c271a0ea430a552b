"""Who holds memory: namespace variables, IPython's output cache, kept tracebacks, graphs.

Deduplication rule: holders are scanned in a fixed order (namespace variables in namespace
order, then the output cache, then kept tracebacks) and each storage ``(device, data_ptr)`` is
counted for the FIRST holder that reaches it. A later holder reports only the storages nobody
before it reached, so holders never count the same bytes twice and the listed bytes are what
``del``-ing that holder alone could free, at most. Holders below ``min_bytes`` are dropped.

Autograd graphs are walked through ``grad_fn.next_functions`` and each node's
``_raw_saved_*`` slots; ``SavedTensor.data`` is read, which never runs unpack hooks (no
recompute under checkpointing). A non-reentrant checkpointed region saves ``_Holder``s, not
tensors: what it keeps are its inputs, charged to the graph that reaches the region when the
activation tracker saw the region's frame (``checkpoint_frames``, see checkpoints.py). Other
saved tensors packed by foreign hooks into non-tensor objects are not seen.

The scan stops when the deadline passes and continues later where it stopped (see
holder_scan.py, which runs it and describes each holder).
"""

from __future__ import annotations

import sys
import time
import types
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from . import checkpoints
from ._torchutil import StorageKey, module_tensors, optimizer_state_tensors, storage_info
from .names import output_names
from .saved import Saved

_SKIP_TYPES = (
    types.ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    type,
    str,
    bytes,
    int,
    float,
    complex,
    bool,
    type(None),
)
_CONTAINERS = (list, tuple, dict, set, frozenset)


@dataclass
class ScanLimits:
    max_items: int = 2000  # elements visited per holder before the walk is capped
    max_depth: int = 3  # container nesting followed
    max_graph_nodes: int = 5000  # grad_fn nodes per scan
    min_bytes: int = 1 << 20  # holders below this are dropped


class OverBudget(Exception):
    pass


@dataclass
class _Tally:
    bytes: int = 0
    tensors: int = 0
    graphs: int = 0
    graph_bytes: int = 0
    saved: int = 0
    items: int = 0
    capped: bool = False
    names: list[str] = field(default_factory=list)


class HolderScanner:
    """One scan; holds temporary strong references only while it runs."""

    def __init__(
        self,
        deadline: float,
        limits: ScanLimits,
        param_keys: Optional[set[StorageKey]] = None,
        checkpoint_frames: Optional[list[Any]] = None,
    ) -> None:
        self._frames = checkpoint_frames or []
        self._holder_frames: Optional[dict[int, Any]] = None  # built at the first _Holder
        self._frames_done: set[int] = set()
        self.deadline = deadline
        self.limits = limits
        self.claimed: set[StorageKey] = set()
        self.param_keys = param_keys or set()
        self.nodes_seen: set[int] = set()
        self.ticks = 0
        self._saved_attrs: dict[type, tuple[str, ...]] = {}
        # what each holder added, so a holder cut short by the budget can be undone
        self._log: list[tuple[set[Any], Any]] = []

    def mark(self) -> int:
        return len(self._log)

    def rollback(self, mark: int) -> None:
        """Forget what was claimed/visited since ``mark`` (a holder the budget cut short)."""
        while len(self._log) > mark:
            where, key = self._log.pop()
            where.discard(key)

    def _note(self, where: set[Any], key: Any) -> None:
        where.add(key)
        self._log.append((where, key))

    # -- budget ------------------------------------------------------------------------

    def _tick(self) -> None:
        self.ticks += 1
        if self.ticks & 63 == 0 and time.perf_counter() > self.deadline:
            raise OverBudget

    # -- counting ----------------------------------------------------------------------

    def _claim(self, t: torch.Tensor, tally: _Tally, graph: bool = False) -> int:
        info = storage_info(t)
        if info is None or info[0] in self.claimed:
            return 0
        if graph and info[0] in self.param_keys:
            return 0  # a graph saves views of parameters; those belong to the model
        self._note(self.claimed, info[0])
        tally.bytes += info[1]
        return info[1]

    def _tensor(self, t: torch.Tensor, tally: _Tally) -> None:
        tally.tensors += 1
        self._claim(t, tally)
        if t.requires_grad and t.is_leaf:
            g = t.grad
            if g is not None:
                self._claim(g, tally)
        elif t.grad_fn is not None:
            before = tally.bytes
            saved = self._graph(t.grad_fn, tally)
            if saved:
                tally.graphs += 1
                tally.saved += saved
                tally.graph_bytes += tally.bytes - before

    def _graph(self, root: Any, tally: _Tally) -> int:
        """Claims storages saved by an autograd graph; returns how many saved tensors."""
        stack = [root]
        saved = 0
        while stack:
            node = stack.pop()
            if node is None or id(node) in self.nodes_seen:
                continue
            if len(self.nodes_seen) >= self.limits.max_graph_nodes:
                tally.capped = True
                break
            self._note(self.nodes_seen, id(node))
            self._tick()
            for name in self._attrs(node):
                try:
                    value = getattr(node, name)
                except Exception:  # graph already freed by backward
                    continue
                for packed, raw in _saved_payloads(value):
                    saved += 1
                    if isinstance(packed, torch.Tensor):
                        self._claim(packed, tally, graph=True)
                    else:
                        self._checkpoint_inputs(packed, tally, raw)
            try:
                stack.extend(fn for fn, _ in node.next_functions)
            except Exception:
                continue
        return saved

    def _checkpoint_inputs(self, holder: Any, tally: _Tally, raw: Any = None) -> None:
        """A checkpointed region's ``_Holder``: claim the inputs its frame keeps (the frame
        found through the slot's unpack hook, or among those the tracker saw)."""
        frame = checkpoints.frame_of(raw) if raw is not None else None
        if frame is None:
            if self._holder_frames is None:
                self._holder_frames = (
                    checkpoints.holder_frames(self._frames) if self._frames else {}
                )
            frame = self._holder_frames.get(id(holder))
        if frame is None or id(frame) in self._frames_done:
            return
        self._note(self._frames_done, id(frame))
        for t in checkpoints.frame_inputs(frame):
            self._claim(t, tally, graph=True)

    def _attrs(self, node: Any) -> tuple[str, ...]:
        cls = type(node)
        names = self._saved_attrs.get(cls)
        if names is None:
            names = tuple(a for a in dir(node) if a.startswith("_raw_saved_"))
            self._saved_attrs[cls] = names
        return names

    def walk(self, obj: Any, tally: _Tally, depth: int = 0) -> None:
        """Counts the storages an object keeps alive (capped, depth-limited)."""
        self._tick()
        tally.items += 1
        if tally.items > self.limits.max_items:
            tally.capped = True
            return
        if isinstance(obj, torch.Tensor):
            self._tensor(obj, tally)
        elif isinstance(obj, torch.nn.Module):
            for t in module_tensors(obj):
                self._tensor(t, tally)
        elif isinstance(obj, torch.optim.Optimizer):
            for t in optimizer_state_tensors(obj):
                self._claim(t, tally)
        elif isinstance(obj, _SKIP_TYPES):
            return
        elif depth >= self.limits.max_depth:
            if isinstance(obj, _CONTAINERS) and obj:
                tally.capped = True
        elif isinstance(obj, _CONTAINERS):
            self.walk_all(obj.values() if isinstance(obj, dict) else obj, tally, depth + 1)
        else:
            attrs = getattr(obj, "__dict__", None)
            if isinstance(attrs, dict) and depth == 0:
                self.walk_all(attrs.values(), tally, depth + 1)

    def walk_all(self, objs: Iterable[Any], tally: _Tally, depth: int) -> None:
        for item in list(objs) if not isinstance(objs, list) else objs:
            if tally.items > self.limits.max_items:
                tally.capped = True
                return
            self.walk(item, tally, depth)


def _saved_payloads(value: Any) -> Iterable[tuple[Any, Any]]:
    """The tensors (and checkpoint ``_Holder``s) a node's saved slot holds, each with the
    ``SavedTensor`` it came from (or None)."""
    items = value if isinstance(value, (list, tuple)) else (value,)
    for item in items:
        data = item
        raw = item if isinstance(item, torch._C._autograd.SavedTensor) else None
        if isinstance(item, torch._C._autograd.SavedTensor):
            try:
                data = item.data  # type: ignore[attr-defined]  # packed object, no unpack
            except Exception:
                continue
            if isinstance(data, Saved):  # packed by the activation tracker's hook
                data = data.tensor
        if isinstance(data, torch.Tensor) or checkpoints.is_holder(data):
            yield data, raw
        elif isinstance(data, (tuple, list)):
            yield from ((d, None) for d in data if isinstance(d, torch.Tensor))


def _output_cache_objects(namespace: dict[str, Any], shell: Any) -> list[Any]:
    """What IPython's output cache keeps: ``Out``, ``_12``... and ``_``/``__``/``___``."""
    objs: list[Any] = []
    out = namespace.get("Out")
    if isinstance(out, dict):
        objs.extend(out.values())
    for name in ("_", "__", "___", *output_names(namespace)):
        objs.append(namespace.get(name))
    if shell is not None:
        hook = getattr(shell, "displayhook", None)
        objs.extend(getattr(hook, attr, None) for attr in ("_", "__", "___"))
        last = getattr(shell, "last_execution_result", None)
        objs.append(getattr(last, "result", None))
    return objs


def _traceback_frames(shell: Any, namespace: dict[str, Any]) -> list[dict[str, Any]]:
    tbs: list[Any] = [getattr(sys, "last_traceback", None)]
    for attr in ("last_value", "last_exc"):
        tbs.append(getattr(getattr(sys, attr, None), "__traceback__", None))
    if shell is not None:
        tbs.append(getattr(getattr(shell, "InteractiveTB", None), "tb", None))
    frames: list[dict[str, Any]] = []
    seen: set[int] = set()
    for tb in tbs:
        while isinstance(tb, types.TracebackType):
            frame = tb.tb_frame
            if id(frame) not in seen:
                seen.add(id(frame))
                if frame.f_globals is not namespace or frame.f_code.co_name != "<module>":
                    frames.append(dict(frame.f_locals))
            tb = tb.tb_next
    return frames

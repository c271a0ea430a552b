"""The measured forward's own hooks: which module is running, and what autograd saves.

:class:`ForwardHooks` is the part of :class:`.activations.ActivationTracker` that runs
inside the user's forward while it is measured (activations.py says when): the global module
pre/post hooks keep the stack of running modules and each module's output shape, and the
saved-tensor pack hook counts each saved storage once, for the innermost running module. Each
callback runs the user's op or forward untouched and never raises into it.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import Any, Optional

import torch
from torch.utils._pytree import tree_leaves

from . import checkpoints, saved
from ._torchutil import StorageKey, device_id, module_tensors, storage_keys
from .ledger import OUTSIDE, SavedLedger


def _first_tensor_shape(output: Any) -> Optional[Sequence[int]]:
    """The output's shape as torch gives it (a ``torch.Size``: no list made inside the
    forward; the layer rows turn it into one), None when it has a symbolic size (a jagged
    nested tensor's, a traced one's: kept, it would keep its shape environment alive)."""
    if isinstance(output, torch.Tensor):
        return _plain(output.shape)
    first = output[0] if isinstance(output, (tuple, list)) and output else None
    if isinstance(first, torch.Tensor) and first.dim() > 0:
        return _plain(first.shape)
    # a ModelOutput, a dict, nested containers: the first tensor with a dimension (a
    # scalar loss first in a Hugging Face output has no batch)
    for leaf in tree_leaves(output):
        if isinstance(leaf, torch.Tensor) and leaf.dim() > 0:
            return _plain(leaf.shape)
    return None


def _plain(shape: torch.Size) -> Optional[torch.Size]:
    for size in shape:
        if type(size) is not int:
            return None
    return shape


class ForwardHooks:
    """The callbacks of a measured forward; the tracker holds the state they update."""

    OUTSIDE = OUTSIDE  # owner id used for tensors saved outside any module

    _ledger: SavedLedger
    _stack: list[int]
    _excluded: set[StorageKey]
    _excluded_roots: set[int]
    _thread: Optional[int]
    _counting: bool
    _region: set[int]
    checkpoint_frames: weakref.WeakSet[Any]

    def _pre_forward(self, module: torch.nn.Module, args: Any) -> None:
        # Global, in only while a forward is measured. Inside the user's forward: never raise.
        if torch.compiler.is_compiling():
            return
        try:
            if threading.get_ident() != self._thread:
                return
            if torch._C._current_graph_task_id() != -1:
                return  # a checkpointed region recomputed inside backward
            with torch._C.DisableTorchFunction():
                self._enter(module)
        except Exception:
            pass

    def _enter(self, module: torch.nn.Module, tree: Optional[list[torch.nn.Module]] = None) -> None:
        """``module``'s forward starts (``tree``: its modules, when the caller walked them)."""
        mid = id(module)
        if self._stack:
            self._ledger.parents[mid] = self._stack[-1]
        if mid not in self._excluded_roots:
            # First call of this module in the cell, at any depth: its parameters and
            # buffers are never activations (addmm saves weight.t(), a view of the weight).
            # A top-level call excludes the whole tree at once; nested ones their own
            # tensors (a module reached through a plain attribute, a closure or a dict
            # is not under its caller's tree).
            if self._stack:
                self._excluded_roots.add(mid)
                self._excluded |= storage_keys(module_tensors(module, recurse=False))
            else:
                # one walk of the tree: its modules are marked done, so their own first
                # calls below skip this (a measured forward's cost, paid per module)
                if tree is None:
                    tree = list(module.modules())
                self._excluded_roots.update(map(id, tree))
                self._excluded |= storage_keys(
                    t for mod in tree for t in module_tensors(mod, recurse=False)
                )
        stat = self._ledger.stat(mid, type(module).__name__)
        if checkpoints.in_region():
            # the outermost module of a region is its checkpointed block
            if not self._stack or self._stack[-1] not in self._region:
                stat.checkpointed = True
            self._region.add(mid)
        self._stack.append(mid)

    def _post_forward(self, module: torch.nn.Module, _args: Any, output: Any) -> None:
        if torch.compiler.is_compiling():
            return
        try:
            if threading.get_ident() != self._thread:
                return
            with torch._C.DisableTorchFunction():
                self._record_output(module, output)
        except Exception:
            pass

    def _record_output(self, module: torch.nn.Module, output: Any) -> None:
        mid = id(module)
        stack = self._stack
        if stack and stack[-1] == mid:
            stack.pop()
        elif mid in stack:
            del stack[stack.index(mid) :]
        stat = self._ledger.layers.get(mid)
        if stat is not None:
            stat.output_shape = _first_tensor_shape(output)

    def _pack(self, t: torch.Tensor) -> Any:
        with torch._C.DisableTorchFunction():  # unseen by tensor subclasses and modes
            packed = saved.pack(t)
            if self._counting:
                self._count(t, packed)
        return packed

    def _count(self, t: torch.Tensor, packed: Any) -> None:
        try:
            frame = checkpoints.frame_saving_inputs()
            if frame is not None:
                self.checkpoint_frames.add(frame)
            if t.is_leaf and t.requires_grad:
                return
            storage = t.untyped_storage()
            ptr = storage.data_ptr()
            if ptr == 0:
                return
            dev = "cpu" if t.is_cpu else device_id(t.device)  # is_cpu: no device object
            key = (dev, ptr)
            if key in self._excluded:
                return
            self._ledger.count(
                key,
                storage.nbytes() if not self._ledger.known(key) else 0,
                self._stack[-1] if self._stack else self.OUTSIDE,
                _dtype_name(t.dtype),
                packed,
            )
        except Exception:
            pass


_DTYPE_NAMES: dict[torch.dtype, str] = {}


def _dtype_name(dtype: torch.dtype) -> str:
    """``torch.bfloat16`` -> ``"bfloat16"`` (cached: called for every measured save)."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype).replace("torch.", "")
    return name

"""The measured forward's own hooks: which module is running, and what autograd saves.

:class:`ForwardHooks` is the part of :class:`.activations.ActivationTracker` that runs
inside the user's forward while it is measured (activations.py says when): the global module
pre/post hooks keep the stack of running modules and each module's output shape, and the
saved-tensor pack hook counts each saved storage once, for the innermost running module. Each
callback runs the user's op or forward untouched and never raises into it.
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections.abc import Sequence
from typing import Any, Optional

import torch
from torch.utils._pytree import tree_leaves

from . import checkpoints, saved
from ._torchutil import StorageKey, module_tree, own_storage_keys, storage_key
from .ledger import OUTSIDE, SavedLedger

# Called for every module call and every saved tensor of a measured forward: looked up once.
_is_compiling = torch.compiler.is_compiling
_graph_task_id = torch._C._current_graph_task_id
_top_hooks = torch._C._autograd._top_saved_tensors_default_hooks
_NoTorchFunction = torch._C.DisableTorchFunction
_unseen = saved.unseen
_get_ident = threading.get_ident
_getframe = sys._getframe


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

    _pushed_pack: Any  # the pack hook as pushed (what the saved-tensor hooks stack holds)

    def _pre_forward(self, module: torch.nn.Module, args: Any) -> None:
        # Global, in only while a forward is measured. Inside the user's forward: never raise.
        if _is_compiling():
            return
        try:
            if _get_ident() != self._thread:
                return
            if _graph_task_id() != -1:
                return  # a checkpointed region recomputed inside backward
            if id(module) in self._excluded_roots:
                self._push(module)  # its tensors are excluded: no tensor is touched
            else:
                with _NoTorchFunction():
                    self._enter(module)
        except Exception:
            pass

    def _enter(self, module: torch.nn.Module, tree: Optional[list[torch.nn.Module]] = None) -> None:
        """``module``'s forward starts (``tree``: its modules, when the caller walked them)."""
        mid = id(module)
        if mid not in self._excluded_roots:
            # First call of this module in the cell, at any depth: its parameters and
            # buffers are never activations (addmm saves weight.t(), a view of the weight).
            # A top-level call excludes the whole tree at once; nested ones their own
            # tensors (a module reached through a plain attribute, a closure or a dict
            # is not under its caller's tree).
            if self._stack:
                self._excluded_roots.add(mid)
                self._excluded |= own_storage_keys((module,))
            else:
                # one walk of the tree: its modules are marked done, so their own first
                # calls below skip this (a measured forward's cost, paid per module)
                if tree is None:
                    tree = module_tree(module)
                self._excluded_roots.update(map(id, tree))
                self._excluded |= own_storage_keys(tree)
        self._push(module)

    def _push(self, module: torch.nn.Module) -> None:
        """``module`` is the innermost running module now."""
        mid = id(module)
        stack = self._stack
        ledger = self._ledger
        if stack:
            ledger.parents[mid] = stack[-1]
        stat = ledger.layers.get(mid)
        if stat is None:
            stat = ledger.stat(mid, type(module).__name__)
        top = _top_hooks(False)
        if top is not None and top[0] is not self._pushed_pack and checkpoints.in_region(top):
            # the outermost module of a region is its checkpointed block
            if not stack or stack[-1] not in self._region:
                stat.checkpointed = True
            self._region.add(mid)
        stack.append(mid)

    def _post_forward(self, module: torch.nn.Module, _args: Any, output: Any) -> None:
        if _is_compiling():
            return
        try:
            if _get_ident() != self._thread:
                return
            with _NoTorchFunction():
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
        try:
            caller: Any = _getframe(1)
        except ValueError:  # a thread without a Python frame (torch.jit.fork's, autograd's)
            caller = None
        if _unseen(t):
            return self._packed(t, caller)  # a plain tensor, no mode: nothing to hide
        with _NoTorchFunction():  # unseen by tensor subclasses and modes
            return self._packed(t, caller)

    def _packed(self, t: torch.Tensor, caller: Any) -> Any:
        packed = saved.pack(t)
        if self._counting:
            try:  # noqa: SIM105 (no context manager made for each saved tensor)
                self._count(t, packed, caller)
            except Exception:
                pass
        return packed

    def _count(self, t: torch.Tensor, packed: Any, caller: Any) -> None:
        """Count ``t``'s storage for the innermost running module (``caller``: the frame
        whose op saved it, None on a thread without one)."""
        if caller is not None and caller.f_code.co_name in checkpoints.SAVING_FRAMES:
            frame = checkpoints.frame_saving_inputs(caller)
            if frame is not None:
                self.checkpoint_frames.add(frame)
        if t.requires_grad and t.is_leaf:
            return
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr == 0:
            return
        key = storage_key(t, ptr)
        if key in self._excluded:
            return
        stack = self._stack
        self._ledger.count(key, stack[-1] if stack else OUTSIDE, packed, storage, t.dtype)

"""Live, per-module accounting of the tensors autograd saves for backward.

How it works
------------
* Default saved-tensor hooks (the machinery under ``torch.autograd.graph.saved_tensors_hooks``)
  are pushed ONCE on the installing thread and stay pushed across cells. They are
  **thread-local**: only forwards run on that thread (the kernel's main thread) are seen;
  work in other threads (a training thread, an ipykernel subshell) is not counted.
* The pack hook returns ``t.detach()`` (never ``t`` itself: returning the original tensor
  creates a grad_fn <-> tensor cycle that leaks every forward). It counts the tensor's storage
  (``(device, untyped_storage().data_ptr())``) once, however many ops save it, and puts a
  weakref with a callback on the detached tensor; when autograd frees the saved tensor the
  callback decrements the count and the bytes leave the live total.
* Storages of parameters/buffers of the modules being run, and leaves that require grad, are
  excluded (``addmm`` saves ``weight.t()``, a view of the parameter).
* Global module forward pre/post hooks keep a stack of running modules (main thread only); a
  saved storage is attributed to the innermost running module, or to no module (``None``)
  when saved outside any module. The post hook is registered with ``always_call=True`` so an
  exception inside a forward unwinds the stack; :meth:`ActivationTracker.reset_stack` is a
  backstop called at every cell end.

No strong reference to a user tensor or module is kept: only integers, strings and weakrefs.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from ._torchutil import StorageKey, device_id, module_tensors, storage_keys


@dataclass
class LayerStat:
    """Live saved-activation figures of one module (keyed by ``id(module)``)."""

    type_name: str
    saved_bytes: int = 0
    peak_saved_bytes: int = 0
    output_shape: Optional[list[int]] = None


@dataclass
class _Saved:
    count: int
    nbytes: int
    owner: int  # id() of the innermost module at first save, 0 outside any module


@dataclass
class _State:
    live: dict[StorageKey, _Saved] = field(default_factory=dict)
    refs: dict[int, tuple[Any, StorageKey]] = field(default_factory=dict)
    layers: dict[int, LayerStat] = field(default_factory=dict)
    parents: dict[int, int] = field(default_factory=dict)
    by_device: dict[str, int] = field(default_factory=dict)


def _first_tensor_shape(output: Any) -> Optional[list[int]]:
    if isinstance(output, torch.Tensor):
        return [int(s) for s in output.shape]
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
        return [int(s) for s in output[0].shape]
    return None


class ActivationTracker:
    """Counts live saved-for-backward bytes per module. Install on the kernel main thread."""

    OUTSIDE = 0  # owner id used for tensors saved outside any module

    def __init__(self) -> None:
        self._state = _State()
        self._stack: list[int] = []
        self._excluded: set[StorageKey] = set()
        self._excluded_roots: set[int] = set()
        self._thread: Optional[int] = None
        self._handles: list[Any] = []
        self._hooks_pushed = False
        # Reentrant: a GC run inside the pack hook can fire _release on this thread.
        self._lock = threading.RLock()

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def installed(self) -> bool:
        return self._hooks_pushed

    def install(self) -> None:
        """Push the saved-tensor hooks and register the module hooks (idempotent)."""
        if self._hooks_pushed:
            return
        from torch.nn.modules import module as nn_module

        torch._C._autograd._push_saved_tensors_default_hooks(self._pack, _unpack)
        self._hooks_pushed = True
        self._thread = threading.get_ident()
        self._handles = [
            nn_module.register_module_forward_pre_hook(self._pre_forward),
            nn_module.register_module_forward_hook(self._post_forward, always_call=True),
        ]

    def uninstall(self) -> None:
        """Remove the module hooks and pop our saved-tensor hooks if they are on top.

        Must run on the installing thread. If the user pushed hooks of their own above ours
        and left them there, ours cannot be popped without popping theirs: they are then
        neutralised (they stop counting and just detach).
        """
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self._stack.clear()
        if not self._hooks_pushed:
            return
        self._hooks_pushed = False
        top = torch._C._autograd._top_saved_tensors_default_hooks(False)
        if top is not None and top[0] == self._pack:
            torch._C._autograd._pop_saved_tensors_default_hooks()

    # -- cell boundaries -------------------------------------------------------------------

    def reset_stack(self) -> None:
        """Forget the running-module stack (called at cell end) and the per-cell caches."""
        self._stack.clear()
        self._excluded_roots.clear()

    def exclude(self, keys: set[StorageKey]) -> None:
        """Storages never counted as activations (parameters, buffers of known models)."""
        self._excluded |= keys

    def set_excluded(self, keys: set[StorageKey]) -> None:
        self._excluded = set(keys)
        self._excluded_roots.clear()

    def prune(self, keep: set[int]) -> None:
        """Drop figures of modules not in ``keep`` that hold nothing (dead or unwatched)."""
        state = self._state
        with self._lock:
            busy = {saved.owner for saved in state.live.values()}
            needed = set(keep) | busy
            for mid in list(busy):
                while mid in state.parents and state.parents[mid] not in needed:
                    mid = state.parents[mid]
                    needed.add(mid)
            for mid in [m for m in state.layers if m not in needed]:
                del state.layers[mid]
            for mid in [m for m in state.parents if m not in needed]:
                del state.parents[mid]

    def reset_peaks(self) -> None:
        for stat in self._state.layers.values():
            stat.peak_saved_bytes = stat.saved_bytes

    # -- readings --------------------------------------------------------------------------

    def layer_stats(self) -> dict[int, LayerStat]:
        return self._state.layers

    def parent_of(self, module_id: int) -> int:
        return self._state.parents.get(module_id, self.OUTSIDE)

    def bytes_by_device(self) -> dict[str, int]:
        return dict(self._state.by_device)

    def total_bytes(self) -> int:
        return sum(self._state.by_device.values())

    def live_storages(self) -> dict[StorageKey, int]:
        """Live saved storages and their byte sizes."""
        with self._lock:
            return {key: saved.nbytes for key, saved in self._state.live.items()}

    # -- hooks -----------------------------------------------------------------------------

    def _pre_forward(self, module: torch.nn.Module, _args: Any) -> None:
        # Runs inside the user's forward: it must never raise.
        try:
            if threading.get_ident() != self._thread:
                return
            mid = id(module)
            state = self._state
            if self._stack:
                state.parents[mid] = self._stack[-1]
            if mid not in self._excluded_roots:
                # First call of this module in the cell, at any depth: its parameters and
                # buffers are never activations (addmm saves weight.t(), a view of the weight).
                # A top-level call excludes the whole tree at once; nested ones their own
                # tensors (a module reached through a plain attribute, a closure or a dict
                # is not under its caller's tree).
                self._excluded_roots.add(mid)
                tensors = module_tensors(module, recurse=not self._stack)
                self._excluded |= storage_keys(tensors)
            if mid not in state.layers:
                state.layers[mid] = LayerStat(type(module).__name__)
            self._stack.append(mid)
        except Exception:
            pass

    def _post_forward(self, module: torch.nn.Module, _args: Any, output: Any) -> None:
        try:
            if threading.get_ident() != self._thread:
                return
            mid = id(module)
            stack = self._stack
            if stack and stack[-1] == mid:
                stack.pop()
            elif mid in stack:
                del stack[stack.index(mid) :]
            stat = self._state.layers.get(mid)
            if stat is not None:
                stat.output_shape = _first_tensor_shape(output)
        except Exception:
            pass

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        detached = t.detach()
        if not self._hooks_pushed:
            return detached
        try:
            if t.is_leaf and t.requires_grad:
                return detached
            storage = t.untyped_storage()
            ptr = storage.data_ptr()
            if ptr == 0:
                return detached
            device = t.device
            dev = "cpu" if device.type == "cpu" else device_id(device)
            key = (dev, ptr)
            if key in self._excluded:
                return detached
            state = self._state
            with self._lock:
                saved = state.live.get(key)
                if saved is None:
                    nbytes = storage.nbytes()
                    owner = self._stack[-1] if self._stack else self.OUTSIDE
                    state.live[key] = _Saved(1, nbytes, owner)
                    state.by_device[dev] = state.by_device.get(dev, 0) + nbytes
                    self._add(owner, nbytes)
                else:
                    saved.count += 1
                ref = weakref.ref(detached, self._release)
                state.refs[id(ref)] = (ref, key)
        except Exception:
            pass
        return detached

    def _add(self, owner: int, nbytes: int) -> None:
        stat = self._state.layers.get(owner)
        if stat is None:
            stat = self._state.layers[owner] = LayerStat("")
        stat.saved_bytes += nbytes
        if stat.saved_bytes > stat.peak_saved_bytes:
            stat.peak_saved_bytes = stat.saved_bytes

    def _release(self, ref: Any) -> None:
        state = self._state
        with self._lock:
            entry = state.refs.pop(id(ref), None)
            if entry is None:
                return
            key = entry[1]
            saved = state.live.get(key)
            if saved is None:
                return
            saved.count -= 1
            if saved.count > 0:
                return
            del state.live[key]
            state.by_device[key[0]] = state.by_device.get(key[0], 0) - saved.nbytes
            stat = state.layers.get(saved.owner)
            if stat is not None:
                stat.saved_bytes -= saved.nbytes


def _unpack(t: torch.Tensor) -> torch.Tensor:
    return t

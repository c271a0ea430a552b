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

Measured steps (what keeps a training loop fast)
------------------------------------------------
Python hooks on every saved tensor and global module hooks (which put every module call on
torch's slow path) cost 10-40% of a small model's step. So a forward is *measured* only when
it tells something new: the first forward of each model ("root" module: called with no
module running) in a cell, and again when the root's inputs change shape or dtype, the
autocast policy changes or the grad/train mode changes (see signature.py), or when the
tensors the previous measured call saved are still alive at the next call (its graph was
kept: no backward ran, as in ``losses.append(loss)``), so kept graphs are always counted.
The hooks are armed at every cell start (:meth:`ActivationTracker.new_cell`); when a root is
called again unchanged they are REMOVED (module hooks unregistered, saved-tensor hooks
popped) until the next cell or the next change, which a per-root forward pre-hook (one
Python call per step) watches for. The saved-tensor hooks stay armed from a measured forward
until the next root call, so the loss computed outside the model is counted with its step.
Live figures are therefore exact for the measured forwards; tensors saved by unmeasured
forwards are not counted. :attr:`measured` says which forward was measured last.

No strong reference to a user tensor or module is kept: only integers, strings and weakrefs.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from . import checkpoints
from ._torchutil import StorageKey, device_id, module_tensors, storage_keys
from .signature import Signature, reason_to_measure, signature


@dataclass
class LayerStat:
    """Live saved-activation figures of one module (keyed by ``id(module)``)."""

    type_name: str
    saved_bytes: int = 0
    peak_saved_bytes: int = 0
    output_shape: Optional[list[int]] = None
    by_dtype: dict[str, int] = field(default_factory=dict)  # live saved bytes per dtype
    #: ``by_dtype`` when ``peak_saved_bytes`` was reached (the estimator scales by it)
    peak_by_dtype: dict[str, int] = field(default_factory=dict)
    checkpointed: bool = False  # its forward starts a checkpointed region


@dataclass
class _Saved:
    count: int
    nbytes: int
    owner: int  # id() of the innermost module at first save, 0 outside any module
    dtype: str  # of the first tensor saved on this storage ("float32", "bfloat16"...)
    epoch: int  # the measured forward (count) that saved it first


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
        self._handles: list[Any] = []  # the global module hooks, while armed
        self._enabled = False
        self._pushed = False  # our saved-tensor hooks are on the thread's stack
        self._counting = False  # ... and count (False: they only detach)
        # per root module (id): its pre-hook handle and the signature last measured
        self._root_hooks: dict[int, tuple[Any, Any]] = {}
        self._signatures: dict[int, Signature] = {}
        self._measured_in_cell: set[int] = set()
        self._cell: tuple[Optional[str], Optional[int]] = (None, None)
        self._forwards = 0  # root forwards in this cell
        self._epoch = 0  # measured forwards so far
        self._epoch_live = 0  # live storages first saved since the last measured forward
        #: The last measured forward: ``{cell_id, execution_count, forward_index, reason}``.
        self.measured: Optional[dict[str, Any]] = None
        #: checkpoint frames seen saving their inputs (what their regions keep alive)
        self.checkpoint_frames: weakref.WeakSet[Any] = weakref.WeakSet()
        self._region: set[int] = set()  # modules running inside a checkpointed region
        # Reentrant: a GC run inside the pack hook can fire _release on this thread.
        self._lock = threading.RLock()

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def installed(self) -> bool:
        return self._enabled

    @property
    def armed(self) -> bool:
        """The hooks are in (the next or current forward is measured)."""
        return bool(self._handles)

    def install(self) -> None:
        """Start tracking on this thread and arm the hooks (idempotent)."""
        if self._enabled:
            return
        self._enabled = True
        self._thread = threading.get_ident()
        self._arm()

    def uninstall(self) -> None:
        """Remove every hook; pop our saved-tensor hooks if they are on top.

        Must run on the installing thread. If the user pushed hooks of their own above ours
        and left them there, ours cannot be popped without popping theirs: they are then
        neutralised (they stop counting and just detach).
        """
        self._enabled = False
        self._disarm()
        for _ref, handle in self._root_hooks.values():
            handle.remove()
        self._root_hooks.clear()
        self._signatures.clear()
        self._stack.clear()

    def new_cell(
        self, cell_id: Optional[str] = None, execution_count: Optional[int] = None
    ) -> None:
        """A cell starts: its first forward of each model is measured (hooks armed)."""
        self._cell = (cell_id, execution_count)
        self._forwards = 0
        self._measured_in_cell.clear()
        self.reset_stack()  # per-cell exclusions: weights swapped in since are re-read
        if self._enabled and threading.get_ident() == self._thread:
            self._arm()

    def _arm(self) -> None:
        if not self._handles:
            from torch.nn.modules import module as nn_module

            self._handles = [
                nn_module.register_module_forward_pre_hook(self._pre_forward),
                nn_module.register_module_forward_hook(self._post_forward, always_call=True),
            ]
        if not self._pushed:
            if torch._C._autograd._top_saved_tensors_default_hooks(False) is not None:
                return  # inside the user's saved_tensors_hooks (save_on_cpu...): theirs rule
            torch._C._autograd._push_saved_tensors_default_hooks(self._pack, _unpack)
            self._pushed = True
        self._counting = True

    def _disarm(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self._counting = False
        if self._pushed:
            top = torch._C._autograd._top_saved_tensors_default_hooks(False)
            if top is not None and top[0] == self._pack:
                torch._C._autograd._pop_saved_tensors_default_hooks()
                self._pushed = False

    # -- measured forwards -------------------------------------------------------------------

    def _root_pre(self, module: torch.nn.Module, args: Any, kwargs: Any) -> None:
        """Forward pre-hook of every root module seen: decides whether this forward is
        measured. Runs inside the user's forward: it must never raise."""
        try:
            if threading.get_ident() != self._thread or not self._enabled:
                return
            if torch._C._current_graph_task_id() != -1:
                return  # a checkpointed region recomputed inside backward
            stack = self._stack
            if len(stack) > 1 or (stack and stack[-1] != id(module)):
                return  # called from inside another module: not a root call
            self._decide(module, signature(module, args, kwargs), entered=bool(stack))
        except Exception:
            pass

    def _decide(self, module: torch.nn.Module, sig: Signature, entered: bool) -> None:
        mid = id(module)
        self._forwards += 1
        old = self._signatures.get(mid) if mid in self._measured_in_cell else None
        if old is not None and old[1] is None and old[0] == sig[0] and old[2:] == sig[2:]:
            # first seen through the global hook, which gets no kwargs: complete it
            old = self._signatures[mid] = sig
        reason = reason_to_measure(old, sig)
        if reason is None and self._epoch_live > 0:
            reason = "graph_kept"  # the last measured call's graph lives on (no backward)
        if reason is None:
            if self._handles or self._counting:
                self._disarm()
            if entered:  # the global pre-hook put it on the stack; its post-hook is gone
                self._stack.clear()
            return
        self._signatures[mid] = sig
        self._measured_in_cell.add(mid)
        self._epoch += 1
        self._epoch_live = 0
        if reason != "first":
            # its weights may be new storages (model.double(), .cuda()) and the old ones'
            # addresses reused by activations: exclusions start over from this model's
            # current tensors (other modules add theirs again when they are entered)
            self._excluded = storage_keys(module_tensors(module))
            self._excluded_roots = {mid}
        if sig[3] or self.measured is None or self.measured.get("cell") != self._cell:
            self.measured = {
                "cell": self._cell,
                "cell_id": self._cell[0],
                "execution_count": self._cell[1],
                "forward_index": self._forwards,
                "reason": reason,
            }
        if not entered:
            self._arm()
            self._enter(module)

    @property
    def measured_this_cell(self) -> bool:
        """A model call of the current (or just ended) cell was measured."""
        return bool(self._measured_in_cell)

    def renumber_cell(
        self, old: tuple[Optional[str], Optional[int]], new: tuple[Optional[str], Optional[int]]
    ) -> None:
        """The running cell's execution count was ``old`` and is really ``new``."""
        if self._cell == old:
            self._cell = new
        measured = self.measured
        if measured is not None and measured.get("cell") == old:
            measured["cell"], measured["execution_count"] = new, new[1]

    def measured_info(self) -> Optional[dict[str, Any]]:
        """The protocol's ``activations_measured`` (without the internal key)."""
        if self.measured is None:
            return None
        return {k: v for k, v in self.measured.items() if k != "cell"}

    # -- cell boundaries -------------------------------------------------------------------

    def reset_stack(self) -> None:
        """Forget the running-module stack (called at cell end) and the per-cell caches."""
        self._stack.clear()
        self._excluded_roots.clear()
        self._region.clear()

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
            stat.peak_by_dtype = dict(stat.by_dtype)

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

    def _pre_forward(self, module: torch.nn.Module, args: Any) -> None:
        # Runs inside the user's forward: it must never raise.
        try:
            if threading.get_ident() != self._thread:
                return
            if torch._C._current_graph_task_id() != -1:
                return  # a checkpointed region recomputed inside backward
            self._enter(module)
            if len(self._stack) > 1:
                return
            known = self._root_hooks.get(id(module))
            if known is not None and known[0]() is module:
                return  # a known root decides in its own pre-hook, which runs next
            # a root never seen: watch it from now on (its pre-hook gets kwargs too, as
            # Hugging Face models take them), and measure this forward
            if known is not None:
                known[1].remove()
            handle = module.register_forward_pre_hook(self._root_pre, with_kwargs=True)
            self._root_hooks[id(module)] = (weakref.ref(module), handle)
            sig = signature(module, args, None)
            self._decide(module, (sig[0], None, *sig[2:]), entered=True)
        except Exception:
            pass

    def _enter(self, module: torch.nn.Module) -> None:
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
            if self._stack:
                self._excluded_roots.add(mid)
                self._excluded |= storage_keys(module_tensors(module, recurse=False))
            else:
                # one walk of the tree: its modules are marked done, so their own first
                # calls below skip this (a measured forward's cost, paid per module)
                tree = list(module.modules())
                self._excluded_roots.update(map(id, tree))
                self._excluded |= storage_keys(
                    t for mod in tree for t in module_tensors(mod, recurse=False)
                )
        stat = state.layers.get(mid)
        if stat is None:
            stat = state.layers[mid] = LayerStat(type(module).__name__)
        if checkpoints.in_region():
            # the outermost module of a region is its checkpointed block
            if not self._stack or self._stack[-1] not in self._region:
                stat.checkpointed = True
            self._region.add(mid)
        self._stack.append(mid)

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
        if not self._counting:
            return detached
        try:
            frame = checkpoints.frame_saving_inputs()
            if frame is not None:
                self.checkpoint_frames.add(frame)
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
                    dtype = _dtype_name(t.dtype)
                    state.live[key] = _Saved(1, nbytes, owner, dtype, self._epoch)
                    self._epoch_live += 1
                    state.by_device[dev] = state.by_device.get(dev, 0) + nbytes
                    self._add(owner, nbytes, dtype)
                else:
                    saved.count += 1
                ref = weakref.ref(detached, self._release)
                state.refs[id(ref)] = (ref, key)
        except Exception:
            pass
        return detached

    def _add(self, owner: int, nbytes: int, dtype: str) -> None:
        stat = self._state.layers.get(owner)
        if stat is None:
            stat = self._state.layers[owner] = LayerStat("")
        stat.saved_bytes += nbytes
        stat.by_dtype[dtype] = stat.by_dtype.get(dtype, 0) + nbytes
        if stat.saved_bytes > stat.peak_saved_bytes:
            stat.peak_saved_bytes = stat.saved_bytes
            stat.peak_by_dtype = dict(stat.by_dtype)

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
            if saved.epoch == self._epoch:
                self._epoch_live -= 1
            state.by_device[key[0]] = state.by_device.get(key[0], 0) - saved.nbytes
            stat = state.layers.get(saved.owner)
            if stat is not None:
                stat.saved_bytes -= saved.nbytes
                left = stat.by_dtype.get(saved.dtype, 0) - saved.nbytes
                if left:
                    stat.by_dtype[saved.dtype] = left
                else:
                    stat.by_dtype.pop(saved.dtype, None)


def _unpack(t: torch.Tensor) -> torch.Tensor:
    return t


_DTYPE_NAMES: dict[torch.dtype, str] = {}


def _dtype_name(dtype: torch.dtype) -> str:
    """``torch.bfloat16`` -> ``"bfloat16"`` (cached: called for every measured save)."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype).replace("torch.", "")
    return name

"""Live, per-module accounting of the tensors autograd saves for backward.

How it works
------------
* A forward is measured only from inside a model's own forward: :class:`.roots.RootWatch`
  keeps a forward pre-hook and a forward hook on each model (the outermost module), and
  nothing else is in between measured forwards: no saved-tensor hooks (``torch.func``
  refuses to run while any are in, and they change autograd's checks), no global module
  hooks (``torch.compile`` traces and warns about them).
* A measured forward pushes saved-tensor hooks and global module forward pre/post hooks in
  the model's pre-hook and removes them in its forward hook (``always_call=True``: also when
  the forward raises). They are thread-local and main-thread only; a forward is never
  measured inside a ``torch.func`` transform, a region Dynamo traces, under saved-tensor
  hooks of the user's own (``save_on_cpu``...), while saved-tensor hooks are disabled, or
  when the model's own code calls a ``torch.func`` transform that refuses saved-tensor hooks
  (transforms.py): it is then skipped, and :attr:`ActivationTracker.unmeasured` says why.
* The pack hook hands autograd a :class:`.saved.Saved` (the tensor as autograd keeps it and
  its version; unpack raises autograd's own error if it was modified in place). It counts the
  tensor's storage (``(device, untyped_storage().data_ptr())``) once, however many ops save
  it; the ``Saved``'s finalizer tells the ledger when autograd frees it, and the bytes leave
  the live total.
* Storages of parameters/buffers of the modules being run, and leaves that require grad, are
  excluded (``addmm`` saves ``weight.t()``, a view of the parameter).
* The global module hooks keep a stack of running modules; a saved storage is attributed to
  the innermost running module.

Measured forwards (what keeps a training loop fast)
---------------------------------------------------
A forward is *measured* only when it tells something new: the first forward of each model in
a cell, and again when the model's inputs change shape or dtype, the autocast policy changes
or the grad/train mode changes (see signature.py), or when the tensors the previous measured
call saved are still alive at the next call (its graph was kept: no backward ran, as in
``losses.append(loss)``), so kept graphs are always counted. Other forwards cost one Python
call (the model's pre-hook). Tensors saved outside the model's forward (the loss computed
from its output) are not counted. :attr:`measured` says which forward was measured last.

No strong reference to a user tensor or module is kept: only integers, strings and weakrefs.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Iterable
from typing import Any, Optional

import torch

from .. import trials
from ..compiled import is_compiled
from . import saved
from ._torchutil import StorageKey, module_tree, own_storage_keys
from .forward_hooks import ForwardHooks
from .ledger import LayerStat, SavedLedger
from .roots import RootWatch
from .signature import Signature, reason_to_measure, signature
from .transforms import calls_refusing_transform


def fingerprint(ids: Iterable[int]) -> tuple[int, int]:
    """How many ids and a hash of them in order: whether a model's modules are still the
    ones they were, compared without keeping the ids (~0.3 ms at 10,000 modules)."""
    ids = tuple(ids)
    return len(ids), hash(ids)


class ActivationTracker(ForwardHooks):
    """Counts live saved-for-backward bytes per module. Install on the kernel main thread.
    Decides which forwards are measured and arms the hooks for them (forward_hooks.py)."""

    def __init__(self) -> None:
        self._ledger = SavedLedger()
        self._stack: list[int] = []
        self._excluded: set[StorageKey] = set()
        self._excluded_roots: set[int] = set()
        self._thread: Optional[int] = None
        self._handles: list[Any] = []  # the global module hooks, during a measured forward
        self._enabled = False
        self._pushed = False  # our saved-tensor hooks are on the thread's stack
        self._pushed_pack: Any = None  # the pack hook as pushed there
        self._counting = False  # ... and count (False: they only keep what autograd keeps)
        self._active: Optional[int] = None  # id() of the model whose forward is measured
        self._roots = RootWatch(self._root_pre, self._root_post)
        self._signatures: dict[int, Signature] = {}
        #: id(model) -> (epoch, :func:`fingerprint` of its modules) at its last measured forward
        self._trees: dict[int, tuple[int, tuple[int, int]]] = {}
        self._measured_in_cell: set[int] = set()
        self._cell: tuple[Optional[str], Optional[int]] = (None, None)
        self._forwards = 0  # root forwards in this cell
        self._cell_epoch = 0  # the ledger's epoch when this cell started
        #: The last measured forward: ``{cell_id, execution_count, forward_index, reason}``.
        self.measured: Optional[dict[str, Any]] = None
        #: Why the last forward of a model that was to be measured was not, in this cell
        #: ("inside a torch.func transform"...); None when none was skipped.
        self.unmeasured: Optional[str] = None
        self._said: set[str] = set()  # notes given (each once)
        self._new_notes: list[str] = []
        #: checkpoint frames seen saving their inputs (what their regions keep alive)
        self.checkpoint_frames: weakref.WeakSet[Any] = weakref.WeakSet()
        self._region: set[int] = set()  # modules running inside a checkpointed region

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def installed(self) -> bool:
        return self._enabled

    @property
    def armed(self) -> bool:
        """A forward is being measured (the hooks are in)."""
        return bool(self._handles)

    def install(self) -> None:
        """Start watching models on this thread (idempotent). Nothing is armed until a
        model's forward is measured."""
        if self._enabled:
            return
        self._enabled = True
        self._thread = threading.get_ident()
        self._roots.install()
        global _current
        _current = weakref.ref(self)  # one tracker measures: the last installed

    def uninstall(self) -> None:
        """Remove every hook. Must run on the installing thread."""
        self._enabled = False
        self._end()
        self._roots.uninstall()
        self._signatures.clear()
        self._trees.clear()
        self._stack.clear()

    def adopt(self, values: Any) -> None:
        """Watch the models among ``values`` (the namespace's) not watched yet: models built
        before the bridge was loaded, and models without children."""
        with contextlib.suppress(Exception):
            self._roots.adopt(values)

    def follow(self, module: torch.nn.Module, pre: Any, post: Any) -> Any:
        """See :meth:`.roots.RootWatch.follow` (the step watch's hooks on its model)."""
        return self._roots.follow(module, pre, post)

    def notes(self) -> list[str]:
        """What was not measured, and why, each said once: forwards skipped since the last
        call (inside a torch.func transform...) and models seen compiled."""
        for module in list(self._roots.compiled):
            self._note(
                f"{type(module).__name__} is compiled (torch.compile): its forwards are not "
                "measured, since Dynamo would trace the hooks; the device counters still show "
                "its memory"
            )
        new, self._new_notes = self._new_notes, []
        return new

    def _note(self, text: str) -> None:
        if text not in self._said and len(self._said) < 64:
            self._said.add(text)
            self._new_notes.append(text)

    def new_cell(
        self, cell_id: Optional[str] = None, execution_count: Optional[int] = None
    ) -> None:
        """A cell starts: its first forward of each model is measured."""
        self._cell = (cell_id, execution_count)
        self._forwards = 0
        self._cell_epoch = self._ledger.epoch
        self._measured_in_cell.clear()
        self.unmeasured = None
        self.reset_stack()  # per-cell exclusions: weights swapped in since are re-read
        if self._signatures:
            alive = self._roots.prune()
            for mid in [m for m in self._signatures if m not in alive]:
                del self._signatures[mid]
                self._trees.pop(mid, None)

    def _begin(self, module: torch.nn.Module, tree: list[torch.nn.Module]) -> bool:
        """Arm the hooks for ``module``'s forward; False when they cannot be armed."""
        if torch._C._autograd._top_saved_tensors_default_hooks(False) is not None:
            return False  # the user's saved_tensors_hooks (save_on_cpu...) rule
        from torch.nn.modules import module as nn_module

        self._pushed_pack = self._pack  # the object the stack holds (checked by identity)
        torch._C._autograd._push_saved_tensors_default_hooks(self._pushed_pack, saved.unpack)
        self._pushed = True
        self._counting = True
        self._handles = [
            nn_module.register_module_forward_pre_hook(self._pre_forward),
            nn_module.register_module_forward_hook(self._post_forward, always_call=True),
        ]
        self._active = id(module)
        self._enter(module, tree)
        return True

    def _end(self) -> None:
        """Disarm: the measured forward returned (or raised), or the cell ended."""
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self._counting = False
        self._active = None
        self._stack.clear()
        if self._pushed:
            autograd = torch._C._autograd
            top = autograd._top_saved_tensors_default_hooks(False)
            if top is not None and top[0] == self._pack:
                autograd._pop_saved_tensors_default_hooks()
                self._pushed = False
            elif top is not None:
                # the user's pair pushed above ours during the forward (a root forward
                # hook of theirs that offloads activations): ours come out from under it
                autograd._pop_saved_tensors_default_hooks()
                below = autograd._top_saved_tensors_default_hooks(False)
                if below is not None and below[0] == self._pack:
                    autograd._pop_saved_tensors_default_hooks()
                    self._pushed = False
                autograd._push_saved_tensors_default_hooks(*top)
            # else: hooks the user pushed inside the forward and left above ours; ours stay
            # below them, counting nothing, and are popped at the next boundary that can

    # -- measured forwards -------------------------------------------------------------------

    def _root_pre(self, module: torch.nn.Module, args: Any, kwargs: Any) -> None:
        """Forward pre-hook of every model: decides whether this forward is measured. Runs
        inside the user's forward: it must never raise."""
        if torch.compiler.is_compiling():
            return  # traced by Dynamo: this hook is nothing in the compiled graph
        try:
            if self._active is not None or not self._enabled or _current() is not self:
                return  # inside a measured forward (not a root call), or not the tracker
            if threading.get_ident() != self._thread:
                return
            if self._pushed:
                self._end()  # left behind hooks of the user's above ours: try again
            if torch._C._current_graph_task_id() != -1:
                return  # a checkpointed region recomputed inside backward
            with torch._C.DisableTorchFunction():  # unseen by tensor subclasses and modes
                self._decide(module, signature(module, args, kwargs))
        except Exception:
            pass

    def _root_post(self, module: torch.nn.Module, _args: Any, output: Any) -> None:
        if torch.compiler.is_compiling():
            return
        try:
            if self._active != id(module):
                return
            with torch._C.DisableTorchFunction():
                self._record_output(module, output)
            self._end()
        except Exception:
            pass

    def _decide(self, module: torch.nn.Module, sig: Signature) -> None:
        mid = id(module)
        self._forwards += 1
        old = self._signatures.get(mid) if mid in self._measured_in_cell else None
        reason = reason_to_measure(old, sig)
        if reason is None and self._ledger.epoch_live > 0:
            reason = "graph_kept"  # the last measured call's graph lives on (no backward)
        if reason is None:
            return
        why_not = _why_unmeasurable()
        tree: list[torch.nn.Module] = []
        if why_not is None:
            tree = module_tree(module)  # walked once: here and by _enter's exclusions
            if any(map(is_compiled, tree)):
                # Dynamo would trace the hooks in, and compile again when they come out
                why_not = "with a compiled submodule (torch.compile)"
            elif calls_refusing_transform(tree):
                # torch.func.grad/vjp/jacrev/hessian refuse to start under saved-tensor hooks
                why_not = "that calls torch.func.grad/vjp/jacrev/hessian"
        if why_not is not None:
            self.unmeasured = why_not
            self._note(f"a forward of {type(module).__name__} {why_not} is not measured")
            return
        if reason != "first":
            # its weights may be new storages (model.double(), .cuda()) and the old ones'
            # addresses reused by activations: exclusions start over from this model's
            # current tensors (other modules add theirs again when they are entered)
            self._excluded = own_storage_keys(tree)
            self._excluded_roots = {mid}
        if not self._begin(module, tree):
            self.unmeasured = "inside saved_tensors_hooks of your own (save_on_cpu...)"
            self._note(f"a forward of {type(module).__name__} {self.unmeasured} is not measured")
            return
        self._signatures[mid] = sig
        self._measured_in_cell.add(mid)
        self._ledger.new_epoch()
        self._trees[mid] = (self._ledger.epoch, fingerprint(map(id, tree)))
        self.unmeasured = None
        if sig[3] or self.measured is None or self.measured.get("cell") != self._cell:
            self.measured = {
                "cell": self._cell,
                "cell_id": self._cell[0],
                "execution_count": self._cell[1],
                "forward_index": self._forwards,
                "reason": reason,
            }

    @property
    def epoch(self) -> int:
        """How many forwards were measured so far (changes with every measured forward)."""
        return self._ledger.epoch

    @property
    def measured_this_cell(self) -> bool:
        """A model call of the current (or just ended) cell was measured."""
        return bool(self._measured_in_cell)

    def kept_forwards(self) -> int:
        """How many of this cell's measured forwards still hold saved tensors: 1 for a
        result kept in a variable, one per forward for a loop that keeps every graph."""
        if not self._measured_in_cell:
            return 0
        return self._ledger.live_epochs(self._cell_epoch)

    def tree_print(self, module: torch.nn.Module, since: int) -> Optional[tuple[int, int]]:
        """:func:`fingerprint` of ``module``'s modules from the walk its last measured
        forward made anyway, if that forward came after epoch ``since`` (else None)."""
        entry = self._trees.get(id(module))
        return entry[1] if entry is not None and entry[0] > since else None

    @property
    def registrations(self) -> int:
        """How many modules and parameters were assigned to modules since install (a
        submodule swapped in, a model built): changes the moment a model's tree may have."""
        return self._roots.registrations

    def measured_roots(self) -> list[torch.nn.Module]:
        """The models whose forward was measured in the current (or just ended) cell."""
        found = (self._roots.module(mid) for mid in self._measured_in_cell)
        return [m for m in found if m is not None]

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
        """Forget the running-module stack (called at cell end) and the per-cell caches; a
        measurement still open (its forward never returned here) is closed."""
        if self._active is not None or self._pushed:
            self._end()
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
        self._ledger.prune(keep)

    def reset_peaks(self) -> None:
        self._ledger.reset_peaks()

    # -- readings --------------------------------------------------------------------------

    def layer_stats(self) -> dict[int, LayerStat]:
        return self._ledger.layers

    def parent_of(self, module_id: int) -> int:
        return self._ledger.parents.get(module_id, self.OUTSIDE)

    def bytes_by_device(self) -> dict[str, int]:
        return self._ledger.bytes_by_device()

    def total_bytes(self) -> int:
        return self._ledger.total_bytes()

    def live_storages(self) -> dict[StorageKey, int]:
        """Live saved storages and their byte sizes."""
        return self._ledger.live_storages()


#: The tracker installed last (a second engine in one process, as in tests, replaces the
#: first: two trackers measuring one forward would each see the other's hooks).
def _none() -> None:
    return None


_current: Any = _none


def _why_unmeasurable() -> Optional[str]:
    """Why a forward starting now cannot be measured without changing it (None: it can)."""
    if trials.running():
        return "inside a vramscope.find_batch_size trial"
    if torch._C._functorch.peek_interpreter_stack() is not None:
        return "inside a torch.func transform"
    enabled = getattr(torch._C._autograd, "_saved_tensors_hooks_is_enabled", None)
    if enabled is not None and not enabled():
        return "where saved-tensor hooks are disabled"
    return None

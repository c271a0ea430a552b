"""InsightEngine: the kernel-side entry point for model insight (issue 4).

Produces the protocol's ``Insight`` dict (docs/protocol.md): per-layer saved activations of
the watched model, a per-device breakdown and the list of memory holders. Every public method
catches its own failures and returns a valid (possibly empty) Insight whose ``skipped`` says
why; the output is JSON-serialisable. Hooks are installed on the calling thread (the kernel's
main thread): saved-tensor hooks are thread-local.
"""

from __future__ import annotations

import contextlib
import time
import weakref
from typing import Any, Optional, Union

import torch

from ..messages.insight import empty_insight
from ._torchutil import (
    StorageKey,
    module_tensors,
    optimizer_params,
    storage_cache,
    storage_keys,
)
from .activations import ActivationTracker, fingerprint
from .breakdown import TotalFn, claim_models, finish_breakdown, measured_totals
from .choice import choose, model_infos, namespace_models
from .holder_scan import ScanState, scan_holders
from .holders import ScanLimits
from .layers import fill, module_ids, skeleton
from .names import model_candidates, user_items
from .reuse import (
    Kept,
    Probe,
    grad_probe,
    holders_key,
    memory_moved,
    peaks_reset,
    totals,
    world_key,
)
from .shown import Shown, tensor_ids

SNAPSHOT_BUDGET_MS = 2000.0
#: A holders scan continued in this many slices (~2 s at the default 20 ms) gives up.
MAX_SCAN_SLICES = 100


class InsightEngine:
    """Model insight over an IPython shell's namespace (or a plain dict in tests).

    Args:
        shell: the IPython shell; its ``user_ns`` is scanned. May be None.
        namespace: the namespace to scan when ``shell`` is None.
        total_fn: ``device id -> the device reading or None``; None falls back to the
            engine's own measurement (glibc mallinfo2 for cpu, the allocator for CUDA).
        min_holder_bytes: holders smaller than this are dropped.
        max_layers: at most this many module rows (named_modules order).
    """

    def __init__(
        self,
        shell: Any = None,
        *,
        namespace: Optional[dict[str, Any]] = None,
        total_fn: Optional[TotalFn] = None,
        min_holder_bytes: int = 1 << 20,
        max_layers: int = 1000,
    ) -> None:
        self._shell = shell
        self._namespace = namespace
        self._total_fn = total_fn
        self._limits = ScanLimits(min_bytes=min_holder_bytes)
        self._max_layers = max_layers
        self._tracker = ActivationTracker()
        self._watched_name: Optional[str] = None
        self._watched_ref: Optional[weakref.ReferenceType[torch.nn.Module]] = None
        self.last_insight: dict[str, Any] = dict(empty_insight())
        self._scan: Optional[ScanState] = None  # an after-cell holders scan to continue
        #: the parts of the last after-cell insight that walked the models (reuse.py)
        self._kept: Optional[Kept] = None
        self._probes: dict[int, Probe] = {}  # per optimizer id: reuse.grad_probe
        self._peaks_reset: Optional[tuple[Any, int]] = None  # tracker (epoch, bytes) then
        self._settle = False  # the models were walked or scanned: read the totals after
        self._walked = False  # ... walked: the drift gate's reading too (reuse.memory_moved)
        self._shown: Optional[Shown] = None  # what the last after-cell insight showed

    # -- public API --------------------------------------------------------------------

    def install(self) -> None:
        """Installs the activation hooks once (idempotent); never raises."""
        with contextlib.suppress(Exception):
            self._tracker.install()
            self._tracker.adopt(model_candidates(self._ns()))  # models built before

    def uninstall(self) -> None:
        with contextlib.suppress(Exception):
            self._tracker.uninstall()

    def begin_cell(
        self, cell_id: Optional[str] = None, execution_count: Optional[int] = None
    ) -> None:
        """A cell starts: its first forward of each model is measured; never raises."""
        with contextlib.suppress(Exception):
            self._tracker.new_cell(cell_id, execution_count)
            self._tracker.adopt(model_candidates(self._ns()))

    @property
    def tracker(self) -> ActivationTracker:
        return self._tracker

    def watch(self, model_or_name: Union[str, torch.nn.Module, None]) -> None:
        """Chooses the model whose layers are reported (a namespace name or the module)."""
        try:
            if model_or_name is None or isinstance(model_or_name, str):
                self._watched_name = model_or_name
                self._watched_ref = None
            elif isinstance(model_or_name, torch.nn.Module):
                self._watched_ref = weakref.ref(model_or_name)
                self._watched_name = self._name_of(model_or_name)
        except Exception:
            pass

    def after_cell(self, budget_ms: float = 20.0) -> dict[str, Any]:
        """The Insight after a cell; resets the stack and the per-layer peaks. A holders
        scan over ``budget_ms`` is marked ``partial``: :meth:`continue_scan` goes on."""
        try:
            insight = self._insight(None, budget_ms, resumable=True, after_cell=True)
            self._settle_totals()
            self._tracker.reset_stack()
            self._reset_peaks()
            self._shown_now(insight)
            return insight
        except Exception as exc:
            self._scan = self._kept = self._shown = None
            return dict(empty_insight(f"insight failed: {type(exc).__name__}: {exc}"))

    def unchanged(self) -> bool:
        """Nothing the last after-cell insight shows changed since (``shown.Shown.holds``):
        the same models, optimizers (and their gradients) and names too, and its holders scan
        complete. Such a cell needs no insight. Never raises (False: compute it)."""
        try:
            return self._unchanged()
        except Exception:
            return False

    def _unchanged(self) -> bool:
        kept, shown, tracker = self._kept, self._shown, self._tracker
        if kept is None or shown is None or self._scan is not None or kept.holders is None:
            return False
        if kept.small or tracker.registrations != kept.registrations:
            return False  # small models are walked after every cell; a module was assigned
        ns = self._ns()
        if not shown.holds(tracker, kept.layers, ns, self._total_fn):
            return False
        items = user_items(ns, self._hidden())
        modules, optimizers = namespace_models(items)
        return (
            world_key(modules, optimizers, self._choice(), self._probes) == kept.key
            and holders_key(items, ns, self._shell, tracker) == kept.holders_key
        )

    def settle_shown(self) -> None:
        """The last insight has been sent: what ``unchanged`` compares with, read again."""
        if self._shown is not None:
            self._shown.settle(self._total_fn)

    def _shown_now(self, insight: dict[str, Any]) -> None:
        """``insight`` is the last one shown."""
        self.last_insight = insight
        tracker = self._tracker
        key = (tracker.epoch, tracker.total_bytes())
        tensors = tensor_ids(self._ns())
        self._shown = Shown(key, totals(insight["breakdown"]), insight["layers"], tensors)

    def continue_scan(self, budget_ms: float = 20.0) -> Optional[dict[str, Any]]:
        """The Insight with the holders scan continued where it stopped (None: nothing to
        continue); ``partial`` again while it is still not complete."""
        if self._scan is None:
            return None
        try:
            insight = self._insight(None, budget_ms, resumable=True)
            self._settle_totals()
            self._shown_now(insight)
            return insight
        except Exception as exc:
            self._scan = self._kept = self._shown = None
            return dict(empty_insight(f"insight failed: {type(exc).__name__}: {exc}"))

    @property
    def scan_pending(self) -> bool:
        """An after-cell holders scan stopped at its budget and can continue."""
        return self._scan is not None

    @property
    def watched(self) -> Optional[str]:
        """The namespace name of the watched model (None: the largest model is reported)."""
        return self._watched_name

    def snapshot(self, model: Optional[str] = None) -> dict[str, Any]:
        """An Insight on demand (generous budget); ``model`` overrides the watched model
        for this call only (``watch`` makes a choice stick)."""
        try:
            return self._insight(model, SNAPSHOT_BUDGET_MS)
        except Exception as exc:
            return dict(empty_insight(f"insight failed: {type(exc).__name__}: {exc}"))

    # -- internals ---------------------------------------------------------------------

    def _ns(self) -> dict[str, Any]:
        if self._shell is not None:
            ns = getattr(self._shell, "user_ns", None)
            if isinstance(ns, dict):
                return ns
        return self._namespace if self._namespace is not None else {}

    def _hidden(self) -> Any:
        return getattr(self._shell, "user_ns_hidden", {}) if self._shell is not None else {}

    def _name_of(self, obj: object) -> Optional[str]:
        for name, value in user_items(self._ns(), self._hidden()):
            if value is obj:
                return name
        return None

    def _insight(
        self,
        model_override: Optional[str],
        budget_ms: float,
        resumable: bool = False,
        after_cell: bool = False,
    ) -> dict[str, Any]:
        with storage_cache():
            return self._insight_cached(model_override, budget_ms, resumable, after_cell)

    def _insight_cached(
        self, model_override: Optional[str], budget_ms: float, resumable: bool, after_cell: bool
    ) -> dict[str, Any]:
        """An insight; ``resumable``: an after-cell one (its holders scan may stop at the
        budget and go on later), ``after_cell``: a cell ended (else a scan continues). Both
        reuse the kept parts while nothing they depend on changed (reuse.py)."""
        start = time.perf_counter()
        ns = self._ns()
        items = user_items(ns, self._hidden())
        modules, optimizers = namespace_models(items)
        live = self._tracker.live_storages()
        kept = None
        hkey: tuple[Any, ...] = ()
        if resumable:
            key = world_key(modules, optimizers, self._choice(), self._probes)
            hkey = holders_key(items, ns, self._shell, self._tracker)
            kept = self._reusable(key, after_cell)
        breakdown = None
        if kept is not None:
            breakdown = finish_breakdown(kept.claims, live, self._total_fn)
            now = totals(breakdown) if after_cell else None
            if now is not None and memory_moved(now, kept):
                kept = None
            elif not self._refill(kept):
                kept = None  # the reported model's modules changed: walk it again
            elif now is not None:
                kept.checked = now
        if kept is None:
            if after_cell:
                self._scan = None  # a holders scan goes on only over unchanged models
            if resumable:  # where the next cells look for gradients (one pass, with the walk)
                self._probes = {id(o): grad_probe(o) for o in optimizers}
                key = world_key(modules, optimizers, self._choice(), self._probes)
            kept = self._compute(modules, optimizers, model_override, key if resumable else ())
            breakdown = finish_breakdown(kept.claims, live, self._total_fn)
            kept.totals = kept.walked = totals(breakdown)
            self._settle = self._settle or resumable
            self._walked = self._walked or resumable
        assert breakdown is not None
        if resumable:
            if kept.holders_key != hkey:  # names rebound, graphs kept: the holders again
                if after_cell:
                    self._scan = None
                kept.holders, kept.holders_key = None, hkey
            self._kept = kept

        if resumable and self._scan is None and kept.holders is not None:
            holders, stopped = kept.holders, None  # the scan over these models completed
        else:
            self._settle = self._settle or resumable
            if resumable and self._scan is not None:  # a holder too large for one slice
                budget_ms *= 2 ** min(self._scan.stalled, 10)
            holders, stopped = scan_holders(
                ns,
                self._shell,
                start + budget_ms / 1000.0,
                self._limits,
                kept.excluded,
                items=items,
                checkpoint_frames=list(self._tracker.checkpoint_frames),
                state=self._scan if resumable else None,
            )
        skipped = None
        if resumable:
            self._scan = stopped
            if stopped is None:
                kept.holders = holders
        if stopped is not None and (not resumable or stopped.slices >= MAX_SCAN_SLICES):
            self._scan = None
            skipped = (
                f"holders scan over its time budget: stopped after {stopped.done} of "
                f"{stopped.total} holders (partial results); budget {budget_ms:g} ms"
                + (f" x {stopped.slices} slices" if stopped.slices > 1 else "")
            )
        insight: dict[str, Any] = {
            "model": kept.name,
            "models": kept.models,
            "layers": kept.layers,
            "breakdown": breakdown,
            "holders": holders,
            "scan_ms": round((time.perf_counter() - start) * 1000.0, 3),
            "skipped": skipped,
        }
        measured = self._tracker.measured_info()
        if measured is not None:
            insight["activations_measured"] = measured
        if stopped is not None:
            insight["partial"] = True
        return insight

    def _choice(self) -> tuple[Any, ...]:
        watched = self._watched_ref() if self._watched_ref is not None else None
        return self._watched_name, id(watched) if watched is not None else None

    def _reusable(self, key: tuple[Any, ...], after_cell: bool) -> Optional[Kept]:
        """The kept parts, if nothing they depend on changed (the memory check follows)."""
        kept = self._kept
        if kept is None or kept.key != key:
            return None
        if after_cell and kept.small:
            return None  # walking small models costs less than deciding not to
        if kept.model is not None and kept.model() is None:
            return None
        ran = self._ran()
        if ran and ran != kept.ran:
            return None  # another model ran: it may be the one to report
        return kept

    def _ran(self) -> tuple[int, ...]:
        return tuple(sorted(id(m) for m in self._tracker.measured_roots()))

    def _refill(self, kept: Kept) -> bool:
        """The kept rows with the tracker's figures now (they change with every measured
        forward); False when the reported model's modules are no longer those of the rows."""
        tracker = self._tracker
        now = (tracker.epoch, tracker.total_bytes())
        model = kept.model() if kept.model is not None else None
        if model is not None and tracker.registrations != kept.registrations:
            # a module or parameter was assigned somewhere since the rows were checked: walk
            # the model's tree (a swap after the cell's forward, or with no forward, included)
            if fingerprint(module_ids(model)) != kept.modules_print:
                return False
            kept.registrations = tracker.registrations
        elif model is not None and kept.filled != now:
            # as a measured forward since walked it (a `del model[i]` before it)
            seen = tracker.tree_print(model, since=kept.filled[0] if kept.filled else -1)
            if seen is not None and seen != kept.modules_print:
                return False
        if kept.filled == now:
            return True
        kept.layers = fill(tracker, kept.bones)
        kept.filled = now
        return True

    def _compute(
        self,
        modules: list[tuple[str, torch.nn.Module]],
        optimizers: list[torch.optim.Optimizer],
        model_override: Optional[str],
        key: tuple[Any, ...],
    ) -> Kept:
        """The parts of an insight that walk the models."""
        watched = self._watched_ref() if self._watched_ref is not None else None
        ran = self._tracker.measured_roots()
        name, model = choose(modules, model_override, watched, self._watched_name, ran)
        all_modules = [m for _, m in modules]
        if model is not None and not any(m is model for m in all_modules):
            all_modules.append(model)
        excluded: set[StorageKey] = set()
        for m in all_modules:
            excluded |= storage_keys(module_tensors(m))
        for opt in optimizers:
            excluded |= storage_keys(optimizer_params(opt))
        self._tracker.set_excluded(excluded)
        models = model_infos(modules, name, model)
        bones = skeleton(model, self._max_layers)
        layers = fill(self._tracker, bones)
        claims = claim_models(all_modules, optimizers)
        ref = weakref.ref(model) if model is not None else None
        kept = Kept(key, name, ref, models, layers, claims, excluded, claims.tensors, bones)
        kept.modules_print = fingerprint(module_ids(model)) if model is not None else (0, 0)
        kept.registrations = self._tracker.registrations
        # the models measured in this cell, else those the choice saw last (a cell that
        # ran none leaves the choice as it was)
        previous = self._kept.ran if self._kept is not None else ()
        kept.ran = self._ran() or previous
        kept.filled = (self._tracker.epoch, self._tracker.total_bytes())
        return kept

    def _settle_totals(self) -> None:
        """After a walk or a holders scan slice, once its temporaries are gone (the storage
        cache alone is ~15 MB at 10,000 modules): the totals the next cells are compared
        with (reuse.GATES)."""
        if self._settle and self._kept is not None:
            self._kept.totals = measured_totals(list(self._kept.totals), self._total_fn)
            if self._walked:
                self._kept.walked = self._kept.totals
        self._settle = self._walked = False

    def _reset_peaks(self) -> None:
        """The per-layer peaks start again from the live figures (skipped when no forward
        was measured and nothing was freed since the last time: they are equal already)."""
        tracker = self._tracker
        now = (getattr(tracker, "epoch", None), tracker.total_bytes())
        if now[0] is None or now != self._peaks_reset:
            tracker.reset_peaks()
            if self._kept is not None:  # the rows the next cell shows, unless it runs a model
                self._kept.layers = peaks_reset(self._kept.layers)
        self._peaks_reset = now

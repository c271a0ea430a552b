"""What the after-cell insight keeps from one cell to the next, and when it may (issue 19).

The parts of an insight that walk the models (which model is reported and the picker's
list, the layer rows, the parameters', gradients' and optimizer state's claims, the storages
excluded from activations, the holders) cost in proportion to the models in the namespace:
~3 ms after every cell at 1,000 modules, ~30 ms at 10,000. They are kept (:class:`Kept`:
strings, integers, storage keys and a weakref: no user object) and reused after a cell when
nothing they depend on can have changed, which :func:`world_key` and :func:`memory_moved`
tell without walking a model:

- the models' parts (the reported model and the picker's list, the claims, the excluded
  storages, the rows' walk): the namespace binds the same modules and optimizers to the same
  names, each optimizer has state for as many parameters and the parameters probed for
  gradients (three per group among those that require one) have or lack one as before
  (:func:`_grads`), the
  reported model was not changed (``watch``), no other model ran than the one the choice
  saw, and the reported model's modules are the same ones (their fingerprint as its last
  measured forward walked them, or :func:`.layers.module_ids` for a model never measured);
- the layer rows' figures are filled in again from the tracker whenever it measured a
  forward or its live saved bytes changed (cheap: no walk);
- the holders: besides, the namespace binds the same objects to the same names (values that
  cannot hold a tensor, such as numbers and strings, left out), IPython's output cache and
  the kept traceback are the same objects, and the tracker's live saved bytes are the same
  (a list that keeps graphs grows them);
- no device's measured total moved past its gate since the last after-cell insight that
  used the parts (:data:`GATES`: on CPU 1 MiB, the smallest holder listed; an accelerator's
  allocator: not at all), nor drifted past :data:`DRIFT_GATES` since they were computed:
  what changes a model's storages without a forward (``model.half()``, ``zero_grad()``, an
  optimizer's first step, ``del``) allocates or frees their bytes at once. The totals
  compared with are read after the walk or holders scan slice, once its own temporaries are
  freed. On CPU, such a change of less than 1 MiB shows at the next walk (a module or
  optimizer bound to another name, an optimizer's first step, or once the total has drifted
  16 MiB: IPython's history alone drifts it ~10 KB a cell, which with a 1 MiB bound since
  the walk had a 1,000-module model walked again every ~100 trivial cells, ~60 ms each).

Each device's measured total, the live activations, the namespace's unclaimed tensors and
the runtime baseline are read again after every cell (they are cheap). Models so small that
the walk costs less than the check (fewer than :data:`SMALL_TENSORS` tensors in all) are
walked after every cell, as before.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from ._torchutil import StorageKey
from .holders import _SKIP_TYPES

OTHER = "<other>"  # the layer row of saved bytes outside the reported model (engine.OTHER)
#: below this many module and optimizer tensors in all, the parts are computed every time
SMALL_TENSORS = 128
#: how far a device's measured total may move from its reading when the parts were computed
#: and the parts still be reused. CPU (glibc's in-use bytes): 1 MiB, the smallest holder
#: listed; between two trivial cells it moves by up to ~0.2 MB (the bridge's own messages,
#: IPython's history) and drifts by ~10 KB a cell. An accelerator's allocator counts tensors
#: only: not at all.
GATES = {"cpu": 1 << 20}
#: how far a device's total may drift from its reading when the parts were computed, in
#: steps each within :data:`GATES`, before they are computed again
DRIFT_GATES = {"cpu": 16 << 20}


@dataclass
class Kept:
    """The parts of the last insight that walked the models."""

    key: tuple[Any, ...]
    name: Optional[str]
    model: Optional[weakref.ReferenceType[Any]]
    models: list[Any]
    layers: list[dict[str, Any]]
    claims: Any  # breakdown._Claims
    excluded: set[StorageKey]
    tensors: int  # module and optimizer tensors the claims looked at
    bones: tuple[list[dict[str, Any]], list[int]] = ([], [])  # layers.skeleton
    #: the reported model's modules (``activations.fingerprint`` of ``layers.module_ids``)
    modules_print: tuple[int, int] = (0, 0)
    #: the tracker's ``registrations`` when ``modules_print`` was last checked
    registrations: int = -1
    ran: tuple[int, ...] = ()  # the models measured in the cell the choice was made after
    totals: dict[str, int] = field(default_factory=dict)  # measured when computed
    #: measured by the last after-cell insight that used the parts (empty: ``totals``)
    checked: dict[str, int] = field(default_factory=dict)
    #: measured when the models were walked (``totals`` is read again after scans too)
    walked: dict[str, int] = field(default_factory=dict)
    #: the tracker's (epoch, live saved bytes) when the rows were filled
    filled: tuple[Any, ...] = ()
    holders: Optional[list[dict[str, Any]]] = None  # once the holders scan completed
    holders_key: tuple[Any, ...] = ()  # what they depend on (holders_key)

    @property
    def small(self) -> bool:
        return self.tensors < SMALL_TENSORS


def world_key(
    modules: Iterable[tuple[str, Any]],
    optimizers: Iterable[Any],
    choice: tuple[Any, ...],
    probes: Mapping[int, Probe],
) -> tuple[Any, ...]:
    """What the models' parts depend on, read without walking a model (see the module doc);
    ``probes``: each optimizer's :func:`grad_probe` (by id), from the last walk."""
    names = tuple((n, id(v)) for n, v in modules)
    states = tuple((id(o), len(o.state), _grads(o, probes.get(id(o)))) for o in optimizers)
    return names, states, choice


def holders_key(
    items: Iterable[tuple[str, Any]], namespace: Mapping[str, Any], shell: Any, tracker: Any
) -> tuple[Any, ...]:
    """What the holders scan depends on besides the models (see the module doc)."""
    names = tuple((n, id(v)) for n, v in items if not isinstance(v, _SKIP_TYPES))
    out = namespace.get("Out")
    cache = (
        id(namespace.get("_")),
        id(namespace.get("__")),
        id(namespace.get("___")),
        len(out) if isinstance(out, dict) else -1,
    )
    tb = getattr(getattr(shell, "InteractiveTB", None), "tb", None)
    failed = (id(getattr(sys, "last_traceback", None)), id(tb))
    return names, cache, failed, tracker.total_bytes()


Probe = tuple[tuple[int, ...], ...]  # per parameter group, where to look for gradients


def grad_probe(optimizer: Any) -> Probe:
    """Where :func:`_grads` looks: per parameter group, the first, middle and last of the
    parameters that require a gradient (frozen ones never get one: a LoRA model's base
    weights, under an optimizer given all of ``model.parameters()``). One pass over the
    parameters, made when the models are walked anyway."""
    try:
        probe = []
        for group in optimizer.param_groups:
            live = [i for i, p in enumerate(group["params"]) if p.requires_grad]
            probe.append(tuple(sorted({live[0], live[len(live) // 2], live[-1]})) if live else ())
        return tuple(probe)
    except Exception:
        return ()


def _grads(optimizer: Any, probe: Optional[Probe]) -> tuple[Any, ...]:
    """Whether the probed parameters (:func:`grad_probe`) have a gradient: O(groups), not
    O(parameters) (counting them all took ~7 ms a cell with a 10,000-module model).
    Gradients come and go together: a backward gives them, and ``zero_grad()`` takes them
    (``set_to_none``); a change that leaves the probed ones as they were moves memory
    (:func:`memory_moved`) or shows at the next walk. An optimizer not probed yet (none
    walked, or a group added since) reads as such: not the world the kept parts saw."""
    try:
        groups = optimizer.param_groups
        if probe is None or len(probe) != len(groups):
            return ("unprobed",)
        return tuple(
            tuple(group["params"][i].grad is not None for i in where)
            for group, where in zip(groups, probe)
        )
    except Exception:  # a parameter gone from a group: not the world the parts saw
        return ("unreadable",)


def memory_moved(now: Mapping[str, int], kept: Kept) -> bool:
    """A device's total moved past its gate since the last after-cell insight used the kept
    parts, or drifted past its drift gate since they were computed, or a device came or
    went."""
    checked, walked = kept.checked or kept.totals, kept.walked or kept.totals
    return _moved(now, checked, GATES) or _moved(now, walked, DRIFT_GATES)


def _moved(now: Mapping[str, int], then: Mapping[str, int], gates: Mapping[str, int]) -> bool:
    if set(now) != set(then):
        return True
    return any(abs(total - then[dev]) > gates.get(dev, 0) for dev, total in now.items())


def peaks_reset(layers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The layer rows as they read once the tracker's peaks are reset to the live figures
    (``ActivationTracker.reset_peaks``, after every cell): each peak is the live figure,
    and the ``<other>`` row is left out once nothing it sums is live (see
    ``InsightEngine._layers``, which makes them)."""
    rows: list[dict[str, Any]] = []
    for layer in layers:
        saved = layer["saved_bytes"]
        if layer["path"] == OTHER and layer["type"] == "" and not saved:
            continue
        row = dict(layer, peak_saved_bytes=saved)
        row.pop("peak_saved_by_dtype", None)
        if saved and layer.get("saved_by_dtype"):
            row["peak_saved_by_dtype"] = dict(layer["saved_by_dtype"])
        rows.append(row)
    return rows


def totals(breakdown: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    """Each device's measured total in a breakdown."""
    return {dev: int(entry["total_bytes"]) for dev, entry in breakdown.items()}

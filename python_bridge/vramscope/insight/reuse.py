"""What the after-cell insight keeps from one cell to the next, and when it may (issue 19).

The parts of an insight that walk the models (which model is reported and the picker's
list, the layer rows, the parameters', gradients' and optimizer state's claims, the storages
excluded from activations, the holders) cost in proportion to the models in the namespace:
~3 ms after every cell at 1,000 modules, ~30 ms at 10,000. They are kept (:class:`Kept`:
strings, integers, storage keys and a weakref: no user object) and reused after a cell when
nothing they depend on can have changed, which :func:`world_key` and :func:`memory_moved`
tell without walking a model:

- the namespace binds the same objects to the same names (values that cannot hold a tensor,
  such as numbers and strings, left out), IPython's output cache and the kept traceback are
  the same objects, each optimizer has state for as many parameters, and the reported model
  was not changed (``watch``);
- the activation tracker measured no forward since (its epoch) and its live saved bytes are
  the same: a cell that ran a watched model is measured, so its figures are new;
- no device's measured total moved past its gate since the parts were computed (:data:`GATES`:
  on CPU 1 MiB, the smallest holder listed; an accelerator's allocator: not at all): what
  changes a model's storages without a forward (``model.half()``, ``zero_grad()``, an
  optimizer's first step, ``del``) allocates or frees their bytes. The totals compared with
  are read after the walk or holders scan slice, once its own temporaries are freed. On CPU,
  such a change of less than 1 MiB shows at the next walk (the next forward of a model, a
  name bound to another object, or once the total has drifted 1 MiB).

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
    totals: dict[str, int] = field(default_factory=dict)  # measured when computed
    holders: Optional[list[dict[str, Any]]] = None  # once the holders scan completed

    @property
    def small(self) -> bool:
        return self.tensors < SMALL_TENSORS


def world_key(
    items: Iterable[tuple[str, Any]],
    optimizers: Iterable[Any],
    namespace: Mapping[str, Any],
    shell: Any,
    tracker: Any,
    choice: tuple[Any, ...],
) -> tuple[Any, ...]:
    """What the kept parts depend on, read without walking a model (see the module doc)."""
    names = tuple((n, id(v)) for n, v in items if not isinstance(v, _SKIP_TYPES))
    states = tuple((id(o), len(o.state)) for o in optimizers)
    out = namespace.get("Out")
    cache = (
        id(namespace.get("_")),
        id(namespace.get("__")),
        id(namespace.get("___")),
        len(out) if isinstance(out, dict) else -1,
    )
    tb = getattr(getattr(shell, "InteractiveTB", None), "tb", None)
    failed = (id(getattr(sys, "last_traceback", None)), id(tb))
    epoch = getattr(tracker, "epoch", None)
    measured = (object() if epoch is None else epoch, tracker.total_bytes())
    return names, states, cache, failed, measured, choice


def memory_moved(now: Mapping[str, int], computed: Mapping[str, int]) -> bool:
    """A device's total moved past its gate since the kept parts were computed, or a device
    came or went."""
    if set(now) != set(computed):
        return True
    return any(abs(total - computed[dev]) > GATES.get(dev, 0) for dev, total in now.items())


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

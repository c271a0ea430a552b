"""The reported model's layer rows: one walk for what its modules are, then the tracker's
figures filled in as often as they change (issue 19: a cell that ran the model costs the
filling, not the walk).

:func:`skeleton` walks the model once (``named_modules`` order, at most ``max_layers`` rows):
each row's path, type and own parameter and gradient bytes, and the module ids the rows stand
for. :func:`fill` makes the protocol's rows from a skeleton and the tracker's live figures;
saved bytes of modules outside the rows go to their nearest listed ancestor, else to the
``<other>`` row. :func:`module_ids` tells, without touching a tensor, whether the model's
modules are still the ones a skeleton was made from (a submodule swapped in place, as
``peft``'s ``inject_adapter_in_model`` does, makes it stale). Only strings, integers and ids
are kept: no module or tensor.
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from ._torchutil import StorageKey, storage_info
from .activations import ActivationTracker, LayerStat
from .reuse import OTHER

Skeleton = tuple[list[dict[str, Any]], list[int]]  # static row parts, the modules' ids


def module_ids(model: torch.nn.Module) -> tuple[int, ...]:
    """The ids of the model's modules in ``named_modules`` order, each once: ~0.2 ms at 1,000
    modules (``_modules`` read directly, no generators)."""
    out: list[int] = []
    seen: set[int] = set()
    stack: list[Any] = [model]
    while stack:
        mod = stack.pop()
        if mod is None or id(mod) in seen:
            continue
        seen.add(id(mod))
        out.append(id(mod))
        stack.extend(reversed(mod._modules.values()))
    return tuple(out)


def skeleton(model: Optional[torch.nn.Module], max_layers: int) -> Skeleton:
    """The rows' static parts (path, type, own parameter and gradient bytes) and ids."""
    base: list[dict[str, Any]] = []
    mids: list[int] = []
    if model is None:
        return base, mids
    seen: set[StorageKey] = set()
    for path, mod in model.named_modules():
        if len(base) >= max_layers:
            break
        own, grads = own_param_bytes(mod, seen)
        base.append(
            {"path": path, "type": type(mod).__name__, "param_bytes": own, "grad_bytes": grads}
        )
        mids.append(id(mod))
    return base, mids


def fill(tracker: ActivationTracker, bones: Skeleton) -> list[dict[str, Any]]:
    """The protocol's layer rows: ``bones`` with the tracker's figures now."""
    stats = tracker.layer_stats()
    rows: list[dict[str, Any]] = []
    row_of: dict[int, dict[str, Any]] = {}
    for base, mid in zip(*bones):
        stat = stats.get(mid) or LayerStat(base["type"])
        row = {
            "path": base["path"],
            "type": base["type"],
            "saved_bytes": stat.saved_bytes,
            "peak_saved_bytes": stat.peak_saved_bytes,
            "output_shape": None if stat.output_shape is None else list(stat.output_shape),
            "param_bytes": base["param_bytes"],
            "grad_bytes": base["grad_bytes"],
        }
        if stat.by_dtype:
            row["saved_by_dtype"] = dict(stat.by_dtype)
        if stat.peak_by_dtype and stat.peak_saved_bytes:
            row["peak_saved_by_dtype"] = dict(stat.peak_by_dtype)
        if stat.checkpointed:
            row["checkpointed"] = True
        rows.append(row)
        row_of[mid] = row
    other: dict[str, Any] = {"saved_bytes": 0, "peak_saved_bytes": 0}
    for mid, stat in list(stats.items()):
        if mid in row_of or (stat.saved_bytes == 0 and stat.peak_saved_bytes == 0):
            continue
        target = _tracked_ancestor(tracker, mid, row_of) or other
        target["saved_bytes"] += stat.saved_bytes
        target["peak_saved_bytes"] += stat.peak_saved_bytes
        if stat.by_dtype:
            _add_split(target.setdefault("saved_by_dtype", {}), stat.by_dtype)
        if stat.peak_by_dtype and stat.peak_saved_bytes:
            _add_split(target.setdefault("peak_saved_by_dtype", {}), stat.peak_by_dtype)
    if other["saved_bytes"] or other["peak_saved_bytes"]:
        rows.append(
            {
                "path": OTHER,
                "type": "",
                **other,
                "output_shape": None,
                "param_bytes": 0,
                "grad_bytes": 0,
            }
        )
    tracker.prune(set(row_of))
    return rows


def own_param_bytes(module: torch.nn.Module, seen: set[StorageKey]) -> tuple[int, int]:
    """A module's own (non-recursive) parameter and gradient bytes, each storage once."""
    params = grads = 0
    for p in module._parameters.values():
        if p is None:
            continue
        info = storage_info(p)
        if info is not None and info[0] not in seen:
            seen.add(info[0])
            params += info[1]
        g = p.grad
        ginfo = storage_info(g) if g is not None else None
        if ginfo is not None and ginfo[0] not in seen:
            seen.add(ginfo[0])
            grads += ginfo[1]
    return params, grads


def _add_split(into: dict[str, int], split: dict[str, int]) -> None:
    for dtype, nbytes in split.items():
        into[dtype] = into.get(dtype, 0) + nbytes


def _tracked_ancestor(
    tracker: ActivationTracker, mid: int, row_of: dict[int, dict[str, Any]]
) -> Optional[dict[str, Any]]:
    hops = 0
    while mid and hops < 256:
        mid = tracker.parent_of(mid)
        if mid in row_of:
            return row_of[mid]
        hops += 1
    return None

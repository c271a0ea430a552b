"""Runs the holders scan (holders.py) within a time budget, resumable, and describes each
holder for the panel.

A scan that runs out of its budget returns a :class:`ScanState`: where it stopped, as
namespace *names* and storage keys only (no reference to a user object survives between two
slices). The next slice (run when the kernel is idle, see runtime) looks the remaining names
up again and continues, so every variable is scanned in the end, in the same order and with
the same deduplication as one long scan. A holder cut short by the budget is rolled back
and scanned again whole in the next slice, which the caller gives twice the budget for each
slice in a row that finished nothing (``stalled``): one large holder cannot stall the scan.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from ..fixes import FREE_TRACEBACK
from ._torchutil import StorageKey
from .holders import (
    _CONTAINERS,
    HolderScanner,
    OverBudget,
    ScanLimits,
    _output_cache_objects,
    _Tally,
    _traceback_frames,
)
from .names import user_items

_MISSING = object()


@dataclass
class ScanState:
    """Where a scan stopped: the variables' names in scan order and what was claimed."""

    names: list[str]
    done: int = 0  # holders finished: the variables, then the output cache, then tracebacks
    claimed: set[StorageKey] = field(default_factory=set)
    nodes_seen: set[int] = field(default_factory=set)
    frames_done: set[int] = field(default_factory=set)
    found: list[dict[str, Any]] = field(default_factory=list)
    slices: int = 0
    stalled: int = 0  # slices in a row that finished no holder (the caller grows the budget)

    @property
    def total(self) -> int:
        return len(self.names) + 2


def scan_holders(
    namespace: dict[str, Any],
    shell: Any,
    deadline: float,
    limits: Optional[ScanLimits] = None,
    param_keys: Optional[set[StorageKey]] = None,
    items: Optional[list[tuple[str, Any]]] = None,
    checkpoint_frames: Optional[list[Any]] = None,
    state: Optional[ScanState] = None,
) -> tuple[list[dict[str, Any]], Optional[ScanState]]:
    """The protocol's ``holders`` list (bytes desc) and, when the deadline cut the scan
    short, the state to continue from (None: complete).

    ``param_keys``: parameter storages, never charged to an autograd graph that saves them.
    ``items``: the namespace's ``user_items`` when the caller has them already.
    ``checkpoint_frames``: checkpoint frames the activation tracker saw (see checkpoints.py).
    ``state``: a previous slice's state: continue it (``items`` is then not used).
    """
    limits = limits or ScanLimits()
    scanner = HolderScanner(deadline, limits, param_keys, checkpoint_frames)
    values: dict[str, Any] = {}
    if state is None:
        if items is None:
            hidden = getattr(shell, "user_ns_hidden", {}) if shell is not None else {}
            items = user_items(namespace, hidden)
        state = ScanState(names=[name for name, _ in items])
        values = dict(items)
    scanner.claimed, scanner.nodes_seen = state.claimed, state.nodes_seen
    scanner._frames_done = state.frames_done
    state.slices += 1
    done_before = state.done
    try:
        while state.done < state.total:
            mark = scanner.mark()
            try:
                holder = _scan_one(scanner, state, values, namespace, shell, limits)
            except OverBudget:
                scanner.rollback(mark)
                raise
            if holder is not None:
                state.found.append(holder)
            state.done += 1
    except OverBudget:
        state.stalled = state.stalled + 1 if state.done == done_before else 0
        return _sorted(state.found), state
    return _sorted(state.found), None


def _scan_one(
    scanner: HolderScanner,
    state: ScanState,
    values: dict[str, Any],
    namespace: dict[str, Any],
    shell: Any,
    limits: ScanLimits,
) -> Optional[dict[str, Any]]:
    """Scan the holder at ``state.done``; its entry, or None when below ``min_bytes``."""
    tally = _Tally()
    index = state.done
    if index < len(state.names):
        name = state.names[index]
        value = values.get(name, _MISSING) if values else namespace.get(name, _MISSING)
        if value is _MISSING:
            return None  # deleted since the scan started
        scanner.walk(value, tally)
        if tally.bytes < limits.min_bytes:
            return None
        kind, why, fix = _describe_variable(name, value, tally)
        return _holder(name, kind, tally.bytes, why, fix)
    if index == len(state.names):
        scanner.walk_all(_output_cache_objects(namespace, shell), tally, depth=1)
        if tally.bytes < limits.min_bytes:
            return None
        return _holder(
            "Out / _ (output cache)",
            "output_cache",
            tally.bytes,
            f"IPython's output cache keeps {_n(tally.tensors, 'displayed tensor')} alive",
            "%reset -f out",
        )
    for local_vars in _traceback_frames(shell, namespace):
        scanner.walk_all(local_vars.values(), tally, depth=1)
    if tally.bytes < limits.min_bytes:
        return None
    return _holder(
        "sys.last_traceback",
        "traceback",
        tally.bytes,
        f"the last failed cell's traceback keeps {_n(tally.tensors, 'tensor')} in its "
        "frames' locals alive",
        FREE_TRACEBACK,
    )


def _sorted(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(found, key=lambda h: -int(h["bytes"]))


def _n(count: int, word: str) -> str:
    """`1 tensor`, `2 tensors`: a count with its word in the right number."""
    return f"{count} {word}{'' if count == 1 else 's'}"


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def _describe_variable(name: str, obj: Any, tally: _Tally) -> tuple[str, str, str]:
    """(kind, explanation, fix) for one namespace variable."""
    capped = " (walk capped: more may be held)" if tally.capped else ""
    if tally.graphs and tally.graph_bytes * 2 >= tally.bytes:
        if isinstance(obj, torch.Tensor):
            return (
                "graph_retention",
                f"`{name}` keeps its autograd graph alive: {_n(tally.saved, 'saved tensor')}, "
                f"{_mib(tally.graph_bytes)}",
                f"call {name}.backward() or `del {name}`; keep {name}.detach() if you need it",
            )
        return (
            "graph_retention",
            f"{type(obj).__name__} `{name}` holds {_n(tally.graphs, 'tensor')} with autograd "
            "graphs "
            f"({_n(tally.saved, 'saved tensor')}), e.g. losses.append(loss){capped}",
            f"store plain numbers: {name}.append(loss.item()) (or loss.detach())",
        )
    if isinstance(obj, torch.Tensor):
        return (
            "tensor",
            f"tensor {list(obj.shape)} {str(obj.dtype).replace('torch.', '')} on {obj.device}",
            f"del {name}",
        )
    if isinstance(obj, torch.nn.Module):
        return _describe_module(name, obj)
    if isinstance(obj, torch.optim.Optimizer):
        return (
            "optimizer",
            f"{type(obj).__name__} `{name}`: per-parameter state (e.g. Adam's exp_avg/sq)",
            f"del {name} (state is rebuilt lazily on the next step)",
        )
    if isinstance(obj, _CONTAINERS):
        return (
            "container",
            f"{type(obj).__name__} `{name}` with {_n(len(obj), 'item')} holding "
            f"{_n(tally.tensors, 'tensor')}{capped}",
            f"del {name} (or {name}.clear())",
        )
    return (
        "object",
        f"{type(obj).__name__} `{name}` holds {_n(tally.tensors, 'tensor')} in its "
        f"attributes{capped}",
        f"del {name}",
    )


def _describe_module(name: str, obj: Any) -> tuple[str, str, str]:
    """A module's bytes are the storages no larger holder claimed first: its gradients can
    be freed alone; without gradients (an unused template such as the ``layer`` passed to
    ``nn.TransformerEncoder``, which keeps deep copies) only ``del`` frees them."""
    try:
        grads = any(p.grad is not None for p in obj.parameters())
    except Exception:
        grads = False
    kind = type(obj).__name__
    if grads:
        return (
            "module",
            f"{kind} `{name}`: parameters, gradients and buffers",
            f"{name}.zero_grad(set_to_none=True)  # frees its gradients; "
            f"del {name} (and any optimizer over it) frees the rest",
        )
    return (
        "module",
        f"{kind} `{name}`: parameters and buffers (no gradients: nothing trains it now)",
        f"del {name}  # if no other model uses it",
    )


def _holder(name: str, kind: str, nbytes: int, explanation: str, fix: str) -> dict[str, Any]:
    return {
        "name": name,
        "kind": kind,
        "bytes": int(nbytes),
        "explanation": explanation,
        "fix": fix,
    }

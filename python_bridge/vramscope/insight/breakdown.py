"""Per-device memory breakdown: parameters, gradients, optimizer state, activations, other.

Rule: every storage is counted once, in the first category that claims it, in the order
parameters (incl. buffers) -> gradients -> optimizer state -> activations. ``other`` is the
measured total minus those parts, so the parts add up to ``total_bytes`` exactly; when the parts
exceed the measured total (a different allocator, an injected total), ``other`` is clamped to 0
and the excess is reported as ``clamped_bytes``.

Since 1.1, ``other_tensors`` says how much of ``other`` is tensors of the user's namespace that
no category claims (a variable, or a list/tuple/dict of them, at the top level): memory that
belongs to no model. Also since 1.1, ``runtime_bytes`` is the runtime baseline measured when
torch was imported (``vramscope.torch_baseline``): on CPU a part of ``other`` (after
``other_tensors``), on CUDA a part of ``outside_pytorch`` (the context at the first CUDA
init); ``runtime_note`` says why it was not measured. The rest of ``other`` is allocator
bookkeeping, Python objects and what the runtime allocated since.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any, Callable, Optional

import torch

from ..torch_baseline import BASELINE
from ._torchutil import (
    StorageKey,
    module_tensors,
    optimizer_params,
    optimizer_state_tensors,
    storage_info,
)
from .names import public_items

#: ``device id -> the device's reading`` (``{"used", "reserved", "device_used", ...}``, as the
#: sampler reads it), or None to measure here.
TotalFn = Callable[[str], Optional[Mapping[str, Any]]]
CATEGORIES = ("parameters", "gradients", "optimizer_state", "activations")


_CPU_READER: list[Callable[[], int]] = []


def cpu_in_use_bytes() -> Optional[int]:
    """The bridge's CPU in-use bytes (glibc mallinfo2, RSS under another malloc).

    Reuses ``vramscope.devices.cpu``; falls back to RSS from ``/proc/self/statm``.
    """
    if not _CPU_READER:
        try:
            from ..devices.cpu import CpuDevice

            _CPU_READER.append(CpuDevice().in_use)
        except Exception:
            _CPU_READER.append(_rss)
    try:
        return int(_CPU_READER[0]())
    except Exception:
        return None


def _rss() -> int:
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class _Claims:
    """Storage -> category, first claim wins; sums bytes per (device, category).

    ``base``: claims made before, read but never changed (the cached claims of the models,
    see :func:`claim_models`): a storage it has is not claimed again."""

    def __init__(self, base: Optional[_Claims] = None) -> None:
        self.base = base
        self.seen: set[StorageKey] = set()
        self.sums: dict[str, dict[str, int]] = {}
        if base is not None:
            self.sums = {dev: dict(parts) for dev, parts in base.sums.items()}
        #: module and optimizer tensors looked at (what building these claims cost)
        self.tensors = 0

    def has(self, key: StorageKey) -> bool:
        return key in self.seen or (self.base is not None and self.base.has(key))

    def add(self, category: str, tensors: Iterable[Any]) -> None:
        for t in tensors:
            if isinstance(t, torch.Tensor):
                self.tensors += 1
                info = storage_info(t)
                if info is not None:
                    self.add_key(category, info[0], info[1])

    def add_key(self, category: str, key: StorageKey, nbytes: int) -> None:
        if self.has(key):
            return
        self.seen.add(key)
        per_dev = self.sums.setdefault(key[0], dict.fromkeys(CATEGORIES, 0))
        per_dev[category] += nbytes


def _grads(tensors: Iterable[torch.Tensor]) -> Iterable[torch.Tensor]:
    for p in tensors:
        g = p.grad
        if g is not None:
            yield g


#: At most this many namespace names, and items per container, are looked at.
_NS_NAMES = 5000
_NS_ITEMS = 1000


def namespace_tensors(ns: Optional[Mapping[str, Any]] = None) -> list[torch.Tensor]:
    """Tensors held by ``ns`` (default: the user's namespace) at the top level (directly or
    in a list, tuple or dict), IPython's own ``_`` names left out. Empty outside IPython."""
    if ns is None:
        try:
            from IPython import get_ipython

            ns = getattr(get_ipython(), "user_ns", None)
        except Exception:
            return []
    if not isinstance(ns, dict):
        return []
    out: list[torch.Tensor] = []
    for _name, value in public_items(ns)[:_NS_NAMES]:
        if isinstance(value, torch.Tensor):
            out.append(value)
        elif isinstance(value, (list, tuple)):
            out.extend(v for v in value[:_NS_ITEMS] if isinstance(v, torch.Tensor))
        elif isinstance(value, dict):
            items = list(value.values())[:_NS_ITEMS]
            out.extend(v for v in items if isinstance(v, torch.Tensor))
    return out


def compute_breakdown(
    modules: Iterable[torch.nn.Module],
    optimizers: Iterable[torch.optim.Optimizer],
    activations: dict[StorageKey, int],
    total_fn: Optional[TotalFn] = None,
) -> dict[str, dict[str, Any]]:
    """The protocol's ``breakdown`` map ``{device id: Breakdown}``."""
    return finish_breakdown(claim_models(modules, optimizers), activations, total_fn)


def claim_models(
    modules: Iterable[torch.nn.Module], optimizers: Iterable[torch.optim.Optimizer]
) -> _Claims:
    """The parameters', gradients' and optimizer state's claims: the part of a breakdown
    that walks the models (its cost grows with them). Holds storage keys only, so it can be
    kept and finished again later (:func:`finish_breakdown`) while the models are unchanged."""
    modules = list(modules)
    optimizers = list(optimizers)
    params: list[torch.Tensor] = []
    for m in modules:
        params.extend(module_tensors(m))
    for opt in optimizers:
        params.extend(optimizer_params(opt))
    claims = _Claims()
    claims.add("parameters", params)
    claims.add("gradients", _grads(params))
    for opt in optimizers:
        claims.add("optimizer_state", optimizer_state_tensors(opt))
    return claims


def finish_breakdown(
    models: _Claims, activations: dict[StorageKey, int], total_fn: Optional[TotalFn] = None
) -> dict[str, dict[str, Any]]:
    """The breakdown from the models' claims (left unchanged), the live activations, the
    namespace's unclaimed tensors and each device's measured total."""
    claims = _Claims(base=models)
    for key, nbytes in activations.items():
        claims.add_key("activations", key, nbytes)
    unowned = _Claims(base=claims)  # what is left: the namespace's tensors claimed by no category
    unowned.sums = {}
    unowned.add("activations", namespace_tensors())

    devices = set(claims.sums) | {"cpu"} | initialized_cuda_devices()
    out: dict[str, dict[str, Any]] = {}
    for dev in sorted(devices):
        parts = claims.sums.get(dev, dict.fromkeys(CATEGORIES, 0))
        reading = total_fn(dev) if total_fn is not None else None
        measured, extra = _from_reading(dev, reading) if reading is not None else _measure(dev)
        if measured is None:
            continue
        rest = sum(parts.values())
        other = max(0, measured - rest)
        entry = {"total_bytes": int(measured), **parts, "other": other}
        if rest > measured:
            entry["clamped_bytes"] = rest - measured
        # since 1.1: the part of ``other`` that is the namespace's unclaimed tensors
        entry["other_tensors"] = min(other, unowned.sums.get(dev, {}).get("activations", 0))
        entry.update(extra)
        entry.update(_runtime_part(dev, entry))
        out[dev] = entry
    return out


def measured_totals(devices: Iterable[str], total_fn: Optional[TotalFn] = None) -> dict[str, int]:
    """Each device's measured total, as :func:`finish_breakdown` reads it."""
    out: dict[str, int] = {}
    for dev in devices:
        reading = total_fn(dev) if total_fn is not None else None
        measured, _ = _from_reading(dev, reading) if reading is not None else _measure(dev)
        if measured is not None:
            out[dev] = int(measured)
    return out


def _runtime_part(dev: str, entry: Mapping[str, int]) -> dict[str, Any]:
    """Since 1.1: the runtime baseline's share of ``other`` after ``other_tensors`` (CPU) or
    of ``outside_pytorch`` (CUDA), or the note saying why it was not measured."""
    if dev == "cpu":
        return BASELINE.part(dev, entry["other"] - entry["other_tensors"])
    if "outside_pytorch" in entry:
        return BASELINE.part(dev, entry["outside_pytorch"])
    return {}


def initialized_cuda_devices() -> set[str]:
    """The CUDA devices once torch has initialised CUDA (none before: no reading starts it)."""
    try:
        if not torch.cuda.is_initialized():
            return set()
        return {f"cuda:{i}" for i in range(torch.cuda.device_count())}
    except Exception:
        return set()


def _cuda_extras(used: int, reserved: Optional[int], device_used: Optional[int]) -> dict[str, int]:
    """Reserved-but-free (allocator cache, fragmentation) and memory outside PyTorch."""
    extra: dict[str, int] = {}
    if reserved is not None:
        extra["reserved_free"] = max(0, int(reserved) - int(used))
        if device_used is not None:
            extra["outside_pytorch"] = max(0, int(device_used) - int(reserved))
    return extra


def _from_reading(dev: str, reading: Mapping[str, Any]) -> tuple[Optional[int], dict[str, int]]:
    """The measured total and CUDA extras from a caller's device reading."""
    used = reading.get("used")
    if used is None:
        return None, {}
    extra: dict[str, int] = {}
    if dev.startswith("cuda:"):
        extra = _cuda_extras(used, reading.get("reserved"), reading.get("device_used"))
    return int(used), extra


def _measure(dev: str) -> tuple[Optional[int], dict[str, int]]:
    """Measured in-use bytes of a device, plus its extra CUDA fields."""
    if dev == "cpu":
        return cpu_in_use_bytes(), {}
    if dev.startswith("cuda:"):
        if not torch.cuda.is_initialized():
            return None, {}
        idx = int(dev.split(":", 1)[1])
        allocated = int(torch.cuda.memory_allocated(idx))
        reserved = int(torch.cuda.memory_reserved(idx))
        free, total = torch.cuda.mem_get_info(idx)
        return allocated, _cuda_extras(allocated, reserved, int(total - free))
    if dev == "mps":
        try:
            return int(torch.mps.current_allocated_memory()), {}
        except Exception:
            return None, {}
    return None, {}

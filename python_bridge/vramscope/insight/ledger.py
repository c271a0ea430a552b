"""The activation tracker's books: which saved storages are alive, their bytes, and the
per-module figures (live, peak, by dtype) they add up to.

A storage is counted once however many ops save it (``count`` references), from its first
save to the moment autograd frees its last packed reference (what the pack hook returned
calls :meth:`SavedLedger.release` as it goes: saved.py). Only integers and strings are kept:
no tensor.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from ..dtype_names import dtype_name
from ._torchutil import StorageKey

OUTSIDE = 0  # owner id of storages saved outside any module


@dataclass
class LayerStat:
    """Live saved-activation figures of one module (keyed by ``id(module)``)."""

    type_name: str
    saved_bytes: int = 0
    peak_saved_bytes: int = 0
    output_shape: Optional[Sequence[int]] = None  # a torch.Size (layers.py: a list)
    by_dtype: dict[str, int] = field(default_factory=dict)  # live saved bytes per dtype
    #: ``by_dtype`` when ``peak_saved_bytes`` was reached (the estimator scales by it)
    peak_by_dtype: dict[str, int] = field(default_factory=dict)
    checkpointed: bool = False  # its forward starts a checkpointed region


class _Saved:
    """A live saved storage (one per storage, made at nearly every save of a measured
    forward: a plain class with slots)."""

    __slots__ = ("count", "dtype", "epoch", "last_epoch", "nbytes", "owner")

    def __init__(self, nbytes: int, owner: int, dtype: str, epoch: int) -> None:
        self.count = 1
        self.nbytes = nbytes
        self.owner = owner  # id() of the innermost module at first save, 0 outside any
        self.dtype = dtype  # of the first tensor saved on it ("float32", "bfloat16"...)
        self.epoch = epoch  # the measured forward (count) that saved it first
        self.last_epoch = epoch  # ... and last (an input every forward saves: the newest)


def _copy_into(by_dtype: dict[str, int], stat: LayerStat) -> None:
    """``stat.peak_by_dtype = dict(by_dtype)``, in place when it has the same dtypes (a new
    peak at nearly every save of a forward: no new dict each time)."""
    peak = stat.peak_by_dtype
    if len(peak) == len(by_dtype):
        for dtype in by_dtype:
            if dtype not in peak:
                break
        else:
            peak.update(by_dtype)
            return
    stat.peak_by_dtype = dict(by_dtype)


class SavedLedger:
    def __init__(self) -> None:
        self.live: dict[StorageKey, _Saved] = {}
        self.layers: dict[int, LayerStat] = {}
        self.parents: dict[int, int] = {}
        self._by_device: dict[str, int] = {}
        self.epoch = 0  # measured forwards so far
        self.epoch_live = 0  # live storages first saved in the current epoch
        # Reentrant: a GC run inside the pack hook can fire _release on this thread.
        self._lock = threading.RLock()

    def new_epoch(self) -> None:
        """A measured forward starts."""
        self.epoch += 1
        self.epoch_live = 0

    def stat(self, mid: int, type_name: str = "") -> LayerStat:
        stat = self.layers.get(mid)
        if stat is None:
            stat = self.layers[mid] = LayerStat(type_name)
        return stat

    def count(self, key: StorageKey, owner: int, packed: Any, storage: Any, dtype: Any) -> None:
        """``packed`` (what the pack hook returned, a :class:`.saved.Saved`) references
        storage ``key``: counted until autograd frees it, when it calls :meth:`release`.
        A storage not yet live is sized (``storage.nbytes()``) and its ``dtype`` (a
        ``torch.dtype``) named; neither is kept."""
        with self._lock:
            entry = self.live.get(key)
            if entry is None:
                nbytes = storage.nbytes()
                name = dtype_name(dtype)
                self.live[key] = _Saved(nbytes, owner, name, self.epoch)
                self.epoch_live += 1
                self._by_device[key[0]] = self._by_device.get(key[0], 0) + nbytes
                self._add(owner, nbytes, name)
            else:
                entry.count += 1
                entry.last_epoch = self.epoch
            packed.key = key
            packed.ledger = self

    def _add(self, owner: int, nbytes: int, dtype: str) -> None:
        stat = self.stat(owner)
        stat.saved_bytes += nbytes
        stat.by_dtype[dtype] = stat.by_dtype.get(dtype, 0) + nbytes
        if stat.saved_bytes > stat.peak_saved_bytes:
            stat.peak_saved_bytes = stat.saved_bytes
            _copy_into(stat.by_dtype, stat)

    def release(self, key: StorageKey) -> None:
        """A packed reference to ``key`` was freed (by autograd, on any thread)."""
        with self._lock:
            saved = self.live.get(key)
            if saved is None:
                return
            saved.count -= 1
            if saved.count > 0:
                return
            del self.live[key]
            if saved.epoch == self.epoch:
                self.epoch_live -= 1
            self._by_device[key[0]] = self._by_device.get(key[0], 0) - saved.nbytes
            stat = self.layers.get(saved.owner)
            if stat is not None:
                stat.saved_bytes -= saved.nbytes
                left = stat.by_dtype.get(saved.dtype, 0) - saved.nbytes
                if left:
                    stat.by_dtype[saved.dtype] = left
                else:
                    stat.by_dtype.pop(saved.dtype, None)

    def prune(self, keep: set[int]) -> None:
        """Drop figures of modules not in ``keep`` that hold nothing (dead or unwatched)."""
        with self._lock:
            busy = {saved.owner for saved in self.live.values()}
            needed = set(keep) | busy
            for mid in list(busy):
                while mid in self.parents and self.parents[mid] not in needed:
                    mid = self.parents[mid]
                    needed.add(mid)
            for mid in [m for m in self.layers if m not in needed]:
                del self.layers[mid]
            for mid in [m for m in self.parents if m not in needed]:
                del self.parents[mid]

    def reset_peaks(self) -> None:
        for stat in self.layers.values():
            stat.peak_saved_bytes = stat.saved_bytes
            stat.peak_by_dtype = dict(stat.by_dtype)

    def live_epochs(self, since: int) -> int:
        """How many measured forwards after epoch ``since`` still have saved storages alive
        (their graphs were kept: ``losses.append(loss)`` keeps one per forward)."""
        with self._lock:
            return len({s.last_epoch for s in self.live.values() if s.last_epoch > since})

    def bytes_by_device(self) -> dict[str, int]:
        return dict(self._by_device)

    def total_bytes(self) -> int:
        return sum(self._by_device.values())

    def live_storages(self) -> dict[StorageKey, int]:
        """Live saved storages and their byte sizes."""
        with self._lock:
            return {key: saved.nbytes for key, saved in self.live.items()}

"""What every measured device offers: one cheap read, a DeviceInfo, and per-cell marks."""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Literal

from ..messages.records import DeviceDelta, DeviceInfo, DeviceSample

PeakPolicy = Literal["reset", "preserve"]


@dataclass(frozen=True)
class CellMark:
    """Device state taken before a cell runs.

    ``baseline`` is device specific: the RSS before the cell for the CPU (VmHWM was reset),
    the allocator's peak counter before the cell for CUDA. ``peak_counter_fresh`` says the
    device's own peak counter started at the cell's start (reset by us, or never used before).
    ``exact``: the cell's peak is counted (the CPU's heap counter, or its op-by-op count under
    ``cpu_peak: "exact"``); ``counted``: the heap counter's raw count at the cell's start.
    """

    before: int
    baseline: int = 0
    peak_counter_fresh: bool = False
    exact: bool = False
    counted: int | None = None


class Device(abc.ABC):
    """A memory source. ``read`` must be cheap and thread safe: the sampler calls it per tick."""

    id: str
    kind: Literal["cpu", "cuda", "mps"]
    source: str

    @abc.abstractmethod
    def read(self) -> DeviceSample:
        """Current usage, from ONE statistics call (the sampler's per-tick read)."""

    def tick(self) -> DeviceSample | None:
        """The sampler's reading: ``read`` unless a device keeps a slow part of it for every
        few ticks (each tick runs on a thread that wakes ten times a second); None: nothing
        read this tick (a reading too slow to take at every tick)."""
        return self.read()

    def current(self) -> DeviceSample:
        """The device's state now, for a reader after a cell (the insight breakdown): ``read``
        unless the device still knows it without reading again."""
        return self.read()

    @abc.abstractmethod
    def info(self, sample: DeviceSample | None = None) -> DeviceInfo:
        """Describe the device; reuse ``sample`` instead of reading again when given."""

    @abc.abstractmethod
    def begin_cell(self, policy: PeakPolicy) -> CellMark:
        """Called right before a cell runs (main thread)."""

    @abc.abstractmethod
    def end_cell(self, mark: CellMark, window_max: int | None) -> tuple[DeviceDelta, DeviceSample]:
        """Called right after a cell; ``window_max`` is the sampler's highest ``used`` meanwhile."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release OS resources (file descriptors)."""


def make_delta(before: int, after: int, rises: list[int | None]) -> DeviceDelta:
    """Build a DeviceDelta whose peak is the largest known rise, never below max(0, delta)."""
    delta = after - before
    peak = max([0, delta, *(r for r in rises if r is not None)])
    return {
        "before_bytes": before,
        "after_bytes": after,
        "delta_bytes": delta,
        "peak_delta_bytes": peak,
    }


def window_rise(window_max: int | None, before: int) -> int | None:
    return None if window_max is None else window_max - before

"""Apple MPS memory from ``torch.mps`` (no peak counter: per-cell peaks come from the sampler)."""

from __future__ import annotations

from typing import Any

from ..messages.records import DeviceDelta, DeviceInfo, DeviceSample
from .base import CellMark, Device, PeakPolicy, make_delta, window_rise


class MpsDevice(Device):
    id = "mps"
    kind = "mps"
    source = "mps"

    def __init__(self, torch_module: Any) -> None:
        self._mps = torch_module.mps
        self._total: int | None = None

    def read(self) -> DeviceSample:
        return {
            "used": int(self._mps.current_allocated_memory()),
            "reserved": int(self._mps.driver_allocated_memory()),
        }

    def info(self, sample: DeviceSample | None = None) -> DeviceInfo:
        if self._total is None:
            self._total = int(self._mps.recommended_max_memory())
        sample = sample or self.read()
        return {
            "id": self.id,
            "kind": "mps",
            "name": "Apple MPS",
            "total_bytes": self._total,
            "used_bytes": sample["used"],
            "reserved_bytes": sample.get("reserved"),
            "initialized": True,
            "source": self.source,
        }

    def begin_cell(self, policy: PeakPolicy) -> CellMark:
        return CellMark(before=self.read()["used"])

    def end_cell(self, mark: CellMark, window_max: int | None) -> tuple[DeviceDelta, DeviceSample]:
        sample = self.read()
        return make_delta(
            mark.before, sample["used"], [window_rise(window_max, mark.before)]
        ), sample

"""CUDA memory per visible device index, from the caching allocator's statistics.

Rules (see /docs/report-schema.md):
- ONE allocator statistics call per read, always with an explicit device index.
- Nothing here may create a CUDA context: before ``torch.cuda.is_initialized()`` a device
  reads as zeros; ``mem_get_info`` (device-wide, all processes) is asked only for a device that
  already has a context.
- Peak policy ``reset`` resets the allocator's peak counter before each cell (global: it also
  resets what ``torch.cuda.max_memory_allocated`` returns to the user). ``preserve`` never
  resets: the cell's peak is known exactly only when the cell set a new all-time peak; else the
  sampler's highest reading during the cell and the delta are used.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

from ..messages.records import DeviceDelta, DeviceInfo, DeviceSample
from .base import CellMark, Device, PeakPolicy, make_delta, window_rise


class CudaStats(NamedTuple):
    allocated: int
    allocated_peak: int
    reserved: int


class CudaBackend(Protocol):
    """The few allocator calls the bridge needs; tests substitute a fake."""

    def is_initialized(self) -> bool: ...

    def stats(self, index: int) -> CudaStats: ...

    def reset_peak(self, index: int) -> None: ...

    def has_context(self, index: int) -> bool: ...

    def mem_get_info(self, index: int) -> tuple[int, int]: ...

    def device_name(self, index: int) -> str: ...

    def total_memory(self, index: int) -> int: ...


class TorchCudaBackend:
    """The real backend over ``torch.cuda`` (imported only by the caller that has torch)."""

    def __init__(self, torch_module: Any) -> None:
        self._torch = torch_module
        self._c = torch_module._C

    def is_initialized(self) -> bool:
        return bool(self._torch.cuda.is_initialized())

    def stats(self, index: int) -> CudaStats:
        nested = getattr(self._c, "_cuda_memoryStats", None)
        if nested is not None:
            raw = nested(index)
            return CudaStats(
                int(raw["allocated_bytes"]["all"]["current"]),
                int(raw["allocated_bytes"]["all"]["peak"]),
                int(raw["reserved_bytes"]["all"]["current"]),
            )
        flat = self._torch.cuda.memory_stats(index)
        return CudaStats(
            int(flat.get("allocated_bytes.all.current", 0)),
            int(flat.get("allocated_bytes.all.peak", 0)),
            int(flat.get("reserved_bytes.all.current", 0)),
        )

    def reset_peak(self, index: int) -> None:
        self._torch.cuda.reset_peak_memory_stats(index)

    def has_context(self, index: int) -> bool:
        probe = getattr(self._c, "_cuda_hasPrimaryContext", None)
        if probe is not None:
            return bool(probe(index))
        return self.stats(index).reserved > 0

    def mem_get_info(self, index: int) -> tuple[int, int]:
        free, total = self._torch.cuda.mem_get_info(index)
        return int(free), int(total)

    def device_name(self, index: int) -> str:
        return str(self._torch.cuda.get_device_name(index))

    def total_memory(self, index: int) -> int:
        return int(self._torch.cuda.get_device_properties(index).total_memory)


class CudaDevice(Device):
    kind = "cuda"
    source = "cuda-allocator"

    def __init__(self, index: int, backend: CudaBackend) -> None:
        self.index = index
        self.id = f"cuda:{index}"
        self._backend = backend
        self._name: str | None = None
        self._total: int | None = None

    def read(self) -> DeviceSample:
        backend = self._backend
        if not backend.is_initialized():
            return {"used": 0, "reserved": 0}
        st = backend.stats(self.index)
        sample: DeviceSample = {
            "used": st.allocated,
            "reserved": st.reserved,
            "peak": st.allocated_peak,
        }
        if backend.has_context(self.index):
            free, total = backend.mem_get_info(self.index)
            sample["device_used"] = total - free
            sample["device_total"] = total
        return sample

    def info(self, sample: DeviceSample | None = None) -> DeviceInfo:
        initialized = self._backend.is_initialized()
        if initialized and self._name is None:
            self._name = self._backend.device_name(self.index)
            self._total = self._backend.total_memory(self.index)
        sample = sample or self.read()
        return {
            "id": self.id,
            "kind": "cuda",
            "name": self._name or f"CUDA device {self.index}",
            "total_bytes": sample.get("device_total", self._total),
            "used_bytes": sample["used"],
            "reserved_bytes": sample.get("reserved"),
            "initialized": initialized,
            "source": self.source,
        }

    def begin_cell(self, policy: PeakPolicy) -> CellMark:
        backend = self._backend
        if not backend.is_initialized():
            # Counters start at zero when the cell initialises CUDA: the cell owns its peak.
            return CellMark(before=0, baseline=0, peak_counter_fresh=True)
        st = backend.stats(self.index)
        if policy == "reset":
            backend.reset_peak(self.index)
            return CellMark(before=st.allocated, baseline=st.allocated, peak_counter_fresh=True)
        return CellMark(before=st.allocated, baseline=st.allocated_peak, peak_counter_fresh=False)

    def end_cell(self, mark: CellMark, window_max: int | None) -> tuple[DeviceDelta, DeviceSample]:
        sample = self.read()
        counter_rise: int | None = None
        peak = sample.get("peak")
        if peak is not None and (mark.peak_counter_fresh or peak > mark.baseline):
            counter_rise = peak - mark.before
        delta = make_delta(
            mark.before, sample["used"], [counter_rise, window_rise(window_max, mark.before)]
        )
        return delta, sample

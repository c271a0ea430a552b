"""CPU device on this machine, CUDA device logic against a fake allocator."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from vramscope.devices import CpuDevice, CudaDevice, CudaStats, make_delta
from vramscope.devices.cpu import other_allocator

MIB = 1 << 20


def test_make_delta_peak_never_below_delta() -> None:
    assert make_delta(100, 50, [None])["peak_delta_bytes"] == 0
    assert make_delta(100, 150, [10, None])["peak_delta_bytes"] == 50
    assert make_delta(100, 150, [80])["peak_delta_bytes"] == 80
    assert make_delta(100, 150, [80])["delta_bytes"] == 50


def test_cpu_read_and_info() -> None:
    cpu = CpuDevice()
    sample = cpu.read()
    assert sample["used"] > 0 and sample["reserved"] > 0
    info = cpu.info(sample)
    assert info["id"] == "cpu" and info["used_bytes"] == sample["used"]
    assert info["source"] in ("mallinfo2", "rss")
    cpu.close()
    cpu.close()


@pytest.mark.skipif(CpuDevice().source != "mallinfo2", reason="needs glibc mallinfo2")
def test_cpu_cell_delta_and_peak() -> None:
    cpu = CpuDevice()
    mark = cpu.begin_cell("reset")
    kept = bytearray(64 * MIB)
    delta, _ = cpu.end_cell(mark, None)
    assert abs(delta["delta_bytes"] - 64 * MIB) < 0.01 * 64 * MIB
    del kept
    mark = cpu.begin_cell("reset")
    temp = bytearray(96 * MIB)  # zero-filled: touched, so VmHWM rises
    del temp
    delta, _ = cpu.end_cell(mark, None)
    assert abs(delta["delta_bytes"]) < MIB
    if cpu.peak_resettable:
        assert delta["peak_delta_bytes"] >= 90 * MIB


def test_cpu_peak_from_sampler_window() -> None:
    cpu = CpuDevice()
    mark = cpu.begin_cell("reset")
    delta, _ = cpu.end_cell(mark, mark.before + 500 * MIB)
    assert delta["peak_delta_bytes"] >= 500 * MIB


def test_other_allocator_detection() -> None:
    assert other_allocator({"LD_PRELOAD": "/usr/lib/libjemalloc.so.2"}, "") == "jemalloc"
    assert other_allocator({}, "7f00 r-xp /usr/lib/libtcmalloc_minimal.so.4\n") == "tcmalloc"
    assert other_allocator({}, "/usr/lib/libc.so.6") is None
    assert CpuDevice(use_mallinfo2=False).source == "rss"


@dataclass
class FakeAllocator:
    """Per-index allocator counters; records every call (and the index it named)."""

    initialized: bool = False
    allocated: dict[int, int] = field(default_factory=dict)
    peak: dict[int, int] = field(default_factory=dict)
    contexts: set[int] = field(default_factory=set)
    calls: list[tuple[str, int]] = field(default_factory=list)
    total: int = 80 * 1024 * MIB

    def alloc(self, index: int, nbytes: int) -> None:
        self.initialized = True
        self.contexts.add(index)
        self.allocated[index] = self.allocated.get(index, 0) + nbytes
        self.peak[index] = max(self.peak.get(index, 0), self.allocated[index])

    def free(self, index: int, nbytes: int) -> None:
        self.allocated[index] -= nbytes

    def is_initialized(self) -> bool:
        return self.initialized

    def stats(self, index: int) -> CudaStats:
        self.calls.append(("stats", index))
        assert self.initialized, "stats read before CUDA was initialised"
        cur = self.allocated.get(index, 0)
        return CudaStats(cur, self.peak.get(index, 0), cur + 2 * MIB)

    def reset_peak(self, index: int) -> None:
        self.calls.append(("reset_peak", index))
        self.peak[index] = self.allocated.get(index, 0)

    def has_context(self, index: int) -> bool:
        return index in self.contexts

    def mem_get_info(self, index: int) -> tuple[int, int]:
        self.calls.append(("mem_get_info", index))
        assert index in self.contexts, "mem_get_info would create a context"
        return self.total - self.allocated.get(index, 0) - 500 * MIB, self.total

    def device_name(self, index: int) -> str:
        return f"Fake GPU {index}"

    def total_memory(self, index: int) -> int:
        return self.total


def test_cuda_uninitialised_reads_zero_without_any_call() -> None:
    fake = FakeAllocator()
    dev = CudaDevice(1, fake)
    assert dev.read() == {"used": 0, "reserved": 0}
    info = dev.info()
    assert info["initialized"] is False and info["name"] == "CUDA device 1"
    mark = dev.begin_cell("reset")
    delta, _ = dev.end_cell(mark, None)
    assert delta["delta_bytes"] == 0
    assert fake.calls == []


def test_cuda_one_stats_call_per_read_with_explicit_index() -> None:
    fake = FakeAllocator()
    fake.alloc(1, 10 * MIB)
    dev = CudaDevice(1, fake)
    sample = dev.read()
    assert [c for c in fake.calls if c[0] == "stats"] == [("stats", 1)]
    assert all(index == 1 for _, index in fake.calls)
    assert sample["used"] == 10 * MIB and sample["peak"] == 10 * MIB
    assert sample["device_total"] == fake.total
    assert sample["device_used"] == 10 * MIB + 500 * MIB
    assert dev.info(sample)["name"] == "Fake GPU 1"


def test_cuda_no_device_wide_read_without_context() -> None:
    fake = FakeAllocator()
    fake.alloc(0, MIB)
    dev = CudaDevice(1, fake)  # device 1 never used: no context there
    sample = dev.read()
    assert "device_used" not in sample
    assert ("mem_get_info", 1) not in fake.calls


def test_cuda_reset_policy_peak_delta() -> None:
    fake = FakeAllocator()
    fake.alloc(0, 1000 * MIB)  # earlier all-time peak, higher than this cell's
    fake.free(0, 900 * MIB)
    dev = CudaDevice(0, fake)
    mark = dev.begin_cell("reset")
    assert ("reset_peak", 0) in fake.calls
    fake.alloc(0, 128 * MIB)
    fake.free(0, 128 * MIB)
    fake.alloc(0, 64 * MIB)
    delta, _ = dev.end_cell(mark, None)
    assert delta == {
        "before_bytes": 100 * MIB,
        "after_bytes": 164 * MIB,
        "delta_bytes": 64 * MIB,
        "peak_delta_bytes": 128 * MIB,
    }


def test_cuda_preserve_policy_never_resets() -> None:
    fake = FakeAllocator()
    fake.alloc(0, 1000 * MIB)
    fake.free(0, 900 * MIB)
    dev = CudaDevice(0, fake)
    mark = dev.begin_cell("preserve")
    fake.alloc(0, 128 * MIB)
    fake.free(0, 128 * MIB)
    delta, _ = dev.end_cell(mark, None)
    assert ("reset_peak", 0) not in fake.calls
    assert fake.peak[0] == 1000 * MIB  # the user's max_memory_allocated is intact
    # the all-time peak was not exceeded: only delta / sampler can bound the cell's peak
    assert delta["peak_delta_bytes"] == 0
    mark = dev.begin_cell("preserve")
    fake.alloc(0, 128 * MIB)
    fake.free(0, 128 * MIB)
    delta, _ = dev.end_cell(mark, 100 * MIB + 120 * MIB)
    assert delta["peak_delta_bytes"] == 120 * MIB
    mark = dev.begin_cell("preserve")
    fake.alloc(0, 2000 * MIB)  # new all-time peak: exact
    fake.free(0, 2000 * MIB)
    delta, _ = dev.end_cell(mark, None)
    assert delta["peak_delta_bytes"] == 2000 * MIB


def test_cuda_cell_that_initialises_cuda_owns_the_peak() -> None:
    fake = FakeAllocator()
    dev = CudaDevice(0, fake)
    mark = dev.begin_cell("preserve")
    fake.alloc(0, 256 * MIB)
    fake.free(0, 192 * MIB)
    delta, _ = dev.end_cell(mark, None)
    assert delta["delta_bytes"] == 64 * MIB and delta["peak_delta_bytes"] == 256 * MIB
    assert ("reset_peak", 0) not in fake.calls

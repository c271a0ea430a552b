"""CPU device on this machine (mallinfo2 and the RSS fallback), CUDA and MPS device logic
against fake allocators."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from vramscope.devices import (
    CpuDevice,
    CudaDevice,
    CudaStats,
    MpsDevice,
    accelerator_devices,
    make_delta,
)
from vramscope.devices import cpu as cpu_module
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
    assert info["source"] in ("malloc-counter", "mallinfo2", "rss")
    cpu.close()
    cpu.close()


@pytest.mark.skipif(cpu_module.load_mallinfo2() is None, reason="needs glibc mallinfo2")
@pytest.mark.parametrize("counted", [True, False], ids=["heap-counter", "mallinfo2"])
def test_cpu_cell_delta_and_peak(counted: bool) -> None:
    cpu = CpuDevice(heap_counter=counted)
    if counted and cpu.heap is None:
        pytest.skip(f"no heap counter here: {cpu_module.heapcount.unavailable()}")
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
    cpu = CpuDevice(heap_counter=False)  # counted peaks are exact: no sampler window
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


# --- MPS against a fake torch.mps -------------------------------------------------------------


class FakeMps:
    """``torch.mps``'s memory functions over counters the test sets."""

    def __init__(self) -> None:
        self.allocated = 0
        self.driver = 0
        self.recommended = 48 * 1024 * MIB
        self.calls: list[str] = []

    def current_allocated_memory(self) -> int:
        self.calls.append("current")
        return self.allocated

    def driver_allocated_memory(self) -> int:
        self.calls.append("driver")
        return self.driver

    def recommended_max_memory(self) -> int:
        self.calls.append("recommended")
        return self.recommended


def fake_torch(mps_available: bool = True, cuda_count: int = 0) -> SimpleNamespace:
    mps = FakeMps()
    return SimpleNamespace(
        mps=mps,
        cuda=SimpleNamespace(device_count=lambda: cuda_count),
        backends=SimpleNamespace(
            cuda=SimpleNamespace(is_built=lambda: cuda_count > 0),
            mps=SimpleNamespace(is_available=lambda: mps_available),
        ),
    )


def test_mps_detected_only_when_available() -> None:
    torch = fake_torch()
    (dev,) = accelerator_devices(torch)
    assert isinstance(dev, MpsDevice) and dev.id == "mps" and dev.kind == "mps"
    assert torch.mps.calls == []  # detection reads no memory
    assert accelerator_devices(fake_torch(mps_available=False)) == []

    def broken() -> bool:
        raise RuntimeError("MPS backend broken")

    torch = fake_torch()
    torch.backends.mps.is_available = broken
    assert accelerator_devices(torch) == []


def test_mps_read_and_info_bytes() -> None:
    torch = fake_torch()
    dev = MpsDevice(torch)
    torch.mps.allocated, torch.mps.driver = 300 * MIB + 5, 512 * MIB
    assert dev.read() == {"used": 300 * MIB + 5, "reserved": 512 * MIB}
    info = dev.info()
    assert info == {
        "id": "mps",
        "kind": "mps",
        "name": "Apple MPS",
        "total_bytes": 48 * 1024 * MIB,
        "used_bytes": 300 * MIB + 5,
        "reserved_bytes": 512 * MIB,
        "initialized": True,
        "source": "mps",
    }
    # a given sample is reused, the total is asked once
    torch.mps.calls.clear()
    assert dev.info({"used": 7, "reserved": 9})["used_bytes"] == 7
    assert torch.mps.calls == []


def test_mps_cell_delta_and_sampler_peak() -> None:
    torch = fake_torch()
    dev = MpsDevice(torch)
    torch.mps.allocated = 100 * MIB
    mark = dev.begin_cell("reset")  # no peak counter on MPS: the policy changes nothing
    assert mark.before == 100 * MIB
    torch.mps.allocated = 164 * MIB
    delta, sample = dev.end_cell(mark, None)
    assert delta == {
        "before_bytes": 100 * MIB,
        "after_bytes": 164 * MIB,
        "delta_bytes": 64 * MIB,
        "peak_delta_bytes": 64 * MIB,
    }
    assert sample["used"] == 164 * MIB
    mark = dev.begin_cell("preserve")
    torch.mps.allocated = 100 * MIB  # freed 64 MiB after a 300 MiB spike the sampler saw
    delta, _ = dev.end_cell(mark, 464 * MIB)
    assert delta["delta_bytes"] == -64 * MIB and delta["peak_delta_bytes"] == 300 * MIB


# --- CPU without mallinfo2: RSS -------------------------------------------------------------


def statm_rss() -> int:
    """Ground truth: resident pages from /proc/self/statm times the page size."""
    with open("/proc/self/statm", "rb") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


needs_proc = pytest.mark.skipif(
    not os.path.exists("/proc/self/statm"), reason="needs Linux /proc/self/statm"
)


@needs_proc
@pytest.mark.parametrize("how", ["use_mallinfo2=False", "load_mallinfo2 is None"])
def test_cpu_rss_fallback_reads_rss(monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    if how == "use_mallinfo2=False":
        cpu = CpuDevice(use_mallinfo2=False)
    else:
        monkeypatch.setattr(cpu_module, "load_mallinfo2", lambda: None)
        cpu = CpuDevice()
    try:
        assert cpu.source == "rss"
        truth_before = statm_rss()
        sample = cpu.read()
        truth_after = statm_rss()
        for value in (sample["used"], sample["reserved"]):
            assert truth_before - MIB <= value <= truth_after + MIB, (value, truth_before)
        assert sample["used"] > 10 * MIB  # a Python process with pytest loaded
        info = cpu.info(sample)
        assert info["name"] == "CPU (RSS)" and info["source"] == "rss"
        assert info["used_bytes"] == sample["used"]
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        assert info["total_bytes"] == total
    finally:
        cpu.close()


@needs_proc
def test_cpu_rss_fallback_cell_delta_matches_statm() -> None:
    cpu = CpuDevice(use_mallinfo2=False)
    try:
        mark = cpu.begin_cell("reset")
        truth_before = statm_rss()
        kept = bytearray(64 * MIB)  # zero-filled by calloc/memset: resident
        truth_after = statm_rss()
        delta, sample = cpu.end_cell(mark, None)
        truth_delta = truth_after - truth_before
        assert truth_delta >= 60 * MIB  # the ground truth itself saw the pages
        assert abs(delta["delta_bytes"] - truth_delta) <= 2 * MIB, (delta, truth_delta)
        assert abs(sample["used"] - truth_after) <= 2 * MIB
        assert delta["peak_delta_bytes"] >= delta["delta_bytes"]
        del kept
    finally:
        cpu.close()


def test_cpu_rss_without_statm_uses_the_rusage_peak() -> None:
    import resource

    cpu = CpuDevice(use_mallinfo2=False)
    cpu.close()  # no /proc/self/statm descriptor: the last resort, ru_maxrss
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    peak_bytes = peak if sys.platform == "darwin" else peak * 1024
    used = cpu.read()["used"]
    assert peak_bytes <= used <= peak_bytes + 4 * MIB

"""In a real kernel with a fragmented heap, without the heap counter (glibc's mallinfo2 walks
~100,000 free chunks: over 10 ms a call), the sampler reads the CPU only as often as its
SAMPLER_DUTY share allows (the other ticks' samples have no ``cpu``, the accelerators' none are
lost) and the cells' deltas stay exact: a cell that keeps a 16 MiB buffer reads +16 MiB, within
malloc's own bookkeeping. With the heap counter (the default) on the same heap, every tick reads
the CPU and every cell's peak is counted."""

from __future__ import annotations

import time

import pytest

from kernel_harness import BOOTSTRAP, KernelHarness
from vramscope.devices.cpu import SAMPLER_DUTY, load_mallinfo2

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(load_mallinfo2() is None, reason="needs glibc mallinfo2"),
]

MIB = 1 << 20
RUNTIME = "__import__('vramscope.runtime', fromlist=['x']).get_runtime()"
FRAGMENT = "_blocks = [bytearray(600 + (i % 7) * 16) for i in range(200_000)]\ndel _blocks[::2]"
IDLE_S = 3.0
#: the first standard extension module (a shared object) that the kernel has not loaded
FRESH_EXTENSION = (
    "next((n for n in ('_sqlite3', '_lzma', '_bz2', '_curses', '_dbm', 'mmap', '_codecs_jp',"
    " '_codecs_kr', 'audioop', '_crypt') if n not in __import__('sys').modules and"
    " str(getattr(__import__('importlib.util').util.find_spec(n), 'origin', '')).endswith('.so')),"
    " None)"
)


def test_slow_heap_sampler_keeps_its_share_and_cells_stay_exact() -> None:
    """Without the heap counter (mallinfo2 walks the heap at every reading)."""
    k = KernelHarness(env={"VRAMSCOPE_HEAP_COUNTER": "0"})
    try:
        assert k.execute(BOOTSTRAP, silent=True)["content"]["status"] == "ok"
        k.comm_data(k.comm_open("stream"), "hello")
        fragmented = k.eval("__import__('time').time()")
        k.run_ok(FRAGMENT)
        k.run_ok("pass")  # its ending reading is the first slow one
        cost = k.eval(f"{RUNTIME}.cpu.read_cost_s")
        assert cost > 0.0003, cost
        start = k.eval("__import__('time').time()")
        time.sleep(IDLE_S)
        ticks = k.eval(
            f"[sorted(s['d']) + sorted('unread:' + d for d in s.get('unread', []))"
            f" for s in {RUNTIME}.ring.snapshot() if s['t'] > {start!r}]"
        )
        since = k.eval(
            f"[sorted(s['d']) for s in {RUNTIME}.ring.snapshot() if s['t'] > {fragmented!r}]"
        )
        sizes = (16 * MIB, 8 * MIB, 16 * MIB)
        for i, size in enumerate(sizes):
            k.run_ok(f"_kept{i} = bytearray({size})")
        deltas = k.eval(f"[r['devices']['cpu']['delta_bytes'] for r in {RUNTIME}.recorder.records]")
    finally:
        k.close()
    with_cpu = sum(1 for devices in ticks if "cpu" in devices)
    assert len(ticks) >= 10, ticks  # the 10 Hz ticks go on
    # throttled: ~IDLE_S * SAMPLER_DUTY / cost reads, not one a tick (~30). The sampler's own
    # reads may cost less than the cell path's one (it throttles on the lesser of its last
    # two): allow reads half as costly, and the first read of the window
    assert with_cpu <= 3 + IDLE_S * SAMPLER_DUTY / (cost / 2), (with_cpu, len(ticks), cost)
    assert any("cpu" in devices for devices in since), since  # ... but it does read
    # a tick that skips the reading says so: the timeline's CPU line goes on through it
    assert all(("cpu" in devices) != ("unread:cpu" in devices) for devices in ticks), ticks
    for delta, size in zip(deltas[-3:], sizes):
        assert abs(delta - size) <= 32 * 1024, (deltas[-3:], sizes)


def test_heap_counter_reads_every_tick_and_counts_exact_cell_peaks() -> None:
    """With the heap counter (the default) on the same fragmented heap: the sampler reads the
    CPU at every tick, a reading costs no heap walk, and each cell's delta and peak are the
    bytes its buffers took (a peak that lasted microseconds too). A cell that imports an
    extension module stays exact, and the count is tied to mallinfo2 again after it."""
    k = KernelHarness()
    try:
        assert k.execute(BOOTSTRAP, silent=True)["content"]["status"] == "ok"
        stream = k.comm_open("stream")
        k.comm_data(stream, "hello")
        if k.eval(f"{RUNTIME}.cpu.source") != "malloc-counter":
            pytest.skip(
                k.eval("__import__('vramscope.devices.heapcount').devices.heapcount.unavailable()")
            )
        k.run_ok(FRAGMENT)
        k.comm_data(stream, "cell")
        cells = [  # (code, delta, peak)
            ("_kept = bytearray(16 * 1024 * 1024)", 16 * MIB, 16 * MIB),
            ("_t = bytearray(24 * 1024 * 1024); del _t", 0, 24 * MIB),
            ("_kept = bytearray(16 * 1024 * 1024)  # again", 0, 16 * MIB),
            ("_kept = None", -16 * MIB, 0),
        ]
        records = []
        for code, _, _ in cells:
            k.run_ok(code)
            records.append(k.comm_data(stream, "cell")["record"]["devices"]["cpu"])
        start = k.eval("__import__('time').time()")
        time.sleep(1.0)
        ticks = k.eval(f"[sorted(s['d']) for s in {RUNTIME}.ring.snapshot() if s['t'] > {start!r}]")
        fresh = k.eval(FRESH_EXTENSION)
        assert fresh, "every candidate extension module is loaded already"
        k.run_ok(f"import {fresh}")  # a shared object not loaded yet
        loaded = k.comm_data(stream, "cell")["record"]["devices"]["cpu"]
        gap = k.eval(f"{RUNTIME}.cpu.in_use() - {RUNTIME}.cpu._walk()")
        cost = k.eval(f"{RUNTIME}.cpu.read_cost_s")
    finally:
        k.close()
    for (code, delta, peak), cpu in zip(cells, records):
        assert cpu["peak_source"] == "exact", (code, cpu)
        assert abs(cpu["delta_bytes"] - delta) <= 16 * 1024, (code, cpu)
        # the count is the process's: what the kernel's other threads (and vramscope's sampler
        # publishing a batch) hold while the cell runs rises with it (seen: +22 KiB)
        assert 0 <= cpu["peak_delta_bytes"] - peak <= 64 * 1024, (code, cpu)
    assert len(ticks) >= 5 and all("cpu" in d for d in ticks), ticks
    assert cost == 0.0
    assert loaded["peak_source"] == "exact", loaded  # patched at its load, the load counted
    assert abs(gap) <= 16 * 1024, gap  # resynchronised with a fresh walk

"""CPU readings that stay cheap on a fragmented heap (issue 19): glibc's mallinfo2 walks every
free chunk (~20 ms at 100,000 of them, as a trained 10,000-module model leaves), so the
sampler calls it without the GIL and at most ``SAMPLER_DUTY`` of its time, and a breakdown
after a cell reuses the cell's ending reading; a cell's own readings stay exact.

Each test runs in a fresh Python process (the fragmented heap would slow every later reading
of this one), fragmenting its heap with 100,000 freed 600-700 byte blocks between live ones.
The ground truths are fresh mallinfo2 readings and the byte sizes of the buffers made.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from vramscope.devices.cpu import load_mallinfo2

pytestmark = pytest.mark.skipif(load_mallinfo2() is None, reason="needs glibc mallinfo2")

BRIDGE = Path(__file__).resolve().parents[2] / "python_bridge"
PRELUDE = f"""
import sys, threading, time
sys.path.insert(0, {str(BRIDGE)!r})
from vramscope.devices.cpu import CpuDevice, SAMPLER_DUTY, SLOW_READ_S
MIB = 1 << 20
# mallinfo2's own path (the heap counter, where it runs, reads without a walk)
cpu, truth = CpuDevice(heap_counter=False), CpuDevice(heap_counter=False)  # truth: fresh readings
cpu.in_use(), truth.in_use()  # (ctypes allocates at a function's first call)
cpu.end_cell(cpu.begin_cell("reset"), None)  # (and procio its buffers at the first cell)
fast_cost = cpu.read_cost_s
blocks = [bytearray(600 + (i % 7) * 16) for i in range(200_000)]
del blocks[::2]  # 100,000 free chunks between live ones: nothing to coalesce
cpu.in_use()
assert cpu.slow, (fast_cost, cpu.read_cost_s)
"""


def _run(body: str) -> None:
    code = PRELUDE + textwrap.dedent(body)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def test_slow_heap_sampler_reads_at_most_its_share_of_time() -> None:
    _run(
        """
        import vramscope.devices.cpu as cpu_module
        cpu_module.SAMPLER_DUTY = SAMPLER_DUTY = 0.05  # a read every ~0.4 s, not every 2 s
        assert cpu.tick() is not None  # slow once: not yet throttled (one call can be a spike)
        start = time.monotonic()
        reads, ticks = [], 0  # (when, the cost estimate the throttle used after it)
        while time.monotonic() - start < 1.5:
            ticks += 1
            now = time.monotonic()
            sample = cpu.tick()
            if sample is not None:
                reads.append((now, cpu.tick_cost_est_s))
                assert sample["used"] > 0 and sample["reserved"] > 0
            time.sleep(0.01)
        assert reads and ticks > 5 * len(reads), (ticks, reads)
        # each read waits its cost estimate / SAMPLER_DUTY before the next
        for (t0, est), (t1, _) in zip(reads, reads[1:]):
            assert est > SLOW_READ_S and t1 - t0 >= est / SAMPLER_DUTY, (reads,)
        """
    )


def test_slow_heap_sampler_calls_without_the_gil() -> None:
    """The sampler's call on a slow heap is the CDLL one (ctypes releases the GIL around it:
    the main thread runs during the walk); a cell's reading holds the GIL (PyDLL)."""
    _run(
        """
        import ctypes
        flags = ctypes._FUNCFLAG_PYTHONAPI
        assert cpu._mallinfo2._flags_ & flags and not cpu._mallinfo2_nogil._flags_ & flags
        calls = []
        nogil = cpu._mallinfo2_nogil
        cpu._mallinfo2_nogil = lambda: calls.append(1) or nogil()
        cpu.tick_cost_s = cpu.tick_cost_est_s = 0.0  # as at the first tick: not known slow
        assert cpu.tick() is not None and not calls
        assert cpu.tick_cost_s > SLOW_READ_S and cpu.tick_cost_est_s == 0.0  # one slow call
        assert cpu.tick() is not None and not calls  # not throttled after one
        assert cpu.tick_cost_est_s > SLOW_READ_S  # two: a slow heap
        cpu._next_tick_read = 0.0
        assert cpu.tick() is not None and calls == [1]
        """
    )


def test_slow_heap_breakdown_reuses_the_ending_reading_and_cells_stay_exact() -> None:
    _run(
        """
        mark = cpu.begin_cell("reset")
        a = bytearray(16 * MIB)
        delta, end = cpu.end_cell(mark, None)
        assert abs(delta["delta_bytes"] - len(a)) <= 16 * 1024, delta

        # the breakdown after the cell: the ending reading, not a new walk
        walks = []
        walk = cpu._mallinfo2
        cpu._mallinfo2 = lambda: walks.append(1) or walk()
        again = cpu.current()
        cpu._mallinfo2 = walk
        assert walks == []
        assert again == end and again["used"] == truth.in_use()

        # the next cell reads again: equal to a fresh reading
        fresh = truth.in_use()
        mark = cpu.begin_cell("reset")
        assert mark.before == fresh, (mark, fresh)
        b = bytearray(8 * MIB)
        delta, end = cpu.end_cell(mark, None)
        assert abs(delta["delta_bytes"] - len(b)) <= 16 * 1024, delta

        # memory that changes between cells, seen by the sampler: read again
        c = bytearray(4 * MIB)
        cpu._next_tick_read = 0.0
        assert cpu.tick() is not None
        assert cpu.current()["used"] == truth.in_use() != end["used"]
        mark = cpu.begin_cell("reset")
        assert mark.before == truth.in_use()
        d = bytearray(2 * MIB)
        delta, _ = cpu.end_cell(mark, None)
        assert abs(delta["delta_bytes"] - len(d)) <= 16 * 1024, delta
        """
    )


FAST_PRELUDE = f"""
import sys, time
sys.path.insert(0, {str(BRIDGE)!r})
from vramscope.devices.cpu import CpuDevice, SLOW_READ_S
cpu = CpuDevice(heap_counter=False)  # mallinfo2's own path
cpu.end_cell(cpu.begin_cell("reset"), None)
assert not cpu.slow, cpu.read_cost_s  # a fresh interpreter's heap: ~1 us a walk
"""


def _run_fast(body: str) -> None:
    """``body`` on a fast heap: a fresh interpreter (a pytest worker's heap is whatever the
    tests before left it: one whose walk takes ~0.3 ms throttled the sampler here)."""
    code = FAST_PRELUDE + textwrap.dedent(body)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]


def test_fast_heap_sampler_reads_every_tick() -> None:
    _run_fast(
        """
        sample = cpu.tick()
        assert sample is not None and cpu.tick() is not None  # every tick reads
        """
    )


def test_one_slow_call_on_a_fast_heap_does_not_throttle_the_sampler() -> None:
    """A single slow mallinfo2 call (the sampler thread preempted or faulting in its walk, as
    on a loaded machine) is not a fragmented heap: the next ticks still read, every one."""
    _run_fast(
        """
        real = cpu._mallinfo2

        def spike():
            end = time.thread_time() + 0.005  # 5 ms of CPU: 16x SLOW_READ_S
            while time.thread_time() < end:
                pass
            return real()

        cpu._mallinfo2 = spike
        assert cpu.tick() is not None
        assert cpu.tick_cost_s > SLOW_READ_S
        cpu._mallinfo2 = real
        assert all(cpu.tick() is not None for _ in range(5))
        """
    )

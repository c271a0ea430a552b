"""The CPU heap counter (vramscope/devices/heapcount.c), in a process of its own: its count
against glibc's own figure (a fresh mallinfo2 walk) and against the sizes of the buffers made,
its high-water mark, libraries loaded later, other threads, and putting malloc's entries back.

Each case runs in a fresh interpreter: the counter patches the process it runs in, and the
ground truth (mallinfo2) is the whole process's, so nothing else of pytest's may run beside it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from vramscope.devices import heapcount
from vramscope.devices.cpu import load_mallinfo2

pytestmark = pytest.mark.skipif(load_mallinfo2() is None, reason="needs glibc mallinfo2")

BRIDGE = Path(__file__).resolve().parents[2] / "python_bridge"
PRELUDE = f"""
import gc, sys, threading
sys.path.insert(0, {str(BRIDGE)!r})
from vramscope.devices import heapcount
from vramscope.devices.cpu import CpuDevice
MIB = 1 << 20
cpu = CpuDevice()
hc = cpu.heap
assert hc is not None, heapcount.unavailable()
walk = cpu._walk
gc.disable()
def gap():  # the count against a fresh walk (walk first: its own buffers are freed after)
    w = walk()
    return hc.read() - w
# mallinfo2 counts the small blocks glibc keeps in its per-thread cache as in use (7 a size at
# most: a few KiB here), the counter as freed: against a walk, that much apart
TCACHE = 16 * 1024
def close(a, b, slack=TCACHE):
    assert abs(a - b) <= slack, (a, b, a - b)
"""


def _run(body: str) -> str:
    code = PRELUDE + textwrap.dedent(body)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_it_starts_here() -> None:
    """This machine builds and loads it (Linux, glibc, a C compiler): the suite tests it."""
    from vramscope.devices.cpu import CpuDevice

    assert CpuDevice().heap is not None, heapcount.unavailable()


def test_the_count_is_what_malloc_handed_out() -> None:
    _run(
        """
        assert hc.slots > 0
        close(gap(), 0)
        start = hc.read()
        kept = bytearray(10 * MIB)  # a block of its own (mmap)
        close(hc.read() - start, 10 * MIB, 8192)
        small = [bytearray(1000) for _ in range(2000)]  # heap chunks
        close(gap(), 0)
        grown = bytearray(100)
        for _ in range(200):
            grown += b"x" * 5000  # realloc, moved and in place
        close(gap(), 0)
        del kept, small, grown
        close(hc.read() - start, 0, 64 * 1024)
        close(gap(), 0)
        """
    )


def test_the_high_water_mark_sees_a_peak_between_readings() -> None:
    _run(
        """
        mark = hc.mark()
        y = bytearray(16 * MIB)
        y = bytearray(16 * MIB)  # the new one is made before the old one goes
        close(hc.peak() - mark, 32 * MIB, 16 * 1024)
        close(hc.read() - hc.offset - mark, 16 * MIB, 16 * 1024)  # the raw count now
        mark = hc.mark()
        del y
        t = bytearray(8 * MIB); del t
        close(hc.peak() - mark, 0, 16 * 1024)  # the mark starts at the count: frees lower it
        """
    )


def test_other_threads_and_a_library_loaded_later_are_counted() -> None:
    _run(
        """
        import importlib.util
        start = hc.read()
        held = []
        th = threading.Thread(target=lambda: held.append(bytearray(12 * MIB)))
        th.start(); th.join()
        close(hc.read() - start, 12 * MIB, 64 * 1024)
        fresh = [  # standard extension modules (shared objects) not loaded yet
            n for n in ("_sqlite3", "_lzma", "_bz2", "_curses", "_dbm", "mmap", "_codecs_jp")
            if n not in sys.modules
            and str(getattr(importlib.util.find_spec(n), "origin", "")).endswith(".so")
        ]
        name = fresh[0]
        slots = hc.slots
        start = hc.read()
        module = __import__(name)  # patched at its load, the load itself counted
        assert hc.rescan() == (False, True) and hc.slots > slots
        close(gap(), 0)
        assert hc.rescan() == (False, False)  # nothing new: one callback
        import ctypes
        other = importlib.util.find_spec(fresh[1]).origin
        native = ctypes.CDLL(None).dlopen  # glibc's dlopen called as a library would
        native.restype, native.argtypes = ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_int]
        assert native(other.encode(), 2)
        assert hc.rescan() == (True, False)  # found by the walk: its loading was not counted
        close(gap(), 0)
        """
    )


def test_unloading_puts_mallocs_entries_back() -> None:
    _run(
        """
        cpu.suspend()
        assert hc.slots == 0
        before = hc.read()
        uncounted = bytearray(8 * MIB)
        close(hc.read(), before, 0)  # nothing counts
        cpu.resume()
        assert hc.slots > 0
        close(gap(), 0)
        start = hc.read()
        counted = bytearray(8 * MIB)
        close(hc.read() - start, 8 * MIB, 8192)
        del uncounted  # made while paused, freed while counting: the count goes down
        close(gap(), 0)
        """
    )

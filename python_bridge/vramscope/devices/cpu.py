"""CPU memory: malloc's in-use bytes (counted, or glibc mallinfo2), RSS as the fallback.

Method (see docs/report-schema.md):
- ``used``: the bytes handed out by malloc, including large mmapped blocks
  (``mallinfo2().uordblks + hblkhd``); it sees frees that RSS never shows. Where the heap
  counter runs (heapcount.py: glibc on Linux, a C compiler once) it is kept at every malloc
  and free, so a reading costs nothing and a cell's peak is exact: the count's high-water mark
  from the cell's start (``peak_source: "exact"``). An extension module imported during the
  cell is counted from its load on (its loading too). A library loaded otherwise is found at
  the cell's end: what it allocated before is read by resynchronising with mallinfo2 and
  added to the peak, which is exact if that is under 1% of it.
  Elsewhere mallinfo2 is read. Under a preloaded or linked jemalloc/tcmalloc/mimalloc (or
  without glibc) mallinfo2 is meaningless: ``used`` is RSS.
- ``reserved``: RSS from ``/proc/self/statm`` read with ``pread`` on a descriptor opened once.
- per-cell peak, sampled (the default): before the cell ``5`` is written to
  ``/proc/self/clear_refs`` (resets VmHWM); after it, the rise of VmHWM over the RSS before the
  cell is one peak candidate; the sampler's highest ``used`` during the cell is another; the
  delta the third. The largest wins. Both files stay open (``pread``/``write`` on kept
  descriptors: ~20 us a cell, not ~45 us).
- per-cell peak, exact (``cpu_peak: "exact"``, devices/exact.py): the highest rise of the
  cell's torch CPU storages, counted op by op, plus what glibc's delta has beyond the
  storages' net change (memory outside torch), never below the delta.

A mallinfo2 call walks every free heap chunk: ~1 us on a fresh heap, ~10-25 ms after a
10,000-module model was built and trained (80,000 free chunks). Its cost is timed at every
call. When slow (over ``SLOW_READ_S``; for the sampler, at its last two calls: one slow call
on a loaded machine is not a fragmented heap): the sampler calls it without the GIL and at
most once per ``cost / SAMPLER_DUTY`` seconds (no CPU sample in between), and the breakdown after a
cell reuses the cell's ending reading while no sampler reading since differed (``current``).
A cell's starting reading is always taken: the kernel's own work between two cells (the
cell's record, the reply, the bridge's messages) changes in-use memory by a few KiB, so the
previous ending reading is not the next cell's start.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import time
from typing import Any, Callable

from ..messages.records import DeviceDelta, DeviceInfo, DeviceSample
from . import heapcount, procio
from .base import CellMark, Device, PeakPolicy, make_delta, window_rise
from .exact import ExactCounter

_OTHER_ALLOCATORS = ("jemalloc", "tcmalloc", "mimalloc")
#: How often the sampler's ticks read RSS (the timeline's "reserved" line for the CPU).
RSS_EVERY_S = 0.5
#: A mallinfo2 call that took more CPU time than this is slow (a fragmented heap).
SLOW_READ_S = 0.0003
#: On a slow heap, the share of one core the sampler's mallinfo2 calls may take: what a
#: read of just under ``SLOW_READ_S`` at the default 10 Hz takes on a fast heap, so that the
#: readings never cost more than 0.3% of a core. (It was 1%: on a kernel with transformers
#: and peft imported, ~0.6-0.9 ms a read, the sampler's thread took 0.82% of a LoRA training
#: loop's wall; the timeline's CPU line is then read ~4 times a second instead of 10.)
SAMPLER_DUTY = 0.003


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def other_allocator(environ: dict[str, str] | None = None, maps: str | None = None) -> str | None:
    """Name of a non-glibc malloc in LD_PRELOAD or mapped into the process, else None."""
    env = os.environ if environ is None else environ
    preload = env.get("LD_PRELOAD", "")
    if maps is None:
        try:
            with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
                maps = fh.read()
        except OSError:
            maps = ""
    for name in _OTHER_ALLOCATORS:
        if name in preload or f"lib{name}" in maps:
            return name
    return None


def load_mallinfo2(release_gil: bool = False) -> Any:
    """glibc's mallinfo2, or None (no glibc, glibc < 2.33, or another malloc in use).

    By default called holding the GIL (``PyDLL``): a ~25 us call that released it would hand
    the GIL to a waiting thread (IOPub, the sampler) and wait to get it back, ~0.1-5 ms. With
    ``release_gil`` (``CDLL``) for the sampler on a slow heap: other threads run meanwhile."""
    if not sys.platform.startswith("linux") or other_allocator() is not None:
        return None
    try:
        lib = ctypes.CDLL(None) if release_gil else ctypes.PyDLL(None)
        func = lib.mallinfo2
    except (OSError, AttributeError):
        return None
    func.restype = _MallInfo2
    func.argtypes = []
    return func


class CpuDevice(Device):
    id = "cpu"
    kind = "cpu"

    def __init__(
        self,
        use_mallinfo2: bool = True,
        exact: Callable[[], bool] | None = None,
        heap_counter: bool = True,
    ) -> None:
        self._mallinfo2 = load_mallinfo2() if use_mallinfo2 else None
        self._mallinfo2_nogil = load_mallinfo2(release_gil=True) if self._mallinfo2 else None
        #: the process's heap counter (shared by every CpuDevice), None: mallinfo2 is read
        self.heap = heapcount.shared(self._walk) if heap_counter and self._mallinfo2 else None
        self.source = "mallinfo2" if self._mallinfo2 is not None else "rss"
        if self.heap is not None:
            self.source = "malloc-counter"
        self._page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
        self._statm_fd: int | None = _open_or_none("/proc/self/statm", os.O_RDONLY)
        self._status_fd: int | None = _open_or_none("/proc/self/status", os.O_RDONLY)
        self._clear_refs_fd: int | None = _open_or_none("/proc/self/clear_refs", os.O_WRONLY)
        self._hwm_resettable = self._clear_refs_fd is not None and self._status_fd is not None
        self.allocator_note = other_allocator() if use_mallinfo2 else None
        self._rss, self._rss_at = 0, -RSS_EVERY_S
        self._exact = exact
        self.counter = ExactCounter()
        #: CPU seconds of the last mallinfo2 call on a cell's path and of the sampler's last
        self.read_cost_s = 0.0
        self.tick_cost_s = 0.0
        #: the lesser of the sampler's last two costs: one slow call (the thread preempted in
        #: its walk, a page fault) is not a slow heap; a fragmented heap makes every call slow
        self.tick_cost_est_s = 0.0
        self._next_tick_read = 0.0
        self._torch_before = False  # torch was imported when the cell began (heap counter)
        self._end: DeviceSample | None = None  # the last cell's ending reading ...
        self._since_end: int | None = None  # ... and the sampler's newest ``used`` since

    def rss(self) -> int:
        if self._statm_fd is None:
            return _rss_fallback()
        try:
            fields = procio.pread(self._statm_fd, 128, 0).split()
            return int(fields[1]) * self._page
        except (OSError, IndexError, ValueError):
            return _rss_fallback()

    def in_use(self) -> int:
        if self.heap is not None:
            return self.heap.read()
        if self._mallinfo2 is None:
            return self.rss()
        start = time.thread_time()
        used = self._walk()
        self.read_cost_s = time.thread_time() - start
        return used

    def walked(self) -> int:
        """A fresh mallinfo2 reading (a heap walk) where glibc has it, else ``in_use``: for a
        reading taken once, around a load the heap counter cannot see whole (``import
        torch``: its libraries' own loads, new threads' storage, glibc's per-thread cache)."""
        return self._walk() if self._mallinfo2 is not None else self.in_use()

    def _walk(self) -> int:
        """mallinfo2's in-use bytes (one walk of the heap's free chunks)."""
        assert self._mallinfo2 is not None
        info = self._mallinfo2()
        return int(info.uordblks + info.hblkhd)

    @property
    def slow(self) -> bool:
        """mallinfo2 took over ``SLOW_READ_S`` at its last call on a cell's path."""
        return self.read_cost_s > SLOW_READ_S

    def read(self) -> DeviceSample:
        return {"used": self.in_use(), "reserved": self.rss()}

    def current(self) -> DeviceSample:
        """The last cell's ending reading while no sampler reading has differed from it
        (what a breakdown after the cell totals), else a fresh one."""
        end, since = self._end, self._since_end
        if self.heap is None and end is not None and since in (None, end["used"]):
            return dict(end)  # type: ignore[return-value]
        return self.read()

    def tick(self) -> DeviceSample | None:
        """``used`` every tick; ``reserved`` (RSS, a /proc read: ~65 us of a thread that has
        just woken, as much as mallinfo2 itself) at most every ``RSS_EVERY_S``, the last
        value in between. The per-cell figures use ``read``: both, fresh. On a slow heap
        mallinfo2 is called without the GIL, and only once its share of the thread's time
        allows (None at the ticks in between): slow means its last two calls were."""
        now = time.monotonic()
        if now - self._rss_at >= RSS_EVERY_S:
            self._rss, self._rss_at = self.rss(), now
        if self.heap is not None:
            used = self.heap.read()
        elif self._mallinfo2 is None:
            used = self.rss()
        elif now < self._next_tick_read:
            return None
        else:
            nogil = self._mallinfo2_nogil
            slow = self.tick_cost_est_s > SLOW_READ_S
            func = nogil if slow and nogil is not None else self._mallinfo2
            start = time.thread_time()  # CPU time: a wait for the GIL is not the call's cost
            info = func()
            cost = time.thread_time() - start
            est = self.tick_cost_est_s = min(cost, self.tick_cost_s)
            self.tick_cost_s = cost
            used = int(info.uordblks + info.hblkhd)
            self._next_tick_read = now + est / SAMPLER_DUTY if est > SLOW_READ_S else 0.0
        self._since_end = used
        return {"used": used, "reserved": self._rss}

    def info(self, sample: DeviceSample | None = None) -> DeviceInfo:
        sample = sample or self.read()
        label = {"malloc-counter": "glibc malloc, counted", "mallinfo2": "glibc mallinfo2"}.get(
            self.source, "RSS"
        )
        return {
            "id": self.id,
            "kind": "cpu",
            "name": f"CPU ({label})",
            "total_bytes": _physical_memory(),
            "used_bytes": sample["used"],
            "reserved_bytes": sample.get("reserved"),
            "initialized": True,
            "source": self.source,
        }

    @property
    def peak_resettable(self) -> bool:
        return self._hwm_resettable

    def begin_cell(self, policy: PeakPolicy) -> CellMark:
        if self.heap is not None:
            self.heap.rescan()  # a library loaded since: patched, the offset resynchronised
            self._torch_before = "torch" in sys.modules
            counted = self.heap.mark()
            before = self.heap.offset + counted
            return CellMark(before, peak_counter_fresh=True, exact=True, counted=counted)
        exact = self._exact is not None and self._exact() and self.source == "mallinfo2"
        exact = exact and self.counter.begin()  # first: its own allocations are not the cell's
        self._hwm_resettable = self._hwm_resettable and _reset_hwm(self._clear_refs_fd)
        self._end = None
        before = self.in_use()
        return CellMark(before=before, baseline=self.rss(), peak_counter_fresh=True, exact=exact)

    def end_cell(self, mark: CellMark, window_max: int | None) -> tuple[DeviceDelta, DeviceSample]:
        if self.heap is not None and mark.counted is not None:
            return self._end_counted(mark)
        counted = self.counter.end() if mark.exact else None
        sample = self.read()
        self._end, self._since_end = dict(sample), None  # type: ignore[assignment]
        after = sample["used"]
        if counted is not None:
            rise, net = counted
            beyond = (after - mark.before) - net  # memory outside torch's storages
            delta = make_delta(mark.before, after, [rise + max(0, beyond)])
            delta["peak_source"] = "exact"
            return delta, sample
        hwm = _vm_hwm(self._status_fd) if self._hwm_resettable else None
        hwm_rise = None if hwm is None else hwm - mark.baseline
        delta = make_delta(mark.before, after, [hwm_rise, window_rise(window_max, mark.before)])
        delta["peak_source"] = "sampled"
        return delta, sample

    def _end_counted(self, mark: CellMark) -> tuple[DeviceDelta, DeviceSample]:
        """The heap counter's figures: the delta, and the count's high-water mark as the peak.
        A shared object that Python imported during the cell was counted from its load on.
        One loaded otherwise (ctypes, a library's own dlopen) was found only now: what it
        allocated before (the resynchronisation's correction, which also holds the few KiB
        of glibc's per-thread cache) is added to the peak, which is then exact only if that
        is under 1% of it."""
        assert self.heap is not None and mark.counted is not None
        offset = self.heap.offset
        found, _ = self.heap.rescan()
        rise = self.heap.peak() - mark.counted
        missed = max(0, self.heap.offset - offset) if found else 0
        sample = self.read()
        delta = make_delta(mark.before, sample["used"], [rise + missed])
        # the cell that imports torch also holds vramscope's own setup for it (its hooks, the
        # devices): ~2-4 MiB that a kernel without vramscope does not allocate
        torch_came = not self._torch_before and "torch" in sys.modules
        exact = missed * 100 <= delta["peak_delta_bytes"] and not torch_came
        delta["peak_source"] = "exact" if exact else "sampled"
        return delta, sample

    def suspend(self) -> None:
        """The bridge is unloaded: the heap counter's allocator entries are put back."""
        if self.heap is not None:
            self.heap.pause()

    def resume(self) -> None:
        """The bridge is loaded (again): the heap counter counts (again)."""
        if self.heap is not None:
            self.heap.resume()

    def close(self) -> None:
        fds = (self._statm_fd, self._status_fd, self._clear_refs_fd)
        self._statm_fd = self._status_fd = self._clear_refs_fd = None
        self._hwm_resettable = False
        for fd in fds:
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)


def _open_or_none(path: str, flags: int) -> int | None:
    try:
        return os.open(path, flags)
    except OSError:
        return None


def _reset_hwm(fd: int | None) -> bool:
    """Reset VmHWM of this process through ``/proc/self/clear_refs`` (open for writing);
    False when that is not possible."""
    if fd is None:
        return False
    try:
        procio.write(fd, b"5")
        return True
    except OSError:
        return False


def _vm_hwm(fd: int | None) -> int | None:
    """VmHWM in bytes from ``/proc/self/status`` (an open descriptor), None if unreadable."""
    if fd is None:
        return None
    try:
        status = procio.pread(fd, 8192, 0)
        start = status.index(b"VmHWM:") + 6
        return int(status[start : status.index(b"\n", start)].split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return None


def _rss_fallback() -> int:
    try:
        import resource

        # ru_maxrss is a peak, not current: only used where /proc is missing (macOS: bytes)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(peak if sys.platform == "darwin" else peak * 1024)
    except (ImportError, OSError):
        return 0


def _physical_memory() -> int | None:
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None

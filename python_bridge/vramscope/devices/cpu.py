"""CPU memory: glibc mallinfo2 in-use bytes (exact), RSS as the fallback and per-cell VmHWM.

Method (see docs/report-schema.md):
- ``used``: ``mallinfo2().uordblks + hblkhd`` (bytes handed out by malloc, including large
  mmapped blocks); it sees frees that RSS never shows. Under a preloaded or linked
  jemalloc/tcmalloc/mimalloc (or without glibc) mallinfo2 is meaningless: ``used`` is RSS.
- ``reserved``: RSS from ``/proc/self/statm`` read with ``pread`` on a descriptor opened once.
- per-cell peak: before the cell ``5`` is written to ``/proc/self/clear_refs`` (resets VmHWM);
  after it, the rise of VmHWM over the RSS before the cell is one peak candidate; the sampler's
  highest ``used`` during the cell is another; the delta the third. The largest wins. Both
  files stay open (``pread``/``write`` on kept descriptors: ~20 us a cell, not ~45 us).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import time
from typing import Any

from ..protocol import DeviceDelta, DeviceInfo, DeviceSample
from . import procio
from .base import CellMark, Device, PeakPolicy, make_delta, window_rise

_OTHER_ALLOCATORS = ("jemalloc", "tcmalloc", "mimalloc")
#: How often the sampler's ticks read RSS (the timeline's "reserved" line for the CPU).
RSS_EVERY_S = 0.5


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


def load_mallinfo2() -> Any:
    """glibc's mallinfo2, or None (no glibc, glibc < 2.33, or another malloc in use)."""
    if not sys.platform.startswith("linux") or other_allocator() is not None:
        return None
    try:
        # PyDLL: called holding the GIL. A ~25 us call that released it would hand the GIL
        # to a waiting thread (IOPub, the sampler) and wait to get it back, ~0.1-5 ms.
        func = ctypes.PyDLL(None).mallinfo2
    except (OSError, AttributeError):
        return None
    func.restype = _MallInfo2
    func.argtypes = []
    return func


class CpuDevice(Device):
    id = "cpu"
    kind = "cpu"

    def __init__(self, use_mallinfo2: bool = True) -> None:
        self._mallinfo2 = load_mallinfo2() if use_mallinfo2 else None
        self.source = "mallinfo2" if self._mallinfo2 is not None else "rss"
        self._page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
        self._statm_fd: int | None = _open_or_none("/proc/self/statm", os.O_RDONLY)
        self._status_fd: int | None = _open_or_none("/proc/self/status", os.O_RDONLY)
        self._clear_refs_fd: int | None = _open_or_none("/proc/self/clear_refs", os.O_WRONLY)
        self._hwm_resettable = self._clear_refs_fd is not None and self._status_fd is not None
        self.allocator_note = other_allocator() if use_mallinfo2 else None
        self._rss, self._rss_at = 0, -RSS_EVERY_S

    def rss(self) -> int:
        if self._statm_fd is None:
            return _rss_fallback()
        try:
            fields = procio.pread(self._statm_fd, 128, 0).split()
            return int(fields[1]) * self._page
        except (OSError, IndexError, ValueError):
            return _rss_fallback()

    def in_use(self) -> int:
        if self._mallinfo2 is not None:
            info = self._mallinfo2()
            return int(info.uordblks + info.hblkhd)
        return self.rss()

    def read(self) -> DeviceSample:
        return {"used": self.in_use(), "reserved": self.rss()}

    def tick(self) -> DeviceSample:
        """``used`` every tick; ``reserved`` (RSS, a /proc read: ~65 us of a thread that has
        just woken, as much as mallinfo2 itself) at most every ``RSS_EVERY_S``, the last
        value in between. The per-cell figures use ``read``: both, fresh."""
        now = time.monotonic()
        if now - self._rss_at >= RSS_EVERY_S:
            self._rss, self._rss_at = self.rss(), now
        return {"used": self.in_use(), "reserved": self._rss}

    def info(self, sample: DeviceSample | None = None) -> DeviceInfo:
        sample = sample or self.read()
        label = "glibc mallinfo2" if self.source == "mallinfo2" else "RSS"
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
        self._hwm_resettable = self._hwm_resettable and _reset_hwm(self._clear_refs_fd)
        return CellMark(before=self.in_use(), baseline=self.rss(), peak_counter_fresh=True)

    def end_cell(self, mark: CellMark, window_max: int | None) -> tuple[DeviceDelta, DeviceSample]:
        sample = self.read()
        hwm = _vm_hwm(self._status_fd) if self._hwm_resettable else None
        hwm_rise = None if hwm is None else hwm - mark.baseline
        delta = make_delta(
            mark.before, sample["used"], [hwm_rise, window_rise(window_max, mark.before)]
        )
        return delta, sample

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

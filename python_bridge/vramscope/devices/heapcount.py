"""The CPU heap counter (heapcount.c): malloc's in-use bytes in O(1), and exact cell peaks.

glibc's mallinfo2 walks every free heap chunk: ~1 ms on the heap a 1,000-module model leaves,
~20 ms at 10,000 modules, twice a cell. The counter keeps the same figure (bytes handed out by
malloc, large mmapped blocks included) up to date at every allocation and free, so a reading
is one load, and its high-water mark is every cell's exact peak, at no cost to the cell.

It is C: built here once per machine with the system C compiler (as Triton and Inductor build
their helpers) into ``$XDG_CACHE_HOME/vramscope`` and loaded into the kernel. Without glibc, a
compiler, or with ``VRAMSCOPE_HEAP_COUNTER=0`` in the kernel's environment, the CPU device
reads mallinfo2 as before (``unavailable`` says why).

The count is kept relative; ``offset`` ties it to mallinfo2's figure, read once when the
counter starts and again whenever a shared object was loaded since the last check (what it
allocated while loading, before its entries were patched, is not in the count).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Optional

SOURCE = Path(__file__).with_name("heapcount.c")
ENV_SWITCH = "VRAMSCOPE_HEAP_COUNTER"
_COMPILE_TIMEOUT_S = 60

#: the counter of this process once started, or why there is none
_STATE: dict[str, Any] = {}


class HeapCounter:
    """One per process (the patched entries point into one library)."""

    def __init__(self, lib: Any, mallinfo2_used: Callable[[], int]) -> None:
        self._lib = lib
        self._used = mallinfo2_used
        self.offset = 0
        self.sync()

    @property
    def slots(self) -> int:
        """How many allocator entries point at the counter's wrappers now."""
        return int(self._lib.vs_slots())

    def sync(self) -> None:
        """Tie the count to a fresh mallinfo2 reading (one heap walk)."""
        used = self._used()
        self.offset = used - int(self._lib.vs_current())

    def read(self) -> int:
        """Malloc's in-use bytes now."""
        return self.offset + int(self._lib.vs_current())

    def rescan(self) -> tuple[bool, bool]:
        """Patch the objects loaded since the last call: (any loaded otherwise than by Python's
        import, whose loading was not counted; any imported, whose loading was). The offset is
        resynchronised when either."""
        found, imported = int(self._lib.vs_rescan()) > 0, int(self._lib.vs_imported()) > 0
        if found or imported:
            self.sync()
        return found, imported

    def pause(self) -> None:
        """Put the allocator entries back as they were (the bridge unloaded): nothing counts
        until ``resume``."""
        self._lib.vs_unpatch()

    def resume(self) -> None:
        """Patch every loaded object again (none, where nothing was put back) and
        resynchronise."""
        if self.rescan() == (False, False):
            self.sync()

    def mark(self) -> int:
        """Start a high-water mark here; the raw count (compare with ``peak``)."""
        return int(self._lib.vs_mark())

    def peak(self) -> int:
        """The raw count's highest value since the last ``mark``."""
        return int(self._lib.vs_peak())


def shared(mallinfo2_used: Callable[[], int]) -> Optional[HeapCounter]:
    """This process's counter, started on the first call; None where it cannot run."""
    if "counter" not in _STATE:
        _STATE["counter"], _STATE["why"] = _start(mallinfo2_used)
    counter: Optional[HeapCounter] = _STATE["counter"]
    return counter


def unavailable() -> Optional[str]:
    """Why this process has no counter (None: it has one, or none was asked for yet)."""
    return _STATE.get("why")


def _start(mallinfo2_used: Callable[[], int]) -> tuple[Optional[HeapCounter], Optional[str]]:
    if os.environ.get(ENV_SWITCH, "1").strip().lower() in ("0", "false", "no", "off"):
        return None, f"switched off ({ENV_SWITCH}=0)"
    if not sys.platform.startswith("linux") or platform.machine() not in ("x86_64", "aarch64"):
        return None, "needs Linux on x86_64 or aarch64"
    try:
        path = _built()
        lib = ctypes.PyDLL(str(path))  # never closed: patched entries point into it
        for name in ("vs_current", "vs_peak", "vs_mark"):
            getattr(lib, name).restype = ctypes.c_longlong
            getattr(lib, name).argtypes = []
        for name in ("vs_rescan", "vs_imported", "vs_slots", "vs_unpatch", "vs_ready"):
            getattr(lib, name).restype = ctypes.c_int
            getattr(lib, name).argtypes = []
        lib.vs_rescan()
        if not lib.vs_ready():
            return None, "libc.so.6 is not glibc (its allocator functions were not found)"
        return HeapCounter(lib, mallinfo2_used), None
    except Exception as exc:  # never into the kernel: mallinfo2 readings instead
        return None, f"{type(exc).__name__}: {exc}"[:300]


def _cache_dir() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "vramscope"


def _built() -> Path:
    """The library for this source and machine, compiled once and cached."""
    source = SOURCE.read_bytes()
    key = hashlib.sha256(source + platform.machine().encode()).hexdigest()[:16]
    out = _cache_dir() / f"heapcount-{key}.so"
    if out.exists():
        return out
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise RuntimeError("no C compiler (cc) to build the heap counter")
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".heapcount-", suffix=".so", dir=out.parent)
    os.close(fd)
    try:
        done = subprocess.run(
            [cc, "-O2", "-shared", "-fPIC", "-o", tmp, str(SOURCE)],
            capture_output=True,
            text=True,
            timeout=_COMPILE_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{cc} failed: {done.stderr.strip()[-200:]}")
        os.replace(tmp, out)  # another kernel building it at once: either copy is whole
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out

"""Reads and writes of ``/proc/self`` files that keep the GIL.

``os.pread`` and ``os.write`` release the GIL around their system call, as every blocking
call must. For a 2-20 us read of ``/proc/self/statm`` or ``status`` that is the expensive
part: while the main thread is in the call another thread (ipykernel's IOPub thread, the
sampler) takes the GIL, and the main thread then waits until that thread gives it back.
Measured in a kernel during a Run All of quick cells: ~200 us a call (one cell's hooks make
five), against ~2 us for the read itself. These calls go through libc with ctypes'
``PyDLL``, which holds the GIL. They never block: /proc files are generated in memory.
Elsewhere than Linux (or without a usable libc) they fall back to the ``os`` functions.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from typing import Any, Optional


def _libc_calls() -> Optional[tuple[Any, Any]]:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.PyDLL(None, use_errno=True)
        pread, write = libc.pread, libc.write
    except (OSError, AttributeError):
        return None
    pread.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long]
    pread.restype = ctypes.c_ssize_t
    write.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
    write.restype = ctypes.c_ssize_t
    return pread, write


_CALLS = _libc_calls()
#: one read buffer per thread and size (the main thread's hooks and the sampler's thread
#: read at once; a buffer made per call cost as much as the read of a small /proc file)
_BUFFERS = threading.local()


def _buffer(size: int) -> Any:
    buffers = getattr(_BUFFERS, "by_size", None)
    if buffers is None:
        buffers = _BUFFERS.by_size = {}
    buf = buffers.get(size)
    if buf is None:
        buf = buffers[size] = ctypes.create_string_buffer(size)
    return buf


def pread(fd: int, size: int, offset: int = 0) -> bytes:
    """Up to ``size`` bytes of ``fd`` from ``offset``, holding the GIL; raises OSError."""
    if _CALLS is None:
        return os.pread(fd, size, offset)
    buf = _buffer(size)
    got = _CALLS[0](fd, buf, size, offset)
    if got < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return ctypes.string_at(buf, got)


def write(fd: int, data: bytes) -> int:
    """Write ``data`` to ``fd``, holding the GIL; the bytes written; raises OSError."""
    if _CALLS is None:
        return os.write(fd, data)
    got = _CALLS[1](fd, data, len(data))
    if got < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return int(got)

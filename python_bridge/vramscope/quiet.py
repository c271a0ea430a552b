"""Keep ipykernel's control thread out of a cell's figures.

CPU memory is read for the whole process (glibc's mallinfo2), so what another thread
allocates or frees while a cell runs counts in that cell. JupyterLab's debugger asks the
kernel for its state (``debugInfo``) and module list (``modules``) after every cell, and
ipykernel answers on its control thread: with torch imported an answer builds and frees
~0.3-2 MiB. In a Run All the request arrives just as the next cell starts, and an answer
that straddles the cell's start (built before, freed inside) made a 64 MiB tensor read
+63.0..63.7 MiB. So before a cell's starting and ending readings the recorder waits, at most
``MAX_WAIT_S``, until the control thread is idle (blocked in its selector: its innermost
Python frame is ``selectors.*.select``).
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Optional

CONTROL_THREAD_NAME = "Control"  # ipykernel.thread.CONTROL_THREAD_NAME
MAX_WAIT_S = 0.03
_POLL_S = 0.0005

_control: Optional[threading.Thread] = None


def _control_thread() -> Optional[threading.Thread]:
    global _control
    if _control is None or not _control.is_alive():
        _control = next((t for t in threading.enumerate() if t.name == CONTROL_THREAD_NAME), None)
    return _control


def control_busy() -> bool:
    """ipykernel's control thread is running Python code (answering a request)."""
    thread = _control_thread()
    if thread is None or thread.ident is None or thread is threading.current_thread():
        return False
    frame = sys._current_frames().get(thread.ident)
    if frame is None:
        return False
    code = frame.f_code
    return not (code.co_name == "select" and code.co_filename.endswith("selectors.py"))


def wait_control_idle(max_wait_s: float = MAX_WAIT_S) -> float:
    """Wait until the control thread is idle, at most ``max_wait_s``; the seconds waited.
    Never raises."""
    start = time.perf_counter()
    try:
        while control_busy() and time.perf_counter() - start < max_wait_s:
            time.sleep(_POLL_S)
    except Exception:
        pass
    return time.perf_counter() - start

"""Keep ipykernel's control and IOPub threads out of a cell's figures.

CPU memory is read for the whole process (glibc's mallinfo2), so what another thread
allocates or frees while a cell runs counts in that cell. JupyterLab's debugger asks the
kernel for its state (``debugInfo``) and module list (``modules``) after every cell, and
ipykernel answers on its control thread: with torch imported an answer builds and frees
~0.3-2 MiB. In a Run All the request arrives just as the next cell starts, and an answer
that straddles the cell's start (built before, freed inside) made a 64 MiB tensor read
+63.0..63.7 MiB. So before a cell's starting and ending readings the recorder waits, at most
``MAX_WAIT_S``, until the control thread is idle (blocked in its selector: its innermost
Python frame is ``selectors.*.select``).

The answer itself outlives the control thread's work: a message frame of 64 KiB or more
(the ``modules`` list is ~300 KiB) is sent zero-copy, and pyzmq keeps the bytes until libzmq
has sent them, then drops them on its garbage-collector thread. Measured in a browser Run
All, the frame held at the 64 MiB cell's start reading and freed ~0.3 ms into the cell made
it read +63.7 MiB; a frame built during the cell and still held at its end, +64.3 MiB. So the
wait also covers these frames (``pending_frames``: pyzmq's ``zmq.utils.garbage.gc.refs``),
and what is still held at a reading is left out of it (``settled``): kernel machinery's
memory never lands in a cell.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections import deque
from typing import Callable, Optional, TypeVar

T = TypeVar("T")

CONTROL_THREAD_NAME = "Control"  # ipykernel.thread.CONTROL_THREAD_NAME
#: Answering ``modules`` took 30-60 ms of the control thread on a loaded 2-core machine
#: (measured in a browser Run All); a wait bounded at 30 ms let one in 6 runs read +63.7 MiB.
#: Only a busy control thread or a held frame is waited for: ~0 ms otherwise.
MAX_WAIT_S = 0.2
#: libzmq's I/O thread writes a queued message and frees its copy well within this
SENT_SETTLE_S = 0.002
_POLL_S = 0.0005

_control: Optional[threading.Thread] = None


def _control_thread() -> Optional[threading.Thread]:
    """ipykernel's control thread, found once (again once it is gone: ``control_busy``).
    ``is_alive()`` is asked only when the thread looks busy, the rare case."""
    global _control
    if _control is None:
        _control = next((t for t in threading.enumerate() if t.name == CONTROL_THREAD_NAME), None)
    return _control


def control_busy() -> bool:
    """ipykernel's control thread is running Python code (answering a request)."""
    global _control
    thread = _control_thread()
    if thread is None or thread.ident is None or thread is threading.current_thread():
        return False
    frame = sys._current_frames().get(thread.ident)
    if frame is None:  # the thread ended: look for it again next time
        _control = None
        return False
    code = frame.f_code
    if code.co_name == "select" and code.co_filename.endswith("selectors.py"):
        return False
    if not thread.is_alive():  # ended, and its ident reused by another thread
        _control = None
        return False
    return True


def wait_control_idle(max_wait_s: float = MAX_WAIT_S) -> float:
    """Wait until the control thread is idle, at most ``max_wait_s``; the seconds waited.
    Never raises."""
    return _wait_while(control_busy, max_wait_s)


#: The waits that ended at their bound with the kernel still busy, newest last: (when, what
#: was still busy). A reading taken then may hold the kernel's own bytes; the browser tests
#: print these beside a figure that is off.
TIMED_OUT: deque[tuple[float, str]] = deque(maxlen=32)


def _wait_while(busy: Callable[[], bool], max_wait_s: float) -> float:
    start = time.perf_counter()
    try:
        while busy():
            if time.perf_counter() - start >= max_wait_s:
                TIMED_OUT.append((time.time(), _busy_with()))
                break
            time.sleep(_POLL_S)
    except Exception:
        pass
    return time.perf_counter() - start


def _busy_with() -> str:
    """What keeps the kernel busy now, in words."""
    parts = [
        name
        for name, check in (
            ("control thread", control_busy),
            ("control reply queued", control_sending),
            ("frames held", lambda: bool(pending_frames())),
            ("iopub queue", iopub_sending),
        )
        if check()
    ]
    return ", ".join(parts) or "nothing now"


def pending_frames() -> dict[int, int]:
    """pyzmq's zero-copy frames that libzmq has not released yet: ``id -> bytes`` (the
    malloc'd size of the object kept for the frame). Empty without pyzmq; never raises."""
    garbage = sys.modules.get("zmq.utils.garbage")
    refs = getattr(getattr(garbage, "gc", None), "refs", None)
    if not isinstance(refs, dict):
        return {}
    for _ in range(3):
        try:
            held = [ref.obj for ref in list(refs.values())]  # popped by pyzmq's thread
            return {id(obj): _footprint(obj) for obj in held}
        except RuntimeError:  # the dict changed size while being copied
            continue
        except Exception:
            return {}
    return {}


def _footprint(obj: object) -> int:
    try:
        if isinstance(obj, memoryview):
            base = obj.obj
            return sys.getsizeof(base) if isinstance(base, (bytes, bytearray)) else obj.nbytes
        if isinstance(obj, (bytes, bytearray)):
            return sys.getsizeof(obj)
        return memoryview(obj).nbytes  # type: ignore[arg-type]
    except Exception:
        return 0


def control_sending() -> bool:
    """ipykernel's control stream has replies queued to send. A ``ZMQStream`` sends from its
    thread's event loop: the control thread is back in its selector (idle to
    ``control_busy``) while the ``modules`` reply's ~300 KiB waits in the stream's queue, then
    sent and freed inside the next cell (measured: a 64 MiB cell read +63.71 MiB, 1 Run All in
    7 under load)."""
    stream = _control_stream()
    sending = getattr(stream, "sending", None)
    try:
        return bool(sending()) if callable(sending) else False
    except Exception:
        return False


def _control_stream() -> Optional[object]:
    return getattr(_kernel(), "control_stream", None)


def in_kernel() -> bool:
    """This process runs an ipykernel kernel (not a terminal IPython, not a plain script)."""
    return _kernel() is not None


def _kernel() -> Optional[object]:
    """ipykernel's running kernel: the ``Kernel`` singleton's instance, read from the class
    (traitlets' ``initialized()``/``instance()`` cost more than the checks that ask)."""
    module = sys.modules.get("ipykernel.kernelbase")
    kernel_cls = getattr(module, "Kernel", None)
    if kernel_cls is None:
        return None
    try:
        found = kernel_cls.__dict__.get("_instance")
        if found is not None and isinstance(found, kernel_cls):
            return found
        if not kernel_cls.initialized():
            return None
        return kernel_cls.instance()
    except Exception:
        return None


def iopub_sending() -> bool:
    """ipykernel's IOPub thread has messages queued to send. A message sent from another
    thread (the previous cell's ``cell`` message, published just before the next cell's
    starting reading in a Run All) is built there and freed on the IOPub thread once sent.
    Only ``settle_sent`` waits for it: at every cell's readings it would also wait for the
    cell's own ``execute_input`` and output, which a plain kernel frees inside the cell."""
    events = getattr(getattr(_kernel(), "iopub_thread", None), "_events", None)
    try:
        return bool(events)
    except Exception:
        return False


def open_iopub_pipe(max_wait_s: float = MAX_WAIT_S) -> None:
    """Give the calling thread its IOPub pipe now. ipykernel gives every thread that sends
    on IOPub a zmq socket of its own (``IOPubThread._event_pipe``: ~36 KiB of libzmq's
    memory), built at the thread's first message: a bridge thread calls this as it starts,
    so that its first message, maybe sent while a cell runs, builds nothing in the cell.
    ``IOPubThread.schedule`` of a call builds it; waiting (at most ``max_wait_s``) until the
    IOPub thread has run that call covers its side too (taking in the new pipe). Never
    raises."""
    iopub = getattr(_kernel(), "iopub_thread", None)
    schedule = getattr(iopub, "schedule", None)
    if callable(schedule):
        done = threading.Event()
        with contextlib.suppress(Exception):
            schedule(done.set)
            done.wait(max_wait_s)


def kernel_busy() -> bool:
    """The control thread answers a request or has a reply queued, or a sent frame is still
    held by pyzmq."""
    return control_busy() or control_sending() or bool(pending_frames())


def wait_kernel_quiet(max_wait_s: float = MAX_WAIT_S) -> float:
    """Wait until :func:`kernel_busy` is False, at most ``max_wait_s``; the seconds waited.
    Never raises."""
    return _wait_while(kernel_busy, max_wait_s)


def settle_sent(settle_s: float = SENT_SETTLE_S) -> None:
    """Messages the bridge sent just now (the previous cell's ``cell`` message, sent at this
    cell's start in a Run All): wait until the IOPub thread has sent them, then ``settle_s``
    more. A frame under 64 KiB is copied by libzmq, and the copy is freed on libzmq's own I/O
    thread once written, with no sign in Python: freed inside the cell, it read a 0.12 MiB
    cell 2 KiB low in some of 20 ``vramscope profile`` runs; none in 20 with this wait."""
    _wait_while(lambda: kernel_busy() or iopub_sending(), MAX_WAIT_S)
    time.sleep(settle_s)


def settled(read: Callable[[], T], tries: int = 3) -> tuple[T, int]:
    """``read()``, and the bytes of the frames pyzmq held during it: the same frames before
    and after the read (one released in between is read again, at most ``tries`` times)."""
    held = pending_frames()
    value = read()
    for _ in range(tries - 1):
        after = pending_frames()
        if after.keys() == held.keys():
            break
        held = after
        value = read()
    return value, sum(held.values())

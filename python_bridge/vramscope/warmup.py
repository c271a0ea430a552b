"""Kernel machinery that allocates once, at its first use, set up before the first measured
cell instead of inside whichever cell that use falls in.

CPU memory is counted for the whole process, so a one-time setup of the kernel's own threads
lands in the cell that runs while it happens, and that depends on timing, not on the cell.
Measured in a Run All of ``import torch`` / a model and an Adam step / a 64 MiB tensor:

- pyzmq starts its garbage-collector thread (a thread, a PULL socket bound to it, a PUSH
  socket connected from the sender: ~100 KiB) at the first zero-copy send. With JupyterLab's
  debugger that is the first ``modules`` reply, answered on the control thread while the next
  cell runs: usually inside the model cell, but on a loaded machine inside the 64 MiB cell,
  which read +64.103 MiB (3 of ~50 runs). ``zmq_gc`` makes a zero-copy frame and drops it:
  the same setup, once.
- IPython's history writer thread opens its own sqlite connection, and its first statement
  reads the schema and allocates the connection's page cache (~92 KiB). Its first write is
  the first stored cell's input, written while that cell runs, or later on a loaded
  machine: the first cell of a kernel forked with torch imported read ``import torch`` as
  +96 KiB, and it can fall into a later cell. ``history_writer`` runs one read on that
  connection (the writer thread's own; IPython opens it with ``check_same_thread`` off, and
  SQLite serialises the two threads' calls: a read takes no write lock).

Not covered: IPython stops its history writer before every ``os.fork`` (a DataLoader's
fork workers) and starts a new one, with a new connection, at the next stored cell, inside
it; and the read waits (sqlite's busy timeout, 5 s) while another process commits to the same
history file.

``prepare`` runs both; each is done once (a step whose object is not there yet, such as a
history thread still connecting, is tried again at the next cell's start). Never raises.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

from . import quiet

#: what a read on the history writer's connection selects (IPython's own table)
HISTORY_READ = "SELECT 1 FROM history LIMIT 1"


def zmq_gc() -> bool:
    """pyzmq's garbage collector is running (started here if it was not); False: no pyzmq
    in this process yet (nothing to set up)."""
    zmq = sys.modules.get("zmq")
    garbage = sys.modules.get("zmq.utils.garbage")
    if zmq is None or not quiet.in_kernel():
        return False  # no kernel (a terminal IPython): no sends, nothing to set up
    collector = getattr(garbage, "gc", None)
    if collector is not None and collector.is_alive() and getattr(collector, "_push", None):
        return True
    frame = zmq.Frame(b"vramscope", copy=False)  # zero-copy: gc thread, sockets, mutex
    del frame  # released through the collector, as a sent frame is
    return True


def history_writer(shell: Any) -> bool:
    """The history writer's connection has read its schema and page cache; True also where
    there is nothing to set up (no history thread, history in memory or off)."""
    manager = getattr(shell, "history_manager", None)
    thread = getattr(manager, "save_thread", None)
    if manager is None or thread is None or not getattr(manager, "enabled", False):
        return True
    db = getattr(thread, "db", None)
    if db is None:
        return not thread.is_alive()  # still connecting: again at the next cell
    db.execute(HISTORY_READ).fetchall()
    return True


class Warmup:
    """The steps not done yet; ``prepare`` tries them (install, and each cell's start until
    all are done: a plain attribute check after that)."""

    def __init__(self, shell: Any) -> None:
        self._steps: list[Callable[[], bool]] = [zmq_gc, lambda: history_writer(shell)]

    @property
    def done(self) -> bool:
        return not self._steps

    def prepare(self) -> None:
        left = []
        for step in self._steps:
            try:
                finished = step()
            except Exception:
                finished = True  # not this kernel's kind of machinery: never tried again
            if not finished:
                left.append(step)
        self._steps = left

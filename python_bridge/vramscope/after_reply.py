"""Run a cell's follow-up work (its ``cell`` message, model insight) after its execute reply.

IPython's ``post_run_cell`` hooks run before ipykernel sends the execute reply, so whatever
they do adds to every cell's round trip (measured: ~0.3 ms to send the ``cell`` message,
~1.3 ms of model insight with torch imported). ``AfterReply`` queues that work and runs it
from a callback on the kernel's event loop, which gets to run once the reply has gone out.
The callback waits for the kernel to stay idle a little longer (``delay_s``, 30 ms): on a busy
machine the front end and the server need the CPU right then to show the cell as done, and the
follow-up work (model insight with torch imported: ~0.3-2 ms) would otherwise compete with
them for it; and a client that sends cells back to back would find it in its way.

The work must never overlap another cell's measurement: a cell that starts before the
callback ran (a queued "Run All") calls ``flush()`` in its ``pre_run_cell``, before taking
its own starting readings, and a callback that fires while a cell is running (an async cell
awaiting) leaves the work queued for that cell's end. Without a running event loop (a plain
IPython shell) the work runs at once, as it would in the hook.

The callback waits for ``delay_s`` of *idleness*: when another cell ended since the work was
queued (a Run All: the requests wait in the kernel's socket, and each cell's reply is followed
at once by the next cell), it waits again from that cell's end. Measured in a Run All of
``pass`` cells with torch imported: firing ``delay_s`` after the first reply ran the work
between nearly every two cells (a pass cell's round trip takes longer than ``delay_s``),
~1 ms of model insight and a one-record ``cell`` message each time. The records do not wait
for the Run All to end: a cell starting when the oldest has waited its limit sends them
(vramscope.cell_outbox).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable

from . import gcpause

Job = Callable[[], None]

#: How long the kernel must have been idle (no cell ended since) before the follow-up work
#: runs. A client that runs cells back to back (nbclient, papermill, ``vramscope profile``)
#: sends the next request a few ms after each reply; with 5 ms the work ran in nearly every
#: such gap and the next request waited for it (a ``pass`` cell beside a 1,000-module model:
#: +1.7 ms a cell against a plain kernel, +0.7 ms with 50 ms). 30 ms covers those gaps, so
#: their records go out together (vramscope.cell_outbox); a person's next cell comes far
#: later, and a footer 30 ms after the reply is as immediate to them.
DELAY_S = 0.03


class AfterReply:
    def __init__(
        self,
        busy: Callable[[], bool],
        on_error: Callable[[BaseException], None],
        delay_s: float = DELAY_S,
    ) -> None:
        """``busy()``: a cell is running; ``on_error``: gets what a job raised."""
        self._busy = busy
        self._on_error = on_error
        self._delay_s = delay_s
        self._jobs: list[tuple[str | None, Job]] = []
        self._handle: Any = None
        self._loop: Any = None  # the event loop the callback is on
        #: when work was last queued from outside a flush (a cell's end), monotonic seconds
        self._queued_at = 0.0
        self._flushing = False

    @property
    def pending(self) -> int:
        return len(self._jobs)

    def submit(self, job: Job, key: str | None = None) -> None:
        """Queue ``job`` to run after the current execute reply (at once without a loop);
        a ``key`` replaces the pending job with the same key."""
        if key is not None:
            self._jobs = [(k, j) for k, j in self._jobs if k != key]
        self._jobs.append((key, job))
        if not self._flushing:  # a job queuing more work is not a cell ending
            self._queued_at = time.monotonic()
        if not self._schedule(self._delay_s):
            self.flush()  # no loop to run it later (a plain IPython shell): at once

    def flush(self, keep_keyed: bool = False) -> None:
        """Run the queued work now (a cell is about to start): unkeyed work first, oldest
        first, then keyed work, unless ``keep_keyed`` keeps it queued for an idle kernel.
        Unkeyed work may submit keyed work (the cell message's job queues the insight)."""
        if not keep_keyed or any(key is None for key, _ in self._jobs):
            self._flushing = True
            try:
                self._run_jobs(keep_keyed)
            finally:
                self._flushing = False
        # the callback stays while work is kept (a cell starting in a run of quick cells:
        # not cancelled and made again at every cell); it waits for idleness itself
        if not self._jobs:
            self._cancel_callback()
        else:
            self._schedule(self._delay_s)

    def _run_jobs(self, keep_keyed: bool) -> None:
        with gcpause.paused():
            self._run_queue(keep_keyed)

    def _run_queue(self, keep_keyed: bool) -> None:
        while self._jobs:
            index = next((i for i, (key, _) in enumerate(self._jobs) if key is None), None)
            if index is None:
                if keep_keyed:
                    break
                index = 0
            _, job = self._jobs.pop(index)
            try:
                job()
            except Exception as exc:
                self._on_error(exc)

    def _schedule(self, delay_s: float) -> bool:
        """The callback in ``delay_s``, on the running loop, unless one is due there already
        (one on a loop that no longer runs, as IPython's for a cell with a top-level
        ``await`` in a terminal, is replaced). False, and nothing done, without a running
        loop."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        if self._handle is not None and self._loop is loop:
            return True
        self._cancel_callback()
        self._handle = loop.call_later(delay_s, self._fire)
        self._loop = loop
        return True

    def discard(self) -> None:
        """Drop the queued work (the bridge is being unloaded)."""
        self._cancel_callback()
        self._jobs.clear()

    def _fire(self) -> None:
        self._handle = None
        if self._busy():
            return  # an async cell is awaiting: its post_run_cell queues and schedules again
        wait = self._delay_s - (time.monotonic() - self._queued_at)
        if wait > 0:  # another cell ended since (a Run All goes on): wait for idleness
            self._schedule(wait)
            return
        self.flush()

    def _cancel_callback(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

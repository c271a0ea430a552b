"""Cell records waiting to be sent, and the messages that carry them.

A cell's record goes out after its execute reply (vramscope.after_reply). In a Run All the
next cell starts before that: its records then wait here, and go out together, in one
``cells`` message (since 1.1), when the kernel is idle, or when the oldest has waited
``MAX_WAIT_S``: at the next cell's start, or from a timer thread while a long cell runs (a
long cell never holds back the footers of the quick cells before it).
One message for N quick cells costs one JSON encoding, one signature and one socket send
instead of N: measured in a kernel, sending a ``cell`` message took ~0.25 ms of the main
thread, which a Run All of ``pass`` cells paid on every cell.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Callable, Optional, Union

from .messages.records import CellRecord, DeviceInfo, DeviceSample
from .protocol import CellMessage, CellsMessage

#: The longest a record waits for the kernel to go idle before it is sent anyway.
MAX_WAIT_S = 0.25
#: Records per ``cells`` message at most (a longer backlog goes in several).
MAX_BATCH = 200

Pending = tuple[CellRecord, dict[str, DeviceSample]]


class CellOutbox:
    """Thread-safe: records are added on the main thread and taken there or by the timer."""

    def __init__(self, max_wait_s: float = MAX_WAIT_S) -> None:
        self._max_wait_s = max_wait_s
        self._pending: list[Pending] = []
        self._since = 0.0
        self._lock = threading.Lock()
        self._timer: Optional[threading.Timer] = None
        #: held while a batch is taken and sent, so batches go out in order
        self.sending = threading.Lock()

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, record: CellRecord, after: dict[str, DeviceSample]) -> None:
        with self._lock:
            if not self._pending:
                self._since = time.monotonic()
            self._pending.append((record, after))

    def due(self) -> bool:
        """The oldest record has waited long enough: send now, even mid Run All."""
        return bool(self._pending) and time.monotonic() - self._since >= self._max_wait_s

    def hold(self, send_overdue: Callable[[], None]) -> None:
        """A cell starts while records wait: ``send_overdue`` runs on a timer thread when the
        oldest has waited ``max_wait_s``, unless they were taken before."""
        with self._lock:
            if not self._pending or self._timer is not None:
                return
            delay = max(0.0, self._max_wait_s - (time.monotonic() - self._since))
            self._timer = threading.Timer(delay, self._fire, (send_overdue,))
            self._timer.daemon = True
            self._timer.name = "vramscope-cells"
        self._timer.start()

    def take(self) -> list[Pending]:
        with self._lock:
            batch, self._pending = self._pending, []
            timer, self._timer = self._timer, None
        if timer is not None and timer is not threading.current_thread():
            timer.cancel()
        return batch

    def clear(self) -> None:
        self.take()

    def _fire(self, send_overdue: Callable[[], None]) -> None:
        with contextlib.suppress(Exception):  # never raise on a thread nobody joins
            send_overdue()


def cell_messages(
    records: list[CellRecord], devices: list[DeviceInfo]
) -> Iterator[Union[CellMessage, CellsMessage]]:
    """One ``cell`` message for one record (as 1.0 peers know it), else ``cells`` messages
    of at most ``MAX_BATCH`` records, in order, each with ``devices``: the state after the
    last record."""
    if len(records) == 1:
        yield {"type": "cell", "record": records[0], "devices": devices}
        return
    for start in range(0, len(records), MAX_BATCH):
        yield {"type": "cells", "records": records[start : start + MAX_BATCH], "devices": devices}

"""Cell records waiting to be sent, and the messages that carry them.

A cell's record goes out after its execute reply (vramscope.after_reply). In a Run All the
next cell starts before that: its records then wait here, and go out together, in one
``cells`` message (since 1.1), when the kernel is idle, or when the oldest has waited
``MAX_WAIT_S``: at the next cell's start, or from the sender thread while a long cell runs (a
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
from .waker import Waker

#: The longest a record waits for the kernel to go idle before it is sent anyway.
MAX_WAIT_S = 0.25
#: Records per ``cells`` message at most (a longer backlog goes in several).
MAX_BATCH = 200
#: The longest a cell's start waits for a new sender thread to set up (once per kernel).
READY_WAIT_S = 0.5
THREAD_NAME = "vramscope-cells"

Pending = tuple[CellRecord, dict[str, DeviceSample]]


class CellOutbox:
    """Thread-safe: records are added on the main thread and taken there or by the sender.

    The sender is one daemon thread, started at the first ``hold`` (before that cell's
    readings) and kept: a timer thread started for each long cell made every cell of over
    ~0.3 s read ~36 KiB high. ipykernel gives each thread
    that sends on IOPub a zmq socket of its own, built at its first message (inside the
    cell) and dropped ~10 s after the thread ended (inside some later cell). The kept thread
    builds its socket once, as it starts (``prepare_thread``), and the cell's start waits for
    that."""

    def __init__(
        self,
        max_wait_s: float = MAX_WAIT_S,
        prepare_thread: Optional[Callable[[], None]] = None,
    ) -> None:
        self._max_wait_s = max_wait_s
        self._prepare_thread = prepare_thread
        self._pending: list[Pending] = []
        self._since = 0.0
        self._lock = threading.Lock()
        #: what the sender runs once the oldest record is due (armed by ``hold``)
        self._overdue: Optional[Callable[[], None]] = None
        self._thread: Optional[threading.Thread] = None
        self._stop = threading.Event()
        self._wake = Waker()
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
        """A cell starts while records wait: ``send_overdue`` runs on the sender thread when
        the oldest has waited ``max_wait_s``, unless they were taken before."""
        with self._lock:
            if not self._pending or self._overdue is not None:
                return
            self._overdue = send_overdue
        if not self.sender_running:
            try:
                self._start_sender()
            except BaseException:
                with self._lock:  # no thread (can't start new thread): the next hold tries again
                    self._overdue, self._thread = None, None
                raise
        self._wake.wake()

    @property
    def sender_running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def take(self) -> list[Pending]:
        with self._lock:
            batch, self._pending = self._pending, []
            self._overdue = None
        return batch

    def clear(self) -> None:
        self.take()

    def close(self, timeout: float = 1.0) -> None:
        """Stop the sender thread (idempotent); waiting records stay."""
        thread, self._thread = self._thread, None
        self._stop.set()
        self._wake.wake()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _start_sender(self) -> None:
        """Start the sender and wait (at most ``READY_WAIT_S``) until it is set up."""
        self._stop = threading.Event()
        self._wake = Waker()
        ready = threading.Event()
        thread = threading.Thread(
            target=self._run, args=(self._stop, self._wake, ready), name=THREAD_NAME, daemon=True
        )
        self._thread = thread
        thread.start()
        ready.wait(READY_WAIT_S)

    def _run(self, stop: threading.Event, wake: Waker, ready: threading.Event) -> None:
        with contextlib.suppress(Exception):  # never raise on a thread nobody joins
            if self._prepare_thread is not None:
                self._prepare_thread()
        ready.set()
        while not stop.is_set():
            with self._lock:
                send = self._overdue
                left = self._since + self._max_wait_s - time.monotonic() if send else None
                if send is not None and left is not None and left <= 0:
                    self._overdue = None  # fired: the next ``hold`` arms it again
            if send is not None and left is not None and left <= 0:
                with contextlib.suppress(Exception):
                    send()
                continue
            wake.wait(left)


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

"""quiet.wait_control_idle: a cell's readings wait for ipykernel's control thread to be idle
(blocked in its selector), at most MAX_WAIT_S."""

from __future__ import annotations

import selectors
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from vramscope import quiet


@pytest.fixture
def control() -> Iterator[tuple[threading.Event, threading.Event]]:
    """A thread named like ipykernel's control thread: idle in a selector until ``work`` is
    set, then busy in Python code until ``done`` is set."""
    work, done, stop = threading.Event(), threading.Event(), threading.Event()
    a, b = socket.socketpair()

    def run() -> None:
        sel = selectors.DefaultSelector()
        sel.register(a, selectors.EVENT_READ)
        while not stop.is_set():
            sel.select(timeout=0.05)
            if work.is_set():
                while not done.is_set() and not stop.is_set():
                    sum(range(1000))  # answering a request, in Python
                work.clear()

    thread = threading.Thread(target=run, name=quiet.CONTROL_THREAD_NAME, daemon=True)
    thread.start()
    time.sleep(0.05)
    yield work, done
    stop.set()
    thread.join(2)
    a.close()
    b.close()
    quiet._control = None


def test_idle_control_thread_is_not_waited_for(
    control: tuple[threading.Event, threading.Event],
) -> None:
    assert not quiet.control_busy()
    assert quiet.wait_control_idle() < quiet.MAX_WAIT_S / 2


def test_a_busy_control_thread_is_waited_for_until_idle(
    control: tuple[threading.Event, threading.Event],
) -> None:
    work, done = control
    work.set()
    time.sleep(0.06)  # the thread leaves select() and works
    assert quiet.control_busy()
    done_at: list[float] = []
    threading.Timer(0.03, lambda: (done_at.append(time.perf_counter()), done.set())).start()
    waited = quiet.wait_control_idle(max_wait_s=1.0)
    returned = time.perf_counter()
    assert waited < 0.9  # returned because the thread went idle, not at the bound
    assert done_at and returned >= done_at[0]  # ... after its work ended, not before
    assert not quiet.control_busy()


def test_the_wait_is_bounded(control: tuple[threading.Event, threading.Event]) -> None:
    work, done = control
    work.set()
    time.sleep(0.06)
    waited = quiet.wait_control_idle(max_wait_s=0.02)
    assert 0.02 <= waited < 0.2
    done.set()


def test_without_a_control_thread_nothing_waits() -> None:
    quiet._control = None
    assert not quiet.control_busy()
    assert quiet.wait_control_idle() < 0.01

"""vramscope.warmup's steps on IPython's real objects: a step not ready is tried again at the
next cell, a step that raises is given up, and the history writer's connection reads once."""

from __future__ import annotations

import sqlite3
import threading
from types import SimpleNamespace

from vramscope.warmup import HISTORY_READ, Warmup, history_writer, zmq_gc


class _Connection:
    """A real sqlite3 connection that records what was run on it."""

    def __init__(self) -> None:
        self.db = sqlite3.connect(":memory:", check_same_thread=False)
        self.db.execute("CREATE TABLE history (session integer, line integer, source text)")
        self.ran: list[str] = []

    def execute(self, sql: str) -> sqlite3.Cursor:
        self.ran.append(sql)
        return self.db.execute(sql)


def _shell(db: object, alive: bool = True, enabled: bool = True) -> SimpleNamespace:
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, daemon=True)
    if alive:
        thread.start()
    manager = SimpleNamespace(enabled=enabled, save_thread=thread)
    thread.db = db  # type: ignore[attr-defined]
    return SimpleNamespace(history_manager=manager, stop=stop)


def test_history_writer_reads_once_connected() -> None:
    shell = _shell(None)
    try:
        assert history_writer(shell) is False  # still connecting: again at the next cell
        conn = _Connection()
        shell.history_manager.save_thread.db = conn
        assert history_writer(shell) is True
        assert conn.ran == [HISTORY_READ]
    finally:
        shell.stop.set()


def test_nothing_to_set_up_is_done() -> None:
    assert history_writer(SimpleNamespace()) is True  # not IPython
    off = _shell(None, enabled=False)
    try:
        assert history_writer(off) is True  # history off
    finally:
        off.stop.set()
    assert history_writer(_shell(None, alive=False)) is True  # the writer thread ended


def test_no_kernel_no_zmq_setup() -> None:
    """Outside a kernel (this test process: pyzmq imported, no ipykernel kernel) pyzmq's
    collector is not started: nothing sends there."""
    import zmq  # noqa: F401  (imported, as in a terminal IPython that has it)

    assert zmq_gc() is False


def test_steps_not_ready_are_tried_again_and_failures_given_up() -> None:
    calls: list[str] = []

    def later() -> bool:
        calls.append("later")
        return calls.count("later") >= 2

    def broken() -> bool:
        calls.append("broken")
        raise RuntimeError("not this kernel's machinery")

    warm = Warmup(SimpleNamespace())
    warm._steps = [later, broken]
    warm.prepare()
    assert not warm.done and calls == ["later", "broken"]
    warm.prepare()
    assert warm.done and calls == ["later", "broken", "later"]
    warm.prepare()  # nothing left
    assert calls == ["later", "broken", "later"]

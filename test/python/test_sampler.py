from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time

from vramscope.messages.records import Sample
from vramscope.sampler import (
    BUSY_MESSAGES_PER_S,
    MAX_MESSAGES_PER_S,
    MAX_PENDING,
    THREAD_NAME,
    RingBuffer,
    Sampler,
)


class Counter:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> Sample:
        self.n += 1
        return {"t": time.time(), "d": {"cpu": {"used": self.n * 10}}}


class ListSink:
    def __init__(self, wants: bool = True) -> None:
        self.wants = wants
        self.batches: list[tuple[list[Sample], int]] = []

    def wants_samples(self) -> bool:
        return self.wants

    def send_samples(self, samples: list[Sample], dropped: int) -> None:
        self.batches.append((samples, dropped))


def _wait(cond: object, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return True
        time.sleep(0.01)
    return False


def test_ring_buffer_bounded_and_resizable() -> None:
    ring = RingBuffer(3)
    for i in range(10):
        ring.append({"t": float(i), "d": {}})
    assert [s["t"] for s in ring.snapshot()] == [7.0, 8.0, 9.0]
    ring.resize(2)
    assert [s["t"] for s in ring.snapshot()] == [8.0, 9.0]
    ring.resize(5)
    ring.append({"t": 10.0, "d": {}})
    assert len(ring) == 3 and ring.limit == 5
    assert ring.clear() == 3 and len(ring) == 0


def test_tick_window_and_pending_bound() -> None:
    sink = ListSink()
    sampler = Sampler(Counter(), RingBuffer(5), sink)
    sampler.open_window()
    for _ in range(MAX_PENDING + 7):
        sampler.tick()
    assert sampler.close_window() == {"cpu": (MAX_PENDING + 7) * 10}
    assert sampler.close_window() == {}
    assert len(sampler.ring) == 5
    sampler.flush(force=True)
    samples, dropped = sink.batches[0]
    assert len(samples) == MAX_PENDING and dropped == 7


def test_no_pending_without_listener() -> None:
    sink = ListSink(wants=False)
    sampler = Sampler(Counter(), RingBuffer(100), sink)
    for _ in range(5):
        sampler.tick()
    sampler.flush(force=True)
    assert sink.batches == [] and len(sampler.ring) == 5


def test_failing_read_never_raises() -> None:
    errors: list[BaseException] = []

    def broken() -> Sample:
        raise OSError("gone")

    sampler = Sampler(broken, RingBuffer(5), None, errors.append)
    assert sampler.tick() is None and sampler.tick() is None
    assert sampler.errors == 2 and len(errors) == 1


def test_thread_rate_changes_batches_and_stop() -> None:
    sink = ListSink()
    sampler = Sampler(Counter(), RingBuffer(10_000), sink)
    sampler.set_rate(50)
    assert _wait(lambda: sampler.ticks >= 10)
    assert sampler.running
    started, before = time.monotonic(), len(sink.batches)
    assert _wait(lambda: len(sink.batches) >= before + 6)
    elapsed = time.monotonic() - started
    # at 50 Hz batches still go out at most ~4 per second (counted from `started`: the
    # batches before it went out while this thread was still on its way there)
    assert len(sink.batches) - before <= MAX_MESSAGES_PER_S * elapsed + 1
    sampler.set_rate(0)
    assert not sampler.running
    ticks = sampler.ticks
    time.sleep(0.15)
    assert sampler.ticks == ticks
    sampler.set_rate(20)
    assert _wait(lambda: sampler.ticks > ticks)
    sampler.stop()
    sampler.stop()
    assert not any(t.name == THREAD_NAME for t in threading.enumerate())


def test_sampler_stops_at_interpreter_exit() -> None:
    """The runtime's atexit handler joins the sampler thread before the interpreter ends."""
    script = textwrap.dedent(
        """
        import atexit, threading
        from vramscope.sampler import THREAD_NAME

        def check():  # registered first, so it runs after the runtime's handler
            alive = [t for t in threading.enumerate() if t.name == THREAD_NAME]
            print("sampler alive at exit:", bool(alive), flush=True)

        atexit.register(check)
        from vramscope.runtime import Runtime

        class Events:
            def register(self, *a): pass
            def unregister(self, *a): pass

        class Shell:
            events = Events()
            user_ns = {}

        rt = Runtime()
        rt.install(Shell())
        assert any(t.name == THREAD_NAME for t in threading.enumerate())
        print("running", flush=True)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "running" in out.stdout
    assert "sampler alive at exit: False" in out.stdout
    assert "Traceback" not in out.stderr


def test_import_outside_ipython_is_harmless() -> None:
    script = (
        "import threading, vramscope, json; "
        "from vramscope.sampler import THREAD_NAME; "
        "assert not any(t.name == THREAD_NAME for t in threading.enumerate()); "
        "r = vramscope.session_report(); json.dumps(r); print(r['cells'], r['schema'])"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[] vramscope.report/1"


def test_while_a_cell_runs_batches_go_out_half_as_often() -> None:
    """Each message wakes ipykernel's IOPub thread: while a cell runs (window open) the
    sampler sends at most BUSY_MESSAGES_PER_S, and back at MAX_MESSAGES_PER_S when idle."""

    def batches_in(seconds: float, busy: bool) -> int:
        sink = ListSink()
        sampler = Sampler(Counter(), RingBuffer(10_000), sink)
        if busy:
            sampler.open_window()
        sampler.set_rate(50)
        time.sleep(seconds)
        sampler.stop()
        return len(sink.batches)

    busy, idle = batches_in(1.6, True), batches_in(1.6, False)
    assert BUSY_MESSAGES_PER_S < MAX_MESSAGES_PER_S
    assert busy <= BUSY_MESSAGES_PER_S * 1.6 + 1, busy
    assert idle > busy, (idle, busy)

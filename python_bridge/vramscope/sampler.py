"""Background sampler: reads every device at ``sample_hz`` into a bounded ring buffer and
publishes batches (at most ~4 messages per second, 2 while a cell runs) to a sink, e.g. the
``stream`` comm.

Keeping a training loop fast: one tick (every device read + the ring buffer) holds the GIL
~6 us, but publishing one batch (JSON, HMAC signature, the socket, waking ipykernel's IOPub
thread) ~100 us, so sending is what the thread costs the main thread. At 10 Hz, batching to 4
messages a second (2-3 samples each, a live view still within 250 ms) cuts the GIL time the
sampler takes from ~1 ms to ~0.45 ms a second, and the IOPub thread's wake-ups by 60%."""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Callable, Protocol

from .messages.records import Sample
from .waker import Waker

MAX_MESSAGES_PER_S = 4.0
#: While a cell runs (the per-cell window is open) batches go out at most this often: each
#: message wakes ipykernel's IOPub thread too, and on a machine whose cores a training loop
#: keeps busy every wake-up stalls it (measured at 50 messages a second: ~0.7 ms each on 2
#: cores with torch's 2 threads). The timeline still moves every half second.
BUSY_MESSAGES_PER_S = 2.0
MAX_PENDING = 1000
THREAD_NAME = "vramscope-sampler"


class SampleSink(Protocol):
    def wants_samples(self) -> bool: ...

    def send_samples(self, samples: list[Sample], dropped: int) -> None: ...


class RingBuffer:
    """Thread-safe bounded history of samples (oldest dropped first)."""

    def __init__(self, limit: int) -> None:
        self._lock = threading.Lock()
        self._items: deque[Sample] = deque(maxlen=max(1, limit))

    @property
    def limit(self) -> int:
        return self._items.maxlen or 0

    def resize(self, limit: int) -> None:
        with self._lock:
            if limit != self._items.maxlen:
                self._items = deque(self._items, maxlen=max(1, limit))

    def append(self, sample: Sample) -> None:
        with self._lock:
            self._items.append(sample)

    def snapshot(self) -> list[Sample]:
        with self._lock:
            return list(self._items)

    def clear(self) -> int:
        with self._lock:
            count = len(self._items)
            self._items.clear()
            return count

    def __len__(self) -> int:
        return len(self._items)


class Sampler:
    """A daemon thread that calls ``read_all`` per tick; rate changeable at runtime (0 = off)."""

    def __init__(
        self,
        read_all: Callable[[], Sample],
        ring: RingBuffer,
        sink: SampleSink | None = None,
        on_error: Callable[[BaseException], None] | None = None,
        prepare_thread: Callable[[], None] | None = None,
    ) -> None:
        self._read_all = read_all
        #: run first on the thread (vramscope.quiet.open_iopub_pipe: what the thread's first
        #: message would set up, set up as it starts instead, not inside a cell later)
        self._prepare_thread = prepare_thread
        self.ring = ring
        self.sink = sink
        self._on_error = on_error
        self._hz = 0.0
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._wake = Waker()
        self._window: dict[str, int] | None = None
        self._pending: list[Sample] = []
        self._dropped = 0
        self._last_flush = 0.0
        self.ticks = 0
        self.errors = 0

    # --- control ------------------------------------------------------------------------

    @property
    def rate(self) -> float:
        return self._hz

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def set_rate(self, hz: float) -> None:
        """Apply a new rate at once; 0 stops the thread, >0 (re)starts it when needed."""
        self._hz = max(0.0, float(hz))
        if self._hz == 0:
            self.stop()
            return
        if self.running:
            self._wake.wake()
            return
        self._stop = threading.Event()
        self._wake = Waker()
        thread = threading.Thread(
            target=self._run, args=(self._stop,), name=THREAD_NAME, daemon=True
        )
        self._thread = thread
        thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop the thread and wait for it (idempotent). Pending samples stay unsent."""
        thread, self._thread = self._thread, None
        self._stop.set()
        self._wake.wake()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    # --- per-cell window ----------------------------------------------------------------

    def open_window(self) -> None:
        with self._lock:
            self._window = {}

    def close_window(self) -> dict[str, int]:
        """Highest ``used`` per device seen since ``open_window`` (empty when nothing sampled)."""
        with self._lock:
            window, self._window = self._window, None
        return window or {}

    # --- sampling -----------------------------------------------------------------------

    def tick(self) -> Sample | None:
        """Take one sample (also callable without the thread); never raises."""
        try:
            sample = self._read_all()
        except Exception as exc:
            self.errors += 1
            if self._on_error is not None and self.errors == 1:
                self._on_error(exc)
            return None
        self.ticks += 1
        self.ring.append(sample)
        with self._lock:
            window = self._window
            if window is not None:
                for dev_id, values in sample["d"].items():
                    used = values["used"]
                    if used > window.get(dev_id, used - 1):
                        window[dev_id] = used
            sink = self.sink
            if sink is not None and sink.wants_samples():
                self._pending.append(sample)
                overflow = len(self._pending) - MAX_PENDING
                if overflow > 0:
                    del self._pending[:overflow]
                    self._dropped += overflow
            else:
                self._pending.clear()
        return sample

    def flush(self, force: bool = False) -> None:
        now = time.monotonic()
        with self._lock:
            if not self._pending or self.sink is None:
                return
            rate = MAX_MESSAGES_PER_S if self._window is None else BUSY_MESSAGES_PER_S
            if not force and now - self._last_flush < 1.0 / rate:
                return
            batch, self._pending = self._pending, []
            dropped, self._dropped = self._dropped, 0
            self._last_flush = now
            sink = self.sink
        try:
            sink.send_samples(batch, dropped)
        except Exception as exc:
            self.errors += 1
            if self._on_error is not None:
                self._on_error(exc)

    def _run(self, stop: threading.Event) -> None:
        if self._prepare_thread is not None:
            try:
                self._prepare_thread()
            except Exception as exc:
                if self._on_error is not None:
                    self._on_error(exc)
        deadline = time.monotonic()
        while not stop.is_set():
            hz = self._hz
            if hz <= 0:
                break
            self.tick()
            self.flush()
            deadline += 1.0 / hz
            delay = deadline - time.monotonic()
            if delay < 0:  # fell behind (busy machine): skip, never burst
                deadline = time.monotonic()
                delay = 0.0
            if self._wake.wait(delay):
                deadline = time.monotonic()

"""Scale faults: a model with 10,000 modules (the insight message is capped, the kernel goes
on answering) in a real kernel, and a cell that runs for an hour at 20 Hz sampling, driven
through the real Sampler/RingBuffer and CPU device with a simulated clock."""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest

import vramscope.sampler as sampler_module
from faults_session import Session, message_bytes
from vramscope.devices import CpuDevice
from vramscope.messages.records import Sample
from vramscope.sampler import MAX_PENDING, RingBuffer, Sampler
from vramscope.settings import default_settings

KIB = 1024
BIG_MODEL = (
    "import torch\n"
    "big = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(10_000)])\n"
    "loss = big(torch.randn(2, 4)).sum()\n"
    "loss.backward()"
)


@pytest.fixture
def s() -> Iterator[Session]:
    session = Session()
    try:
        yield session
    finally:
        session.close()


@pytest.mark.kernel
def test_ten_thousand_modules_insight_is_capped_and_the_kernel_answers(s: Session) -> None:
    s.cell(BIG_MODEL, "big")
    data = s.next_of("insight", timeout=60)
    insight = data["insight"]
    assert insight["model"] == "big"
    # 10,001 modules: the layer table stops at 1,000 rows, the message stays small
    assert len(insight["layers"]) == 1000
    assert [row["path"] for row in insight["layers"][:3]] == ["", "0", "1"]
    size = message_bytes(data)
    assert size < 256 * KIB, size
    # a model-only message (no per-module list elsewhere): the report and the snapshot too
    assert message_bytes(s.result("get_insight")) < 256 * KIB
    # the kernel keeps answering: a small cell right after, and requests, in bounded time
    start = time.monotonic()
    assert s.cell("after_big = 1", "after-big")["record"]["ok"] is True
    assert time.monotonic() - start < 10
    assert s.result("get_devices")["devices"][0]["id"] == "cpu"


class _Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def monotonic(self) -> float:
        return self.now


class _Sink:
    def __init__(self) -> None:
        self.samples = 0
        self.dropped = 0
        self.messages = 0
        self.last_t = 0.0

    def wants_samples(self) -> bool:
        return True

    def send_samples(self, samples: list[Sample], dropped: int) -> None:
        assert samples[0]["t"] > self.last_t  # in order, none twice
        self.last_t = samples[-1]["t"]
        self.samples += len(samples)
        self.dropped += dropped
        self.messages += 1


def test_an_hour_at_20_hz_keeps_memory_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()
    monkeypatch.setattr(sampler_module, "time", clock)
    cpu = CpuDevice()
    limit = default_settings()["history_limit"]
    ring = RingBuffer(limit)
    sink = _Sink()
    peak = {"used": 0}

    def read_all() -> Sample:
        reading = cpu.read()  # the real device read
        # one simulated spike the window must report exactly
        used = reading["used"] + (123 * KIB if ticks["n"] == 40_000 else 0)
        peak["used"] = max(peak["used"], used)
        return {"t": clock.now, "d": {"cpu": {**reading, "used": used}}}

    ticks = {"n": 0}
    sampler = Sampler(read_all, ring, sink=sink)
    sampler.open_window()
    hz, seconds = 20, 3600
    tracemalloc.start()
    try:
        for i in range(hz * seconds):
            ticks["n"] = i
            clock.now += 1 / hz
            sampler.tick()
            sampler.flush()
            if i == limit:
                full, _ = tracemalloc.get_traced_memory()
        grown, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    sampler.flush(force=True)  # what the thread's next tick would send
    window = sampler.close_window()
    # the ring holds exactly the newest history_limit samples (30 min at 20 Hz), in order
    kept = ring.snapshot()
    assert len(kept) == limit
    assert all(a["t"] < b["t"] for a, b in zip(kept, kept[1:]))
    # the cell's peak over the whole hour, not only over what the ring still holds
    assert window["cpu"] == peak["used"]
    # every sample went out once, at most 10 messages a second, nothing dropped
    assert sink.samples == hz * seconds and sink.dropped == 0
    assert sink.messages <= 10 * seconds + 1
    # once the ring is full, the second half-hour adds no memory (< 64 KiB of noise)
    assert grown - full < 64 * KIB, (full, grown)
    assert len(sampler._pending) <= MAX_PENDING


def test_an_hour_without_a_listener_drops_pending_not_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = _Clock()
    monkeypatch.setattr(sampler_module, "time", clock)
    ring = RingBuffer(1000)

    class Away(_Sink):
        def wants_samples(self) -> bool:
            return False

    n = {"i": 0}

    def read_all() -> dict[str, Any]:
        n["i"] += 1
        return {"t": float(n["i"]), "d": {"cpu": {"used": n["i"]}}}

    sampler = Sampler(read_all, ring, sink=Away())
    for _ in range(20 * 3600):
        clock.now += 0.05
        sampler.tick()
        sampler.flush()
    assert len(ring) == 1000 and sampler._pending == []

"""vramscope's own memory (``self_bytes``, vramscope.selfmem): the estimate against a
tracemalloc ground truth, the user's objects never counted, the bounds at the limits, and
the field in a real kernel's hello and cell messages (valid by the protocol)."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from faults_session import MIB, Session
from test_protocol_fixtures import validate_kernel_message
from vramscope.recorder import MAX_CELLS
from vramscope.runtime import Runtime
from vramscope.selfmem import SelfMemory, estimate_bytes


def _record(i: int) -> dict[str, Any]:
    return {
        "cell_id": f"cell-{i:06d}",
        "execution_count": i,
        "start_time": 1.7e9 + i,
        "duration": 0.01,
        "ok": True,
        "error_type": None,
        "oom": False,
        "code_head": f"x{i} = torch.ones(1024)",
        "devices": {"cpu": {"delta_bytes": i, "peak_delta_bytes": i, "after_bytes": 10 * i + 1}},
    }


def test_estimate_matches_tracemalloc_for_a_full_ring_and_history() -> None:
    rt = Runtime()
    empty = estimate_bytes(rt)
    tracemalloc.start()
    before, _ = tracemalloc.get_traced_memory()
    for _ in range(rt.ring.limit):
        rt.ring.append(rt.read_all())
    for i in range(MAX_CELLS):
        rt.recorder.records.append(_record(i))  # type: ignore[arg-type]
    after, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    truth = after - before
    estimate = estimate_bytes(rt) - empty
    assert abs(estimate - truth) <= 0.10 * truth, (estimate, truth)
    # the documented bound for a CPU-only kernel at both limits (docs/reliability.md)
    assert estimate < 48 * MIB, estimate


def test_the_users_objects_are_never_counted() -> None:
    user_ns: dict[str, Any] = {"big": bytearray(64 * MIB), "many": [bytearray(MIB)] * 4}
    rt = Runtime(shell=SimpleNamespace(user_ns=user_ns, user_ns_hidden={}))
    base = rt.self_memory.bytes(fresh=True)
    assert base is not None and base < 1 * MIB
    # a vramscope structure that (wrongly or not) reaches the namespace or a user object:
    # the namespace dict counts 0, a foreign object is never followed
    rt.insight.last = {"ns": user_ns, "obj": SimpleNamespace(payload=bytearray(32 * MIB))}
    again = rt.self_memory.bytes(fresh=True)
    assert again is not None and again - base < 64 * 1024, again - base


def test_recomputed_at_most_every_two_seconds() -> None:
    now = [100.0]
    calls = [0]

    def root() -> object:
        calls[0] += 1
        return {"a": 1}

    memory = SelfMemory(root, lambda: [], clock=lambda: now[0])
    assert memory.bytes() is not None
    now[0] += 1.0
    memory.bytes()
    assert calls[0] == 1
    now[0] += 1.5
    memory.bytes()
    assert calls[0] == 2


@pytest.fixture
def s() -> Iterator[Session]:
    session = Session()
    try:
        yield session
    finally:
        session.close()


@pytest.mark.kernel
def test_hello_and_cell_carry_a_valid_self_bytes(s: Session) -> None:
    validate_kernel_message(s.hello)
    assert 0 < s.hello["self_bytes"] < 4 * MIB, s.hello["self_bytes"]
    data = s.cell("x = 1", "one")
    validate_kernel_message({"type": "cell", **data})
    assert 0 < data["self_bytes"] < 4 * MIB

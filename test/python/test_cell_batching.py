"""Cell records of a Run All go out together (``cells`` message, since 1.1), in a real
kernel, and never later than ``cell_outbox.MAX_WAIT_S`` behind their cell."""

from __future__ import annotations

import threading
import time
from typing import Callable

import pytest

from kernel_harness import KernelHarness
from vramscope.cell_outbox import MAX_BATCH, MAX_WAIT_S, THREAD_NAME, CellOutbox, cell_messages

MIB = 2**20


def _record(n: int) -> dict[str, object]:
    return {"cell_id": f"c{n}", "execution_count": n}


def test_outbox_waits_then_is_due() -> None:
    box = CellOutbox(max_wait_s=0.05)
    assert not box.due() and len(box) == 0
    box.add(_record(1), {})  # type: ignore[arg-type]
    box.add(_record(2), {})  # type: ignore[arg-type]
    assert not box.due()
    time.sleep(0.06)
    assert box.due()
    assert [r["cell_id"] for r, _ in box.take()] == ["c1", "c2"]
    assert len(box) == 0 and not box.due()


def test_one_sender_thread_prepared_once_sends_what_is_overdue() -> None:
    prepared: list[str] = []
    fired: list[tuple[str, list[str]]] = []
    box = CellOutbox(max_wait_s=0.5, prepare_thread=lambda: prepared.append(_thread_name()))

    def send() -> None:
        fired.append((_thread_name(), [r["cell_id"] for r, _ in box.take()]))

    try:
        box.hold(send)  # nothing waits: no thread
        assert not box.sender_running and prepared == []
        box.add(_record(1), {})  # type: ignore[arg-type]
        box.hold(send)
        # set up before hold returned: before the cell's starting reading
        assert prepared == [THREAD_NAME] and box.sender_running
        assert fired == []
        _wait_for(lambda: len(fired) == 1)
        assert fired == [(THREAD_NAME, ["c1"])]
        # taken before it was due: nothing fires
        box.add(_record(2), {})  # type: ignore[arg-type]
        box.hold(send)
        assert [r["cell_id"] for r, _ in box.take()] == ["c2"]
        time.sleep(0.7)  # past when it was due
        assert len(fired) == 1
        # the same thread again, set up once
        box.add(_record(3), {})  # type: ignore[arg-type]
        box.hold(send)
        _wait_for(lambda: len(fired) == 2)
        assert fired[1] == (THREAD_NAME, ["c3"]) and prepared == [THREAD_NAME]
    finally:
        box.close()
    assert not box.sender_running


def _thread_name() -> str:
    return threading.current_thread().name


def _wait_for(check: Callable[[], bool], timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.01)


def test_one_record_is_a_cell_message_many_are_cells_messages_in_order() -> None:
    devices = [{"id": "cpu"}]
    (one,) = cell_messages([_record(1)], devices)  # type: ignore[list-item]
    assert one == {"type": "cell", "record": _record(1), "devices": devices}
    records = [_record(n) for n in range(2 * MAX_BATCH + 3)]
    messages = list(cell_messages(records, devices))  # type: ignore[arg-type]
    assert [m["type"] for m in messages] == ["cells"] * 3
    assert [len(m["records"]) for m in messages] == [MAX_BATCH, MAX_BATCH, 3]  # type: ignore[typeddict-item]
    sent = [r for m in messages for r in m["records"]]  # type: ignore[typeddict-item]
    assert sent == records


def _cell_messages(k: KernelHarness, stream: str, start: int) -> list[dict[str, object]]:
    return [
        m["content"]["data"]
        for m in k.iopub[start:]
        if m["msg_type"] == "comm_msg"
        and m["content"].get("comm_id") == stream
        and m["content"]["data"].get("type") in ("cell", "cells")
    ]


def _after_one_cell(kernel: tuple[KernelHarness, str], code: str) -> tuple[KernelHarness, str]:
    k, stream = kernel
    k.run_ok(code, "first")
    assert k.comm_data(stream, "cell")["record"]["cell_id"] == "first"
    return k, stream


@pytest.mark.kernel
def test_run_all_sends_one_cells_message_with_every_record(
    fresh_stream_kernel: tuple[KernelHarness, str],
) -> None:
    k, stream = _after_one_cell(fresh_stream_kernel, "pass")
    start = len(k.iopub)
    cells = [(f"q{i}", f"b{i} = bytearray({i + 1} * 2**20)") for i in range(5)]
    ids = [k.send_execute(code, cell_id) for cell_id, code in cells]
    for msg_id in ids:
        assert k.reply(msg_id)["content"]["status"] == "ok"
    records = [k.comm_data(stream, "cell")["record"] for _ in cells]
    assert [r["cell_id"] for r in records] == [c for c, _ in cells]
    # each record is its own cell's memory: (i + 1) MiB, plus the mmap'd chunk's header page
    # and whatever the kernel's own threads allocate or free meanwhile (the shell channel's
    # thread takes in the queued requests, the sampler's history grows, the IOPub thread frees
    # what it sent): up to 76 KiB more seen on a loaded machine, and 1.8 KiB less (fresh run
    # 92: 6 KiB freed beside a 3 MiB cell). Neighbouring cells differ by 1 MiB, so a record of
    # the wrong cell still fails; test_kernel_runall is the exact one.
    for i, r in enumerate(records):
        assert -64 * 1024 <= r["devices"]["cpu"]["delta_bytes"] - (i + 1) * MIB <= 256 * 1024, r
    messages = _cell_messages(k, stream, start)
    # the queue goes in one message, here usually two (the first cell's may go alone, before
    # the rest arrived); a stall of MAX_WAIT_S between two cells of a loaded machine sends
    # what waited: never one message a cell, which is what the batching is against
    types = [m["type"] for m in messages]
    assert len(messages) < len(cells) and "cells" in types, types
    # a cell run on its own still gets a 1.0-style cell message
    start = len(k.iopub)
    k.run_ok("alone = 1", "alone")
    assert k.comm_data(stream, "cell")["record"]["cell_id"] == "alone"
    assert [m["type"] for m in _cell_messages(k, stream, start)] == ["cell"]


@pytest.mark.kernel
def test_a_long_cell_does_not_hold_back_the_records_queued_before_it(
    fresh_stream_kernel: tuple[KernelHarness, str],
) -> None:
    k, stream = _after_one_cell(fresh_stream_kernel, "import time")
    ids = [k.send_execute("pass", f"quick{i}") for i in range(3)]
    long_cell = k.send_execute(f"time.sleep({MAX_WAIT_S * 8})", "long")
    started = time.monotonic()
    seen = [k.comm_data(stream, "cell", timeout=MAX_WAIT_S * 6)["record"]["cell_id"]]
    while len(seen) < 3:
        seen.append(k.comm_data(stream, "cell", timeout=MAX_WAIT_S * 6)["record"]["cell_id"])
    # the quick cells' records came while the long cell still ran
    assert seen == ["quick0", "quick1", "quick2"]
    assert time.monotonic() - started < MAX_WAIT_S * 8
    for msg_id in [*ids, long_cell]:
        assert k.reply(msg_id)["content"]["status"] == "ok"
    record = k.comm_data(stream, "cell")["record"]
    assert record["cell_id"] == "long"
    # the sleep allocates nothing, and sending the quick cells' records from the bridge's
    # thread inside it builds nothing that stays: a thread started for the send (a timer)
    # got ipykernel's IOPub socket of its own there, and the cell read +36 KiB
    assert abs(record["devices"]["cpu"]["delta_bytes"]) < 20 * 1024, record

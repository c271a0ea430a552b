"""Processes, without a kernel: the wire format's checks, exit reasons, the copy-on-access
signature, per-cell peaks and the collector's drop/refuse counters."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from typing import Any

import pytest

from vramscope.processes import cow, reporter, wire
from vramscope.processes.procfs import exit_reason
from vramscope.processes.service import ProcessesService
from vramscope.processes.table import Proc, ProcessTable

MiB = 2**20
TOKEN = b"k" * 64


def report(**changes: Any) -> wire.Report:
    base: dict[str, Any] = {
        "v": 1, "pid": 4242, "ppid": 1, "host": "h", "seq": 1, "t": 1000.0, "kind": "rank",
        "index": 0, "world": 2, "cell": 3, "final": False,
        "mem": {"rss": 100 * MiB, "hwm": 120 * MiB, "uss": 10 * MiB, "pss": 50 * MiB},
        "dev": {"cuda:0": {"allocated": 5 * MiB, "reserved": 8 * MiB, "peak": 6 * MiB}},
        "dataset": None, "dropped": 0,
    }  # fmt: skip
    base.update(changes)
    return base  # type: ignore[return-value]


def test_wire_round_trip_keeps_only_known_fields() -> None:
    sent = dict(report(), extra="ignored")
    got = wire.decode(wire.encode(sent, TOKEN), TOKEN)  # type: ignore[arg-type]
    assert got == report()


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"pid": 0}, "pid must be positive"),
        ({"seq": -1}, "seq must be a non-negative integer"),
        ({"seq": True}, "seq must be a non-negative integer"),
        ({"t": float("nan")}, "t must be a finite number"),
        ({"kind": "daemon"}, "kind must be one of"),
        ({"host": ""}, "host must be"),
        ({"mem": {"rss": 1.5}}, "mem.rss"),
        ({"dev": {"gpu0": {"allocated": 1, "reserved": 1, "peak": 1}}}, "dev keys"),
        ({"dev": {"cuda:0": {"allocated": 1}}}, "dev.cuda:0.reserved"),
        ({"dataset": {"id": 1, "type": ""}}, "dataset.type"),
        ({"v": 2}, "unsupported report version"),
    ],
)
def test_malformed_reports_are_refused_with_the_reason(change: dict[str, Any], reason: str) -> None:
    with pytest.raises(wire.WireError) as err:
        wire.decode(wire.encode(report(**change), TOKEN), TOKEN)
    assert err.value.reason == "malformed" and reason in str(err.value)


def test_a_wrong_token_is_refused_not_malformed() -> None:
    data = wire.encode(report(), b"another token")
    with pytest.raises(wire.WireError) as err:
        wire.decode(data, TOKEN)
    assert err.value.reason == "refused"
    tampered = wire.encode(report(), TOKEN).replace(b'"rss":104857600', b'"rss":1')
    with pytest.raises(wire.WireError) as err:
        wire.decode(tampered, TOKEN)
    assert err.value.reason == "refused"


def test_exit_reasons() -> None:
    assert exit_reason(0, None).text == "exit code 0"
    assert exit_reason(None, signal.SIGKILL).text == "killed by SIGKILL"
    oom = exit_reason(None, signal.SIGKILL, oom=True)
    assert oom.text == "killed by the OOM killer (SIGKILL)" and oom.oom
    assert exit_reason(None, signal.SIGTERM, oom=True).text == "killed by SIGTERM"
    assert exit_reason(None, None).text == "ended"


def worker(points: list[tuple[int, int]]) -> Proc:
    proc = Proc("h:1", 1, 100, "h", False, kind="worker")
    for i, (rss, uss) in enumerate(points):
        proc.history.append((float(i), rss * MiB, uss * MiB, 0))
    return proc


def test_copy_on_access_signature() -> None:
    # USS up 40 MiB, RSS flat: pages moved from shared to private
    copying = worker([(300, 5), (300, 15), (300, 25), (300, 35), (300, 45)])
    assert cow.worker_growth(copying) == 40 * MiB
    # USS up as much but RSS too: new allocations (bigger batches), not copies
    allocating = worker([(300, 5), (310, 15), (320, 25), (330, 35), (340, 45)])
    assert cow.worker_growth(allocating) is None
    # too little, or not steady
    assert cow.worker_growth(worker([(300, 5), (300, 6), (300, 7), (300, 8)])) is None
    jumpy = worker([(300, 5), (300, 45), (300, 10), (300, 44), (300, 9), (300, 8), (300, 46)])
    assert cow.worker_growth(jumpy) is None


def test_dataset_found_by_identity_with_its_containers() -> None:
    class Words:
        def __init__(self) -> None:
            self.items = [str(i) for i in range(5000)]
            self.table = {i: i for i in range(100)}
            self.array = bytearray(10)

    ds = Words()
    ref = {"id": id(ds), "type": f"{Words.__module__}.{Words.__qualname__}"}
    found = cow.describe_dataset({"train": ds, "_hidden": ds}, ref)
    assert found["name"] == "train"
    assert [c["name"] for c in found["containers"]] == ["train.items", "train.table"]
    assert found["containers"][0]["length"] == 5000
    # the same address with another type is not the dataset (a reused address)
    assert cow.describe_dataset({"train": ds}, {**ref, "type": "x.Other"})["name"] is None


def test_per_cell_peaks_use_the_vmhwm_of_processes_born_in_the_cell() -> None:
    table = ProcessTable()

    def mem(rss: int, hwm: int, uss: int | None = None) -> dict[str, Any]:
        return {"rss": rss * MiB, "hwm": hwm * MiB, "uss": uss, "pss": uss}

    table.ingest(report(pid=1, mem=mem(50, 60)), False)
    table.open_cell()
    table.ingest(report(pid=1, seq=2, mem=mem(55, 90)), False)
    table.ingest(report(pid=2, mem=mem(70, 200, 9)), False)
    peaks = table.close_cell()
    # pid 1 lived before the cell: its all-time VmHWM is not the cell's, its readings are
    assert peaks["h:1"]["peak_rss"] == 55 * MiB
    # pid 2 was born in the cell: its whole life (VmHWM) is the cell's
    assert peaks["h:2"] == {
        "role": "rank 0",
        "peak_rss": 200 * MiB,
        "peak_uss": 9,
        "peak_device": {"cuda:0": 6 * MiB},
    }


def test_stale_reports_are_ignored_and_gaps_counted() -> None:
    table = ProcessTable()
    table.ingest(report(seq=5), False)
    table.ingest(report(seq=5), False)  # replayed
    table.ingest(report(seq=9), False)  # 6, 7, 8 lost
    assert table.stale == 1 and table.received == 2
    assert table.stats()["dropped"] == 3


def test_a_full_collector_queue_drops_reports_without_blocking() -> None:
    """A collector that does not read: the child's sends never block, drops are counted."""
    tmp = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = f"/tmp/vramscope-test-{os.getpid()}.sock"
    tmp.bind(path)
    try:
        rep = reporter.Reporter(reporter.Target(f"unix:{path}", TOKEN), forked=False)
        start = time.monotonic()
        for _ in range(3000):
            assert rep.report()
        assert time.monotonic() - start < 10
        assert rep.dropped > 0 and rep.sent + rep.dropped == 3000
        rep.stop()
    finally:
        tmp.close()
        os.unlink(path)


def test_a_reporter_stops_once_the_collector_is_gone() -> None:
    target = reporter.Target("unix:/nonexistent/vramscope.sock", TOKEN)
    rep = reporter.Reporter(target, forked=False)
    assert [rep.report() for _ in range(3)] == [True, True, False]


def test_service_lifecycle_keeps_the_token_out_of_the_environment() -> None:
    sent: list[dict[str, Any]] = []
    service = ProcessesService(sent.append, lambda: True, lambda: {}, lambda: 1)
    assert service.start()
    assert reporter.ENV_TOKEN not in os.environ  # given only to the processes that need it
    address = service.credentials()[reporter.ENV_ADDRESS]
    assert address.startswith("unix:") and os.path.exists(address[5:])
    remote = service.listen("127.0.0.1", 0)
    assert remote[reporter.ENV_ADDRESS].startswith("udp:127.0.0.1:")
    assert remote[reporter.ENV_TOKEN] == service.credentials()[reporter.ENV_TOKEN]
    assert sent and sent[-1]["remote"] == remote[reporter.ENV_ADDRESS]
    json.dumps(sent[-1])
    service.stop()
    assert reporter.ENV_ADDRESS not in os.environ and not os.path.exists(address[5:])
    assert reporter._target is None  # forks no longer report


def test_incremental_messages_carry_only_changed_processes() -> None:
    """Ended workers stay in the table (up to 512): each half-second message carries only the
    processes whose info changed since the last one, and the keys let go; the front end
    merges by key. ``get_processes`` (history) still answers everything."""
    sent: list[dict[str, Any]] = []
    service = ProcessesService(sent.append, lambda: True, lambda: {}, lambda: None)
    table = service.table
    for pid in (1, 2, 3):
        table.ingest(report(pid=pid, kind="worker", index=pid - 1), False)
    service.publish()
    first = sent[-1]
    assert first["changed_only"] is True and first["forgotten"] == []
    assert sorted(p["key"] for p in first["processes"]) == ["h:1", "h:2", "h:3"]
    procs = {p.key: p for p in table.procs.values()}
    table.end(procs["h:1"], exit_reason(0, None))
    mem = {"rss": 7 * MiB, "hwm": 8 * MiB, "uss": None, "pss": None}
    table.ingest(report(pid=2, seq=2, kind="worker", index=1, mem=mem), False)
    service.publish(force=True)
    second = sent[-1]
    changed = {p["key"]: p for p in second["processes"]}
    assert sorted(changed) == ["h:1", "h:2"]  # h:3 did not change: not sent again
    assert changed["h:1"]["ended"] is not None and changed["h:2"]["rss"] == 7 * MiB
    del table.procs[procs["h:3"].key]  # what _forget_old does beyond MAX_PROCESSES
    service.publish(force=True)
    assert sent[-1]["processes"] == [] and sent[-1]["forgotten"] == ["h:3"]
    full = service.message(history=True)
    assert "changed_only" not in full and sorted(p["key"] for p in full["processes"]) == [
        "h:1",
        "h:2",
    ]

"""The processes collector is bounded and refuses replays; the token goes only to the
processes given it (issue 21, item 5). A real collector on loopback UDP and real signed
datagrams, as a holder of the token (a forged rank) would send them."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from vramscope.processes import collector as collector_mod
from vramscope.processes import reporter, wire
from vramscope.processes.collector import Collector
from vramscope.processes.service import ProcessesService
from vramscope.processes.table import (
    HISTORY,
    MAX_ENDED,
    MAX_HISTORY_POINTS,
    MAX_LIVE,
    ProcessTable,
)

MiB = 2**20


class Rank:
    """A forged rank: signs its reports with the token, sends them to the UDP port."""

    def __init__(self, target: tuple[str, int], token: bytes, pid: int) -> None:
        self.target, self.token, self.pid, self.seq = target, token, pid, 0

    def datagram(self, final: bool = False, t: float | None = None) -> bytes:
        self.seq += 1
        report: dict[str, Any] = {
            "v": 1, "pid": self.pid, "ppid": 1, "host": "forged", "seq": self.seq,
            "t": time.time() if t is None else t, "kind": "rank", "index": self.pid,
            "world": 100_000, "cell": None, "final": final,
            "mem": {"rss": MiB, "hwm": None, "uss": None, "pss": None},
            "dev": {}, "dataset": None, "dropped": 0,
        }  # fmt: skip
        return wire.encode(report, self.token)  # type: ignore[arg-type]


@pytest.fixture
def udp() -> Iterator[tuple[Collector, tuple[str, int], socket.socket]]:
    table = ProcessTable()
    coll = Collector(table, lambda: None)
    coll.start()
    host, port = coll.listen("127.0.0.1", 0)[len("udp:") :].rsplit(":", 1)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        yield coll, (host, int(port)), sock
    finally:
        sock.close()
        coll.stop()


def send(coll: Collector, sock: socket.socket, target: tuple[str, int], data: list[bytes]) -> None:
    """In batches the socket's queue holds, each taken in before the next (nothing lost)."""
    for start in range(0, len(data), 50):
        for datagram in data[start : start + 50]:
            sock.sendto(datagram, target)
        time.sleep(0.01)
        coll.drain()


def test_forged_ranks_stay_within_the_live_and_kept_caps(udp: Any) -> None:
    coll, target, sock = udp
    table = coll.table
    forged = 3 * MAX_LIVE
    ranks = [Rank(target, coll.token.encode(), 100_000 + i) for i in range(forged)]
    send(coll, sock, target, [r.datagram() for r in ranks])
    live = [p for p in table.procs.values() if p.ended is None]
    assert len(live) == MAX_LIVE  # the first MAX_LIVE; the others turned away, counted
    assert table.stats()["processes_dropped"] == forged - MAX_LIVE
    # every live one ends (a final report): the table keeps MAX_ENDED of them, and room is
    # made for new live ones; the turned-away ones can now start
    send(coll, sock, target, [r.datagram(final=True) for r in ranks[:MAX_LIVE]])
    assert sum(p.ended is None for p in table.procs.values()) == 0
    send(coll, sock, target, [r.datagram() for r in ranks[MAX_LIVE:]])
    kept = list(table.procs.values())
    assert sum(p.ended is None for p in kept) == MAX_LIVE
    assert sum(p.ended is not None for p in kept) == MAX_ENDED
    assert len(kept) == MAX_LIVE + MAX_ENDED
    # so the panel's full answer is bounded too (it was 16.9 MB for 13,332 forged entries)
    service = ProcessesService(lambda _m: None, lambda: True, lambda: {}, lambda: None)
    service.table = table
    full = json.dumps(service.message(history=True))
    assert len(full) < 2 * MiB, len(full)


def test_a_finished_ranks_replayed_reports_do_not_bring_it_back(udp: Any) -> None:
    coll, target, sock = udp
    table = coll.table
    rank = Rank(target, coll.token.encode(), 4242)
    first = rank.datagram(t=time.time() - 2)
    send(coll, sock, target, [first, rank.datagram(t=time.time() - 1), rank.datagram(True)])
    [proc] = table.procs.values()
    assert proc.ended is not None and proc.exit is not None
    assert proc.exit.text == "exited (final report)"
    stale = table.stale
    send(coll, sock, target, [first, first])  # the replayed first report, twice
    [again] = table.procs.values()
    assert again is proc and again.ended is not None  # no ghost
    assert table.stale == stale + 2
    # a report from outside the time window is refused, whatever its seq
    old = Rank(target, coll.token.encode(), 5151)
    send(coll, sock, target, [old.datagram(t=time.time() - collector_mod.REPLAY_WINDOW - 5)])
    assert "forged:5151" not in table.procs and table.stale == stale + 3
    # a new process given the same pid later (its count starts again) is a new entry
    reused = Rank(target, coll.token.encode(), 4242)
    send(coll, sock, target, [reused.datagram()])
    [fresh] = table.procs.values()
    assert fresh is not proc and fresh.ended is None and fresh.seq == 1


def test_a_forgotten_ranks_replay_is_refused() -> None:
    table = ProcessTable()
    token = b"k" * 64
    ranks = [Rank(("", 0), token, 1 + i) for i in range(MAX_ENDED + 1)]
    firsts = [wire.decode(r.datagram(t=1000.0 + i), token) for i, r in enumerate(ranks)]
    for report in firsts:
        proc, new = table.ingest(report, remote=True)
        assert new and proc is not None
        table.end(proc, _reason())
    assert "forged:1" not in table.procs  # the oldest ended one was forgotten
    stale = table.stale
    assert table.ingest(firsts[0], remote=True) == (None, False)
    assert "forged:1" not in table.procs and table.stale == stale + 1


def test_the_kept_history_is_bounded_across_all_processes() -> None:
    """Every live rank reporting for long would keep MAX_LIVE x HISTORY lane points (307,200;
    with the ended ones 614,400): the table keeps at most MAX_HISTORY_POINTS in all, cut from
    the longest histories (their oldest points), counts what it cut, and keeps short
    histories whole."""
    table = ProcessTable()
    token = b"k" * 64
    quiet = [Rank(("", 0), token, 1 + i) for i in range(2)]
    loud = [Rank(("", 0), token, 100 + i) for i in range(MAX_LIVE - len(quiet))]
    per_loud = MAX_HISTORY_POINTS // len(loud) + 40  # all together over the cap
    assert per_loud < HISTORY  # the per-process cap alone would keep them all
    t, last = 1000.0, {}
    for rank in quiet:
        for _ in range(10):
            t += 0.001
            table.ingest(wire.decode(rank.datagram(t=t), token), remote=True)
    for _ in range(per_loud):
        for rank in loud:
            t += 0.001
            last[rank.pid] = t
            table.ingest(wire.decode(rank.datagram(t=t), token), remote=True)
    sent = 10 * len(quiet) + per_loud * len(loud)
    kept = {p.pid: list(p.history) for p in table.procs.values()}
    assert len(kept) == MAX_LIVE and sent > MAX_HISTORY_POINTS
    total = sum(len(h) for h in kept.values())
    assert total <= MAX_HISTORY_POINTS
    assert table.stats()["history_dropped"] == sent - total > 0
    assert all(len(kept[r.pid]) == 10 for r in quiet)  # short histories whole
    for rank in loud:  # the newest points kept, in order, none in between lost
        times = [point[0] for point in kept[rank.pid]]
        assert times[-1] == last[rank.pid] and times == sorted(times)
        assert len(times) == len(kept[loud[0].pid]) or len(times) == len(kept[loud[0].pid]) + 1
    # what a full get_processes answer carries is bounded the same way
    _, samples = table.snapshot(history=True)
    assert sum(len(points) for points in samples.values()) == total
    assert len(json.dumps(samples)) < MAX_HISTORY_POINTS * 60


def _reason() -> Any:
    from vramscope.processes.procfs import exit_reason

    return exit_reason(0, None)


CHILD = """
import os, sys, time
import vramscope
print("VRAMSCOPE_TOKEN" in os.environ, vramscope.attach(), flush=True)
time.sleep(0.8)
"""


def test_the_token_goes_only_to_the_processes_given_it() -> None:
    service = ProcessesService(lambda _m: None, lambda: True, lambda: {}, lambda: None)
    assert service.start()
    try:
        assert reporter.ENV_TOKEN not in os.environ and reporter.ENV_ADDRESS not in os.environ
        plain = subprocess.run(
            [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60
        )
        assert plain.stdout.split() == ["False", "False"]  # nothing inherited, no collector
        given = subprocess.Popen(
            [sys.executable, "-c", CHILD],
            env={**os.environ, **service.credentials()},
            stdout=subprocess.PIPE,
            text=True,
        )
        out, _ = given.communicate(timeout=60)
        assert out.split() == ["True", "True"]
        assert service.collector is not None
        service.collector.drain()
        assert any(p.pid == given.pid for p in service.table.procs.values())
    finally:
        service.stop()

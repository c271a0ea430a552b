"""The OOM exit reason from the kernel log (issue 13 item 2): the parser on lines in the kernel's
own formats (/dev/kmsg records and dmesg lines), and the decision on a real forked child killed
with SIGKILL: "killed by the OOM killer (SIGKILL)" only when the log names that child's pid
after it started, "killed by SIGKILL" otherwise."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from vramscope.processes import wire
from vramscope.processes.collector import Collector
from vramscope.processes.oomlog import OomLog, killed_pid, parse_dmesg, parse_kmsg
from vramscope.processes.procfs import exit_reason
from vramscope.processes.table import ProcessTable

# As the kernel writes them (mm/oom_kill.c, Linux 5.x-6.x; the old "Kill process ... score"
# line of 4.x names the choice, its "Killed process" line the kill).
KMSG = [
    b"6,2201,899298100,-;python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE"
    b"|__GFP_COMP), order=0, oom_score_adj=0\n",
    b"6,2230,899298180,-;[   4242]  1000  4242  2557606  1988571 16121856        0"
    b"             0 python3\n",
    b"6,2231,899298200,-;oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,"
    b"mems_allowed=0,global_oom,task_memcg=/user.slice/user-1000.slice/session-2.scope,"
    b"task=python3,pid=4242,uid=1000\n",
    b"3,2232,899298254,-;Out of memory: Killed process 4242 (python3) total-vm:10230424kB, "
    b"anon-rss:7954284kB, file-rss:2048kB, shmem-rss:0kB, UID:1000 pgtables:15744kB "
    b"oom_score_adj:0\n SUBSYSTEM=memory\n",
    b"6,2240,901000000,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,"
    b"mems_allowed=0,oom_memcg=/docker/3f2a,task_memcg=/docker/3f2a,task=pt_data_worker,"
    b"pid=5151,uid=0\n",
    b"3,2241,901000050,-;Memory cgroup out of memory: Killed process 5151 (pt_data_worker) "
    b"total-vm:2162344kB, anon-rss:1048576kB, file-rss:65536kB, shmem-rss:0kB, UID:0 "
    b"pgtables:2400kB oom_score_adj:0\n",
    b"6,2242,901020000,-;oom_reaper: reaped process 6161 (pt_main_thread), now anon-rss:0kB, "
    b"file-rss:0kB, shmem-rss:0kB\n",
    b"3,2250,902000000,-;Out of memory: Kill process 7373 (python) score 912 or sacrifice child\n",
    b"4,2260,903000000,-;__vm_enough_memory: pid: 25728, comm: python, bytes: 4398047559680 "
    b"not enough memory for the allocation\n",
]


def test_kmsg_records_give_time_and_text() -> None:
    seconds, text = parse_kmsg(KMSG[3])
    assert seconds == pytest.approx(899.298254)
    assert text.startswith(b"Out of memory: Killed process 4242 (python3)")
    assert b"SUBSYSTEM" not in text  # the record's continuation lines are not its text


def test_only_the_oom_killers_victims_are_named() -> None:
    named = [killed_pid(parse_kmsg(record)[1]) for record in KMSG]
    # the invoker, the task table, the 4.x choice and a refused allocation name no victim
    assert named == [None, None, 4242, 4242, 5151, 5151, 6161, None, None]


def test_dmesg_lines() -> None:
    assert parse_dmesg(b"[ 8123.456789] Out of memory: Killed process 4242 (python3) x") == (
        pytest.approx(8123.456789),
        b"Out of memory: Killed process 4242 (python3) x",
    )
    assert parse_dmesg(b"Out of memory: Killed process 9 (a b)") == (
        None,
        b"Out of memory: Killed process 9 (a b)",
    )
    assert killed_pid(b"oom-kill:constraint=CONSTRAINT_NONE,task=Web Content,pid=77,uid=1") == 77


def dmesg_log(tmp_path: Path, lines: list[str]) -> OomLog:
    """An OomLog reading ``lines`` through its dmesg path (a real subprocess), no /dev/kmsg."""
    path = tmp_path / "dmesg.txt"
    path.write_text("".join(line + "\n" for line in lines))
    return OomLog(kmsg=str(tmp_path / "no-kmsg"), dmesg=("cat", str(path)))


def test_evidence_is_matched_by_pid_and_newer_than_the_process(tmp_path: Path) -> None:
    log = dmesg_log(
        tmp_path,
        [
            "[  100.000001] Out of memory: Killed process 4242 (python3) total-vm:1kB",
            "[  200.500000] oom-kill:constraint=CONSTRAINT_NONE,task=python3,pid=5151,uid=0",
        ],
    )
    assert log.evidence(4242, since=50.0) and log.evidence(5151, since=200.0)
    assert not log.evidence(4242, since=150.0)  # an older kill of a reused pid
    assert not log.evidence(4243, since=None)
    assert log.readable


def test_an_unreadable_log_is_no_evidence(tmp_path: Path) -> None:
    log = OomLog(kmsg=str(tmp_path / "no-kmsg"), dmesg=("false",))
    assert not log.evidence(4242) and not log.readable


def test_dev_kmsg_is_read_without_blocking_where_readable() -> None:
    try:
        os.close(os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK))
    except OSError:
        pytest.skip("/dev/kmsg is not readable here (kernel.dmesg_restrict, no CAP_SYSLOG)")
    log = OomLog(dmesg=())
    start = time.monotonic()
    log.evidence(os.getpid())  # the whole ring buffer, then EAGAIN: returns
    log.evidence(os.getpid())  # only what is new
    assert time.monotonic() - start < 2.0
    assert log.readable
    for pid, when in log.kills.items():  # whatever kills this machine's log holds are real
        assert pid > 0 and (when == -1 or 0 <= when <= time.monotonic())
    log.close()


def child_report(pid: int) -> wire.Report:
    """A valid first report of a plain child ``pid`` of this process."""
    return {
        "v": 1, "pid": pid, "ppid": os.getpid(), "host": "h", "seq": 1, "t": time.time(),
        "kind": "child", "index": None, "world": None, "cell": None, "final": False,
        "mem": {"rss": 1, "hwm": None, "uss": None, "pss": None}, "dev": {},
        "dataset": None, "dropped": 0,
    }  # fmt: skip


def killed_child(tmp_path: Path, lines: list[str]) -> dict[str, Any]:
    """Fork a real child, let the collector watch it (one valid report), SIGKILL it, and
    return its info once the collector has seen it end; ``lines`` are the kernel log then,
    with ``{pid}`` and ``{now}`` (seconds since boot) filled in."""
    pid = os.fork()
    if pid == 0:  # the child: wait to be killed
        time.sleep(30)
        os._exit(0)
    try:
        table = ProcessTable()
        path = tmp_path / "dmesg.txt"
        path.write_text("")
        log = OomLog(kmsg=str(tmp_path / "no-kmsg"), dmesg=("cat", str(path)))
        collector = Collector(table, lambda: None, oom_log=log)
        collector._take(wire.encode(child_report(pid), collector.token.encode()), remote=False)
        [proc] = table.procs.values()
        assert proc.ended is None
        os.kill(pid, signal.SIGKILL)
        now = time.monotonic()
        path.write_text("".join(f"[{now:12.6f}] {line.format(pid=pid)}\n" for line in lines))
        deadline = time.monotonic() + 10
        while proc.ended is None and time.monotonic() < deadline:
            collector.drain()
            time.sleep(0.02)
        info = table.info(proc)
        collector.stop()
        return info
    finally:
        os.waitpid(pid, 0)


def test_a_sigkilled_child_named_by_the_oom_killer_is_said_so(tmp_path: Path) -> None:
    info = killed_child(
        tmp_path, ["Memory cgroup out of memory: Killed process {pid} (python) total-vm:1kB"]
    )
    assert info["exit"] == "killed by the OOM killer (SIGKILL)"
    assert info["oom"] is True and info["signal"] == signal.SIGKILL


def test_a_sigkilled_child_without_oom_evidence_is_killed_by_sigkill(tmp_path: Path) -> None:
    other = "Out of memory: Killed process 1 (init) total-vm:1kB"  # another pid's kill
    info = killed_child(tmp_path, [other, "oom_reaper: reaped process 1 (init), now x"])
    assert info["exit"] == "killed by SIGKILL" and info["oom"] is False


def test_a_late_log_line_amends_the_reason(tmp_path: Path) -> None:
    """The OOM killer's line written after the exit was seen: the reason is amended."""
    table = ProcessTable()
    path = tmp_path / "dmesg.txt"
    path.write_text("")
    log = OomLog(kmsg=str(tmp_path / "no-kmsg"), dmesg=("cat", str(path)))
    collector = Collector(table, lambda: None, oom_log=log)
    proc, _ = table.ingest(child_report(4_000_001), remote=False)
    seen = time.monotonic() - 1.0
    assert not collector._in_oom_log(proc, seen)
    table.end(proc, exit_reason(None, signal.SIGKILL))
    path.write_text(f"[{time.monotonic():12.6f}] Out of memory: Killed process 4000001 (x) t\n")
    collector._recheck_oom()
    assert table.info(proc)["exit"] == "killed by the OOM killer (SIGKILL)"
    assert not collector._oom_recheck


def test_a_child_that_ends_between_the_two_looks_keeps_its_signal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The collector asks for a child's status, then whether it still runs: a child that
    turned zombie in between (seen in a fresh-clone run on a busy machine: "ended") is asked
    again. Here the first look after its end answers "still running", as in that race."""
    from vramscope.processes import collector as collector_module

    real = collector_module.child_status
    raced: list[int] = []

    def racy(fd: int) -> tuple[int | None, int | None] | None:
        status = real(fd)
        if status is not None and not raced:
            raced.append(fd)
            return None  # looked just before it ended
        return status

    monkeypatch.setattr(collector_module, "child_status", racy)
    info = killed_child(tmp_path, [])
    assert raced  # the race was played
    assert info["exit"] == "killed by SIGKILL" and info["signal"] == signal.SIGKILL

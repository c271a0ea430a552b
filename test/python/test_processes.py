"""Child processes and ranks in a real kernel (CPU): DataLoader workers with copy-on-access
detection, fork-started gloo ranks with their peaks, SIGKILL, kernel restart, hostile reports,
remote ranks over loopback with a token."""

from __future__ import annotations

import glob
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from typing import Any, Callable

import pytest

from kernel_harness import BOOTSTRAP, KernelHarness
from vramscope.processes import wire

MiB = 2**20


@pytest.fixture(scope="module")
def pk() -> Iterator[tuple[KernelHarness, str, str]]:
    """A kernel of its own (its children report at 5 Hz), with stream and control comms."""
    old = os.environ.get("VRAMSCOPE_REPORT_HZ")
    os.environ["VRAMSCOPE_REPORT_HZ"] = "5"
    try:
        k = KernelHarness()
    finally:
        if old is None:
            del os.environ["VRAMSCOPE_REPORT_HZ"]
        else:
            os.environ["VRAMSCOPE_REPORT_HZ"] = old
    try:
        assert k.execute(BOOTSTRAP, silent=True)["content"]["status"] == "ok"
        stream = k.comm_open("stream")
        k.comm_data(stream, "hello")
        control = k.comm_open("control")
        k.run_ok("import os, time, torch\nimport vramscope")
        yield k, stream, control
    finally:
        k.close()


def state(k: KernelHarness, control: str) -> dict[str, Any]:
    reply = k.request(control, "get_processes")
    assert reply["type"] == "reply", reply
    result: dict[str, Any] = reply["result"]
    assert result["type"] == "processes" and result["full"] is True
    return result


def wait_for(
    k: KernelHarness, control: str, ok: Callable[[dict[str, Any]], bool], timeout: float = 20
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        current = state(k, control)
        if ok(current) or time.monotonic() > deadline:
            return current
        time.sleep(0.3)


def of_cell(result: dict[str, Any], cell: int) -> list[dict[str, Any]]:
    return [p for p in result["processes"] if p["cell"] == cell]


def cell_record(k: KernelHarness, stream: str, cell_id: str) -> dict[str, Any]:
    for _ in range(50):
        data = k.comm_data(stream, "cell")
        if data["record"]["cell_id"] == cell_id:
            return data["record"]  # type: ignore[no-any-return]
    raise AssertionError(f"no cell message for {cell_id}")


LOADER = """
import numpy as np
from torch.utils.data import DataLoader, Dataset

class Words(Dataset):
    def __init__(self, n, as_numpy):
        self.items = np.arange(n) if as_numpy else [str(i) * 2 for i in range(n)]
    def __len__(self):
        return len(self.items)
    def __getitem__(self, i):
        return int(self.items[i]) if isinstance(self.items, np.ndarray) else len(self.items[i])

{name} = Words(900_000, as_numpy={as_numpy})
for batch in DataLoader({name}, batch_size=512, num_workers=2, shuffle=False):
    time.sleep(0.003)  # a training step: the epoch lasts a few seconds
cell_number = get_ipython().execution_count
"""


def run_loader(k: KernelHarness, stream: str, control: str, name: str, as_numpy: bool) -> Any:
    cell_id = f"loader-{name}"
    k.run_ok(LOADER.format(name=name, as_numpy=as_numpy), cell_id)
    record = cell_record(k, stream, cell_id)
    count = record["execution_count"]
    result = wait_for(k, control, lambda r: len([p for p in of_cell(r, count) if p["ended"]]) == 2)
    return count, record, result


def uss_points(result: dict[str, Any], key: str) -> list[int]:
    return [p[2] for p in result["samples"][key] if p[2] is not None]


def test_dataloader_workers_over_python_objects_copy_on_access(pk: Any) -> None:
    k, stream, control = pk
    count, record, result = run_loader(k, stream, control, "train_words", as_numpy=False)
    workers = of_cell(result, count)
    assert sorted(p["role"] for p in workers) == ["DataLoader worker 0", "DataLoader worker 1"]
    for proc in workers:
        assert proc["kind"] == "worker" and proc["world"] == 2 and not proc["remote"]
        assert proc["ppid"] == k.eval("__import__('os').getpid()")
        uss = uss_points(result, proc["key"])
        assert len(uss) >= 3 and uss[-1] - uss[0] >= 8 * MiB, uss  # copied through the epoch
        assert proc["exit"] in ("exit code 0", "exited"), proc
        assert record["processes"][proc["key"]]["role"] == proc["role"]
        assert record["processes"][proc["key"]]["peak_rss"] >= proc["rss"]
    [finding] = [f for f in result["findings"] if f["cell"] == count]
    assert finding["kind"] == "copy_on_access"
    assert set(finding["workers"]) <= {p["key"] for p in workers}
    assert finding["dataset"]["name"] == "train_words"
    assert finding["dataset"]["type"] == "__main__.Words"
    [items] = finding["dataset"]["containers"]
    assert items["name"] == "train_words.items" and items["length"] == 900_000
    assert items["type"] == "list" and items["bytes"] > 30 * MiB
    assert finding["projected_saving_bytes"] >= 2 * items["bytes"]
    assert any("numpy" in fix for fix in finding["fixes"])
    assert any("persistent_workers" in fix for fix in finding["fixes"])
    # the same data for the optimize advisor, as a function in the kernel
    advisor = k.eval("[f['dataset']['name'] for f in vramscope.processes.findings()]")
    assert "train_words" in advisor


def test_dataloader_workers_over_numpy_do_not_fire(pk: Any) -> None:
    k, stream, control = pk
    count, _record, result = run_loader(k, stream, control, "train_array", as_numpy=True)
    workers = of_cell(result, count)
    assert len(workers) == 2
    for proc in workers:
        uss = uss_points(result, proc["key"])
        assert uss and max(uss) - uss[0] < 8 * MiB, uss
    assert [f for f in result["findings"] if f["cell"] == count] == []


RANKS = """
import tempfile, torch.distributed as dist, torch.multiprocessing as mp

def _rank(rank, world, init, out):
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    extra = torch.ones((rank + 1) * 48 * 2**20 // 4)  # rank 1 holds 48 MiB more than rank 0
    total = torch.ones(1000)
    dist.all_reduce(total)
    time.sleep(0.5)
    del extra
    dist.destroy_process_group()
    with open("/proc/self/status") as fh:
        hwm = [int(l.split()[1]) * 1024 for l in fh if l.startswith("VmHWM:")][0]
    with open(f"{out}/{rank}", "w") as fh:
        fh.write(f"{os.getpid()} {hwm}")

out = tempfile.mkdtemp()
mp.start_processes(_rank, args=(2, "file://" + tempfile.mktemp(), out), nprocs=2,
                   start_method="fork")
measured = {int(r): open(f"{out}/{r}").read() for r in os.listdir(out)}
"""


def test_fork_started_gloo_ranks_with_their_peaks(pk: Any) -> None:
    k, stream, control = pk
    k.run_ok(RANKS, "gloo-ranks")
    record = cell_record(k, stream, "gloo-ranks")
    measured = {
        rank: tuple(int(x) for x in text.split()) for rank, text in k.eval("measured").items()
    }
    peaks = {v["role"]: v for v in record["processes"].values()}
    assert set(peaks) == {"rank 0", "rank 1"}, peaks
    for rank, (pid, hwm) in measured.items():
        key = f"{socket.gethostname()}:{pid}"
        assert record["processes"][key]["role"] == f"rank {rank}"
        # the rank's own VmHWM at its end is the peak the panel shows (its final report)
        assert abs(record["processes"][key]["peak_rss"] - hwm) <= 1 * MiB, (rank, hwm, peaks)
    imbalance = peaks["rank 1"]["peak_rss"] - peaks["rank 0"]["peak_rss"]
    assert 40 * MiB <= imbalance <= 56 * MiB, imbalance
    result = wait_for(k, control, lambda r: all(p["ended"] for p in r["processes"]))
    ranks = [p for p in result["processes"] if p["kind"] == "rank"]
    assert sorted((p["index"], p["world"]) for p in ranks) == [(0, 2), (1, 2)]


def test_sigkilled_child_is_marked_ended(pk: Any) -> None:
    k, _stream, control = pk
    k.run_ok(
        "import multiprocessing\n"
        "sleeper = multiprocessing.get_context('fork').Process(target=time.sleep, args=(60,))\n"
        "sleeper.start()"
    )
    pid = k.eval("sleeper.pid")
    key = f"{socket.gethostname()}:{pid}"
    seen = wait_for(k, control, lambda r: any(p["key"] == key for p in r["processes"]))
    [proc] = [p for p in seen["processes"] if p["key"] == key]
    assert proc["role"] == f"child pid {pid}" and proc["ended"] is None
    os.kill(pid, 9)
    result = wait_for(
        k, control, lambda r: any(p["key"] == key and p["ended"] for p in r["processes"])
    )
    [proc] = [p for p in result["processes"] if p["key"] == key]
    assert proc["exit"] == "killed by SIGKILL" and proc["signal"] == 9 and proc["oom"] is False
    k.run_ok("sleeper.join()")
    assert k.eval("sleeper.exitcode") == -9  # multiprocessing still reaped it: nothing stolen


SPAWNED = (
    "import subprocess, sys\n"
    "spawned = subprocess.Popen([sys.executable, '-c', 'import time, vramscope; "
    "assert vramscope.attach(); held = bytearray(32 * 2**20); time.sleep(1.5)'],\n"
    "    env=vramscope.processes.child_env())"
)


def test_spawned_child_attaches_through_the_environment(pk: Any) -> None:
    k, _stream, control = pk
    k.run_ok(SPAWNED)  # attach() finds the collector in the environment it was given
    pid = k.eval("spawned.pid")
    result = wait_for(
        k, control, lambda r: any(p["pid"] == pid and p["ended"] for p in r["processes"])
    )
    [proc] = [p for p in result["processes"] if p["pid"] == pid]
    assert proc["role"] == f"child pid {pid}" and proc["remote"] is False
    assert proc["exit"] == "exit code 0"
    assert proc["peak_rss"] >= 32 * MiB
    assert k.eval("spawned.wait()") == 0


def _send(address: str, data: bytes) -> None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        sock.sendto(data, address[len("unix:") :])
    finally:
        sock.close()


def _report(pid: int, **changes: Any) -> dict[str, Any]:
    report: dict[str, Any] = {
        "v": 1, "pid": pid, "ppid": 1, "host": socket.gethostname(), "seq": 1,
        "t": time.time(), "kind": "child", "index": None, "world": None, "cell": None,
        "final": False, "mem": {"rss": 10 * MiB, "hwm": None, "uss": None, "pss": None},
        "dev": {}, "dataset": None, "dropped": 0,
    }  # fmt: skip
    report.update(changes)
    return report


def test_hostile_and_malformed_reports_are_refused(pk: Any) -> None:
    k, _stream, control = pk
    address = k.eval("vramscope.processes.child_env()['VRAMSCOPE_COLLECTOR']")
    token = k.eval("vramscope.processes.child_env()['VRAMSCOPE_TOKEN']").encode()
    before = state(k, control)["stats"]
    body = json.dumps(_report(999_001)).encode()
    _send(address, wire.MAGIC + wire.mac(b"not the token", body) + b"\n" + body)  # refused
    _send(address, b"\x00garbage" * 10)  # malformed framing
    bad = json.dumps(_report(999_002, mem={"rss": -5})).encode()
    _send(address, wire.MAGIC + wire.mac(token, bad) + b"\n" + bad)  # malformed field
    huge = json.dumps(_report(999_003, host="h" * 20_000)).encode()
    _send(address, wire.MAGIC + wire.mac(token, huge) + b"\n" + huge)  # too large
    _send(address, wire.encode(_report(999_004), token))  # a valid one: the control
    result = wait_for(k, control, lambda r: any(p["pid"] == 999_004 for p in r["processes"]))
    pids = {p["pid"] for p in result["processes"]}
    assert 999_004 in pids and not pids & {999_001, 999_002, 999_003}
    assert result["stats"]["refused"] == before["refused"] + 1
    assert result["stats"]["malformed"] == before["malformed"] + 3
    assert len(huge) > wire.MAX_DATAGRAM


REMOTE_RANK = """
import os, sys, time
import vramscope
assert vramscope.attach()
held = bytearray({size} * 2**20)
time.sleep(1.0)
"""


def test_remote_ranks_over_loopback_with_a_token(pk: Any) -> None:
    k, _stream, control = pk
    env_lines = k.eval("vramscope.processes.listen('127.0.0.1', 0)")
    address = env_lines["VRAMSCOPE_COLLECTOR"]
    assert address.startswith("udp:127.0.0.1:")
    before = state(k, control)["stats"]
    env = {**os.environ, **env_lines, "VRAMSCOPE_REPORT_HZ": "5", "WORLD_SIZE": "3"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", REMOTE_RANK.format(size=16 * (rank + 1))],
            env={**env, "RANK": str(rank)},
        )
        for rank in range(3)
    ]
    intruder_env = {**env, "RANK": "7", "VRAMSCOPE_TOKEN": "0" * 64}
    procs.append(
        subprocess.Popen([sys.executable, "-c", REMOTE_RANK.format(size=1)], env=intruder_env)
    )
    for proc in procs:
        assert proc.wait(30) == 0
    pids = {p.pid for p in procs[:3]}
    result = wait_for(
        k,
        control,
        lambda r: len([p for p in r["processes"] if p["pid"] in pids and p["ended"]]) == 3,
    )
    remote = sorted((p for p in result["processes"] if p["remote"]), key=lambda p: p["index"])
    assert [p["pid"] for p in remote] == [p.pid for p in procs[:3]]
    host = socket.gethostname()
    assert [p["role"] for p in remote] == [f"rank {i} @ {host}" for i in range(3)]
    assert all(p["exit"] == "exited (final report)" for p in remote)
    for rank, proc in enumerate(remote):  # each rank's 16*(rank+1) MiB is in its peak
        assert proc["peak_rss"] - remote[0]["peak_rss"] >= (16 * rank - 4) * MiB
    assert procs[3].pid not in {p["pid"] for p in result["processes"]}
    assert result["stats"]["refused"] > before["refused"]
    assert result["remote"] == address


def _reporter_threads(pid: int) -> int:
    names = []
    for path in glob.glob(f"/proc/{pid}/task/*/comm"):
        try:
            with open(path) as fh:
                names.append(fh.read().strip())
        except OSError:
            continue
    return sum(1 for n in names if n.startswith("vramscope-rep"))


ESCAPEE = textwrap.dedent(
    """
    escapee = os.fork()
    if escapee == 0:
        os.setsid()  # out of the kernel's process group: survives its restart
        import socket
        for fd in map(int, os.listdir("/proc/self/fd")):  # free the kernel's TCP ports
            try:
                sock = socket.socket(fileno=fd)
            except OSError:
                continue
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                sock.close()
            else:
                sock.detach()
        time.sleep(60)
        os._exit(0)
    """
)


def test_kernel_restart_leaves_no_orphan_reporter(pk: Any) -> None:
    k, _stream, control = pk
    k.run_ok(ESCAPEE)
    pid = k.eval("escapee")
    try:
        wait_for(k, control, lambda r: any(p["pid"] == pid for p in r["processes"]))
        assert _reporter_threads(pid) == 1
        # new ports: the escapee still holds the old kernel's sockets (inherited by fork)
        k.km.restart_kernel(now=True)
        k.kc.wait_for_ready(timeout=60)
        deadline = time.monotonic() + 10
        while _reporter_threads(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert os.path.exists(f"/proc/{pid}"), "the child itself lives on"
        assert _reporter_threads(pid) == 0
    finally:
        os.kill(pid, 9)

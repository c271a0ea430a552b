"""Cost of vramscope's process reporting (issue 13): a training loop with 4 DataLoader workers,
and the kernel's collector at 64 simulated ranks x 10 Hz.

1. Training loop: each block is one epoch of a small conv net over a DataLoader with 4 forked
   workers (fresh workers every epoch: the fork hook, the reporter threads and their /proc
   reads are all inside the block). Three kinds of blocks run in rounds, their order rotating
   from round to round so drift and load on the shared machine hit all alike: ``on`` (the
   bridge's collector started and the fork hook armed: every worker reports at the default
   2 Hz, USS/PSS read at most at 1% of a core), ``off`` and ``off2`` (nothing armed: the A/A
   control). Printed: the median of the per-round ratios on/off (target <= 1.02) and off2/off
   (the control: what noise alone gives), with quartiles; and what the workers sent.
2. Collector: a separate process sends valid reports for 64 ranks at 10 Hz each (640/s) to
   the collector for ``--seconds``; the collector thread's own CPU time (from
   /proc/self/task/<tid>/stat) over the wall time is its cost, publishing included (a
   ``processes`` message every 0.5 s, serialised with json as the comm would).

``--record`` writes the figures to bench/RESULTS.md. No asserts.

    python bench/processes_overhead.py [--rounds 8] [--seconds 10] [--record]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import socket
import statistics
import threading
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from _results import record
from vramscope.processes import reporter, wire
from vramscope.processes.service import ProcessesService

MiB = 2**20


class Images(Dataset):  # type: ignore[type-arg]
    """Synthetic 3x32x32 images in one numpy array, with a light per-sample transform."""

    def __init__(self, n: int) -> None:
        rng = np.random.default_rng(0)
        self.x = rng.standard_normal((n, 3, 32, 32), dtype=np.float32)
        self.y = rng.integers(0, 10, n)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        x = torch.from_numpy(self.x[i])
        if i % 2:
            x = x.flip(-1)
        return (x - x.mean()) / (x.std() + 1e-6), int(self.y[i])


def make_model() -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(4),
        torch.nn.Flatten(),
        torch.nn.Linear(512, 10),
    )
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def epoch(dataset: Images, model: torch.nn.Module, opt: torch.optim.Optimizer) -> float:
    start = time.perf_counter()
    loader = DataLoader(dataset, batch_size=64, num_workers=4, shuffle=True)
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return time.perf_counter() - start


def make_service(sizes: list[int]) -> ProcessesService:
    """The bridge's service with a stream open: each message serialised as the comm would."""
    return ProcessesService(
        send=lambda m: sizes.append(len(json.dumps(m))),
        wants=lambda: True,
        namespace=lambda: None,
        execution_count=lambda: 1,
    )


def quartiles(values: list[float]) -> tuple[float, float, float]:
    q = statistics.quantiles(values, n=4)
    return q[0], statistics.median(values), q[2]


def training(rounds: int, samples: int) -> list[str]:
    torch.set_num_threads(1)
    dataset = Images(samples)
    model, opt = make_model()
    published: list[int] = []
    service = make_service(published)
    epoch(dataset, model, opt)  # warm-up (torch thread pools, page cache)
    times: dict[str, list[float]] = {"on": [], "off": [], "off2": []}
    kinds = ["on", "off", "off2"]
    for r in range(rounds):
        order = kinds[r % 3 :] + kinds[: r % 3]
        for kind in order:
            if kind == "on":
                service.start()
            times[kind].append(epoch(dataset, model, opt))
            if kind == "on":
                time.sleep(0.6)  # the last reports and one publish land outside the block
                service.stop()
    on_off = [a / b for a, b in zip(times["on"], times["off"])]
    aa = [a / b for a, b in zip(times["off2"], times["off"])]
    stats = service.table.stats()
    workers = [p for p in service.table.procs.values() if p.kind == "worker"]
    lines = [
        f"training loop, 4 DataLoader workers, {samples} samples/epoch, {rounds} rounds: "
        f"epoch median on {statistics.median(times['on']):.2f} s, "
        f"off {statistics.median(times['off']):.2f} s, "
        f"off2 {statistics.median(times['off2']):.2f} s",
        "ratio on/off per round: median {1:.3f} (quartiles {0:.3f}-{2:.3f}); total {3:.3f}".format(
            *quartiles(on_off), sum(times["on"]) / sum(times["off"])
        ),
        "A/A control off2/off: median {1:.3f} (quartiles {0:.3f}-{2:.3f}); total {3:.3f}".format(
            *quartiles(aa), sum(times["off2"]) / sum(times["off"])
        ),
        f"while on: {len(workers)} workers reported {stats['received']} reports "
        f"({stats['dropped']} dropped), {len(published)} processes messages "
        f"(median {statistics.median(published or [0]) / 1024:.1f} KiB)",
    ]
    return lines


def direct_cost(reports: int) -> list[str]:
    """What one report costs the reporting process (CPU time of the calling thread): the floor
    the A/B above cannot resolve on a shared machine."""
    sizes: list[int] = []
    service = make_service(sizes)
    service.start()
    reporter.configure(None)
    assert service.collector is not None and service.collector.address is not None
    target = reporter.Target(service.collector.address, service.collector.token.encode())
    rep = reporter.Reporter(target, forked=False)
    rep.report()  # opens the socket and /proc descriptors
    rep._next_rollup = float("inf")  # plain reports: statm, VmHWM, role, JSON, HMAC, send
    start = time.thread_time()
    for _ in range(reports):
        rep.report()
    plain = (time.thread_time() - start) / reports
    rollups = max(10, reports // 20)
    start = time.thread_time()
    for _ in range(rollups):
        rep._next_rollup = 0.0
        rep.report()
    rollup = (time.thread_time() - start) / rollups - plain
    rss = rep._reader.rss() if rep._reader else 0
    rep.stop()
    service.stop()
    hz = reporter.DEFAULT_HZ
    share = plain * hz + min(rollup * hz, reporter.ROLLUP_CPU_SHARE)
    return [
        f"one report, without USS/PSS: {1e6 * plain:.0f} us CPU; the USS/PSS read "
        f"(smaps_rollup) of this {rss / MiB:.0f} MiB process: {1e3 * rollup:.2f} ms CPU",
        f"a worker reporting at the default {hz:g} Hz (USS/PSS capped at "
        f"{100 * reporter.ROLLUP_CPU_SHARE:g}% of a core) spends at most {100 * share:.2f}% "
        "of one core on it",
    ]


def _sender(address: str, token: bytes, ranks: int, hz: float, seconds: float) -> None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = address[len("unix:") :]
    host = socket.gethostname()
    start = time.monotonic()
    seq = 0
    tick = 0
    while time.monotonic() - start < seconds:
        seq += 1
        for rank in range(ranks):
            report: wire.Report = {
                "v": 1, "pid": 4_000_000 + rank, "ppid": os.getppid(), "host": host,
                "seq": seq, "t": time.time(), "kind": "rank", "index": rank,
                "world": ranks, "cell": 1, "final": False,
                "mem": {"rss": (500 + rank + seq % 50) * MiB, "hwm": 600 * MiB,
                        "uss": (100 + seq % 50) * MiB if seq % 5 == 0 else None,
                        "pss": 300 * MiB if seq % 5 == 0 else None},
                "dev": {"cuda:0": {"allocated": (rank + 1) * 100 * MiB,
                                   "reserved": (rank + 2) * 100 * MiB,
                                   "peak": (rank + 3) * 100 * MiB}},
                "dataset": None, "dropped": 0,
            }  # fmt: skip
            with contextlib.suppress(BlockingIOError):
                sock.sendto(wire.encode(report, token), path)
        tick += 1
        delay = start + tick / hz - time.monotonic()
        if delay > 0:
            time.sleep(delay)


def _thread_cpu(tid: int) -> float:
    with open(f"/proc/self/task/{tid}/stat", "rb") as fh:
        fields = fh.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def collector(ranks: int, hz: float, seconds: float) -> list[str]:
    sizes: list[int] = []
    service = make_service(sizes)
    service.start()
    reporter.configure(None)  # only the simulated ranks report
    assert service.collector is not None
    thread = next(t for t in threading.enumerate() if t.name == "vramscope-collector")
    assert thread.native_id is not None
    ctx = multiprocessing.get_context("spawn")
    sender = ctx.Process(
        target=_sender, args=(service.collector.address, service.collector.token.encode(),
                              ranks, hz, seconds)
    )  # fmt: skip
    sender.start()
    while not service.table.received and sender.is_alive():
        time.sleep(0.01)  # the clock starts with the first report (spawn takes a while)
    cpu0, wall0, taken0 = _thread_cpu(thread.native_id), time.monotonic(), service.table.received
    sender.join()
    cpu, wall = _thread_cpu(thread.native_id) - cpu0, time.monotonic() - wall0
    time.sleep(0.6)
    stats = service.table.stats()
    taken = stats["received"] - taken0
    service.stop()
    return [
        f"collector, {ranks} simulated ranks x {hz:g} Hz for {seconds:g} s: "
        f"{stats['received']} reports taken ({taken / wall:.0f}/s, "
        f"{stats['dropped']} dropped, {stats['malformed']} malformed)",
        f"collector thread CPU {cpu:.2f} s over {wall:.1f} s wall = {100 * cpu / wall:.1f}% of "
        f"one core ({1e6 * cpu / max(1, taken):.0f} us per report, publishing "
        f"included: {len(sizes)} processes messages, median "
        f"{statistics.median(sizes or [0]) / 1024:.0f} KiB)",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--samples", type=int, default=3000)
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--hz", type=float, default=10.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    lines = training(args.rounds, args.samples)
    lines += direct_cost(2000)
    lines += collector(args.ranks, args.hz, args.seconds)
    lines.append(f"machine: {os.cpu_count()} CPU cores, torch {torch.__version__}")
    for line in lines:
        print(line)
    if args.record:
        record("processes_overhead", lines)


if __name__ == "__main__":
    main()

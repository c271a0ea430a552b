"""Cost of vramscope's process reporting (issue 13): a training loop with 4 DataLoader workers,
and the kernel's collector at 64 simulated ranks x 10 Hz.

1. Training loop: each block is one short epoch of a small conv net over a DataLoader with 4
   forked workers (``persistent_workers=False``: fresh workers every epoch, so the fork hook,
   the reporter threads and their /proc reads are all inside the block, and the workers are
   reaped at its end). Three kinds of blocks run in many short rounds, their order going through
   all six permutations from round to round so drift and load on the shared machine hit all
   alike: ``on`` (the bridge's collector started and the fork hook armed: every worker reports
   at the default 2 Hz; USS/PSS not in a worker's first 2 s, then at most at 1% of a core for 4
   reads and 0.25% after: ``--samples`` sets how long the workers live), ``off`` and ``off2``
   (nothing armed: the A/A control). Each block is measured twice: wall time, and CPU time
   summed over the kernel process (all its threads, the collector's included) and its reaped
   workers (``getrusage`` SELF + CHILDREN), which the other load on a shared machine disturbs
   far less than wall time. Printed for both: the median of the per-round ratios on/off (target
   <= 1.02) next to off2/off (the A/A control: what noise alone gives), with quartiles; and what
   the workers sent.
2. Collector: a separate process sends valid reports for 64 ranks at 10 Hz each (640/s) to
   the collector for ``--seconds``; the collector thread's own CPU time (from
   /proc/self/task/<tid>/stat) over the wall time is its cost, publishing included (a
   ``processes`` message every 0.5 s, serialised with json as the comm would).

``--record`` writes the figures to bench/RESULTS.md (about 2-3 minutes on 2 cores; on a
loaded machine the rounds stop after ``--budget`` seconds, 200 by default, and the figures say
how many ran, so a run stays under 5 minutes). ``--quick`` is a smoke run of the same (about
40 s). No asserts.

    python bench/processes_overhead.py [--rounds 30] [--samples 2000] [--seconds 10] [--record]
    python bench/processes_overhead.py --quick
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import multiprocessing
import os
import resource
import socket
import statistics
import threading
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from _results import print_and_record
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


def epoch(dataset: Images, model: torch.nn.Module, opt: torch.optim.Optimizer) -> None:
    loader = DataLoader(
        dataset, batch_size=64, num_workers=4, shuffle=True, persistent_workers=False
    )
    for x, y in loader:  # exhausted: the iterator shuts its workers down and reaps them
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def block(
    dataset: Images, model: torch.nn.Module, opt: torch.optim.Optimizer
) -> tuple[float, float, float]:
    """One epoch: (wall s, CPU s of the kernel process, CPU s of its workers)."""
    self0, children0 = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    epoch(dataset, model, opt)
    wall = time.perf_counter() - start
    self1, children1 = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    return wall, self1 - self0, children1 - children0


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


def ratio_line(name: str, on: list[float], off: list[float], off2: list[float]) -> str:
    """Per-round ratios on/off next to the A/A control off2/off: medians and quartiles."""
    ab = [a / b for a, b in zip(on, off)]
    aa = [a / b for a, b in zip(off2, off)]
    return (
        "{name} per round: on/off median {1:.3f} (quartiles {0:.3f}-{2:.3f}), ".format(
            *quartiles(ab), name=name
        )
        + "A/A off2/off median {1:.3f} (quartiles {0:.3f}-{2:.3f}); ".format(*quartiles(aa))
        + f"totals on/off {sum(on) / sum(off):.3f}, off2/off {sum(off2) / sum(off):.3f}"
    )


def training(rounds: int, samples: int, budget: float) -> list[str]:
    torch.set_num_threads(1)
    dataset = Images(samples)
    model, opt = make_model()
    published: list[int] = []
    service = make_service(published)
    epoch(dataset, model, opt)  # warm-up (torch thread pools, page cache)
    kinds = ("on", "off", "off2")
    wall: dict[str, list[float]] = {k: [] for k in kinds}
    cpu: dict[str, list[float]] = {k: [] for k in kinds}
    kernel_cpu: dict[str, list[float]] = {k: [] for k in kinds}
    orders = list(itertools.permutations(kinds))
    start = time.monotonic()
    done = 0
    for r in range(rounds):
        if done >= 6 and time.monotonic() - start > budget:
            break  # a loaded machine: fewer rounds rather than an endless run (said below)
        done += 1
        for kind in orders[r % len(orders)]:
            if kind == "on":
                service.start()
            w, own, workers = block(dataset, model, opt)
            wall[kind].append(w)
            cpu[kind].append(own + workers)
            kernel_cpu[kind].append(own)
            if kind == "on":
                time.sleep(0.3)  # the last reports and one publish land outside the block
                service.stop()
    stats = service.table.stats()
    workers = [p for p in service.table.procs.values() if p.kind == "worker"]
    med = statistics.median
    cut = "" if done == rounds else f" (of {rounds}: the {budget:g} s budget ran out)"
    return [
        f"training loop, 4 DataLoader workers (fresh each epoch), {samples} samples/epoch, "
        f"{done} rounds{cut}"
        " (order through all 6 permutations): epoch wall median "
        f"on {med(wall['on']):.3f} s, off {med(wall['off']):.3f} s, off2 {med(wall['off2']):.3f} s;"
        f" CPU per epoch (off, medians) kernel {med(kernel_cpu['off']):.3f} s + workers "
        f"{med(cpu['off']) - med(kernel_cpu['off']):.3f} s",
        ratio_line("wall time", wall["on"], wall["off"], wall["off2"]),
        ratio_line("CPU time (kernel + workers)", cpu["on"], cpu["off"], cpu["off2"]),
        f"while on: {len(workers)} workers reported {stats['received']} reports "
        f"({stats['dropped']} dropped), {len(published)} processes messages "
        f"(median {statistics.median(published or [0]) / 1024:.1f} KiB)",
    ]


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
        f"{100 * reporter.QUICK_ROLLUP_SHARE:g}% of a core for its first "
        f"{reporter.QUICK_ROLLUPS} reads, {100 * reporter.ROLLUP_CPU_SHARE:g}% after) "
        f"spends at most {100 * share:.2f}% of one core on it once past them",
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
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--hz", type=float, default=10.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--record", action="store_true")
    parser.add_argument(
        "--budget", type=float, default=200.0, help="seconds of training rounds at most"
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run: 6 short rounds")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.samples, args.seconds = 6, 1000, 3.0
    start = time.monotonic()
    lines = training(args.rounds, args.samples, args.budget)
    lines += direct_cost(500 if args.quick else 2000)
    lines += collector(args.ranks, args.hz, args.seconds)
    lines.append(
        f"machine: {os.cpu_count()} CPU cores, load average {os.getloadavg()[0]:.1f} at the end, "
        f"torch {torch.__version__}; run took {time.monotonic() - start:.0f} s"
    )
    print_and_record("processes_overhead", lines, args.record)


if __name__ == "__main__":
    main()

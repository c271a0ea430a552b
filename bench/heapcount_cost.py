"""What the CPU heap counter costs the code it counts: its allocator entries patched against
put back, side by side in one process (issues 19, 21).

The counter (vramscope/devices/heapcount.c) adds a chunk-size read and two atomic operations
to every malloc and free. Each round runs one block of each workload per arm, in a rotating
order: ``counted`` (patched), ``plain`` and ``plain2`` (put back; ``plain2/plain`` is the A/A
control). Workloads: a training step of a small MLP (torch, default threads: its intra-op
threads allocate too), a forward+backward of a GPT-style block at batch 1 (many small
tensors), and a pure allocation loop (``bytearray`` of 2 KB, made and dropped: malloc and
free and little else, the worst case). Printed: the median over rounds of each block's time
against ``plain`` in the same round, and the quartiles. No asserts.

    python bench/heapcount_cost.py [--rounds 30] [--record]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

from _results import print_and_record

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python_bridge"))

ARMS = ("counted", "plain", "plain2")


def workloads() -> dict[str, Callable[[], None]]:
    import torch
    from torch import nn

    torch.manual_seed(0)
    mlp = nn.Sequential(*[nn.Sequential(nn.Linear(256, 256), nn.GELU()) for _ in range(8)])
    opt = torch.optim.AdamW(mlp.parameters())
    x, y = torch.randn(64, 256), torch.randn(64, 256)

    def mlp_step() -> None:
        for _ in range(10):
            opt.zero_grad()
            nn.functional.mse_loss(mlp(x), y).backward()
            opt.step()

    layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
    tokens = torch.randn(1, 16, 64)

    def small_tensors() -> None:
        for _ in range(20):
            layer(tokens).sum().backward()

    def alloc_loop() -> None:
        for _ in range(20000):
            bytearray(2000)

    return {"mlp step": mlp_step, "small tensors": small_tensors, "malloc/free": alloc_loop}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--record", action="store_true", help="write to bench/RESULTS.md")
    args = parser.parse_args()

    from vramscope.devices.cpu import CpuDevice

    cpu = CpuDevice()
    if cpu.heap is None:
        sys.exit("no heap counter here")
    work = workloads()
    for fn in work.values():
        fn()  # warm
    times: dict[str, dict[str, list[float]]] = {w: {a: [] for a in ARMS} for w in work}
    state = "counted"
    for r in range(args.rounds):
        order = ARMS[r % 3 :] + ARMS[: r % 3]
        for arm in order if r % 2 == 0 else order[::-1]:
            if (arm == "counted") != (state == "counted"):
                (cpu.resume if arm == "counted" else cpu.suspend)()
                state = arm
            for name, fn in work.items():
                start = time.perf_counter()
                fn()
                times[name][arm].append(time.perf_counter() - start)
    cpu.resume()
    lines = [f"`python bench/heapcount_cost.py --rounds {args.rounds}`; one process; arms rotate"]
    for name, arms in times.items():
        base = arms["plain"]
        parts = []
        for arm in ("plain2", "counted"):
            ratios = sorted(a / b for a, b in zip(arms[arm], base))
            q = statistics.quantiles(ratios, n=4)
            label = "A/A" if arm == "plain2" else "counted"
            parts.append(f"{label} {statistics.median(ratios):.3f} [{q[0]:.3f}..{q[2]:.3f}]")
        block = statistics.median(base) * 1e3
        lines.append(f"{name} ({block:.1f} ms a block): " + ", ".join(parts))
    print_and_record("heapcount_cost", lines, args.record)


if __name__ == "__main__":
    main()

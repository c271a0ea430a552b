"""Cost of the vramscope sampler on a CPU training loop.

A small MLP trains for a fixed number of steps, in interleaved runs with the sampler at
``--hz`` (default 10) and with it off (0 Hz); the ratio of medians is printed (target
<= 1.01). ``--record`` appends the figures to bench/RESULTS.md. No asserts.

    python bench/sampler_overhead.py [--rounds 7] [--steps 100] [--hz 10] [--record]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from cell_overhead import record
from vramscope.runtime import Runtime


def train(model: torch.nn.Module, opt: torch.optim.Optimizer, steps: int) -> float:
    data = torch.randn(256, 512)
    target = torch.randn(256, 10)
    start = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(data), target)
        loss.backward()
        opt.step()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--hz", type=float, default=10.0)
    parser.add_argument("--record", action="store_true", help="append to bench/RESULTS.md")
    args = parser.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)  # shared cores: one thread keeps runs comparable
    model = torch.nn.Sequential(
        torch.nn.Linear(512, 1024),
        torch.nn.ReLU(),
        torch.nn.Linear(1024, 1024),
        torch.nn.ReLU(),
        torch.nn.Linear(1024, 10),
    )
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    runtime = Runtime()
    train(model, opt, 10)  # warm up

    on: list[float] = []
    off: list[float] = []
    for _ in range(args.rounds):
        for hz, times in ((args.hz, on), (0.0, off)):
            runtime.sampler.set_rate(hz)
            times.append(train(model, opt, args.steps))
    ticks = runtime.sampler.ticks
    runtime.shutdown()
    start = time.perf_counter()
    for _ in range(2000):
        runtime.sampler.tick()
    tick_us = (time.perf_counter() - start) / 2000 * 1e6

    med_on, med_off = statistics.median(on), statistics.median(off)
    lines = [
        f"MLP 512-1024-1024-10, batch 256, {args.steps} Adam steps, 1 thread, {args.rounds} rounds",
        f"sampler at {args.hz:g} Hz: median {med_on * 1000:.1f} ms; off: {med_off * 1000:.1f} ms",
        f"ratio of medians {med_on / med_off:.4f} (target <= 1.01); "
        f"ratio of best-of {min(on) / min(off):.4f}; {ticks} samples taken",
        f"one sampler tick (all device reads + ring buffer): {tick_us:.1f} us = "
        f"{tick_us * args.hz / 1e4:.4f}% of one core at {args.hz:g} Hz",
    ]
    print("\n".join(lines))
    if args.record:
        record("sampler_overhead", lines)


if __name__ == "__main__":
    main()

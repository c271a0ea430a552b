"""Overhead of a *measured* forward+backward (CPU): the step activation tracking measures.

Tracking measures the first call of each model in a cell (and again on a change, see
vramscope/insight/activations.py); later steps run without its hooks, so this is the cost of
one step per cell, not of every step (bench/training_overhead.py measures whole training
cells). A 4-layer TransformerEncoder (d=256, 8 heads, batch 8 x seq 128 by default); steps
with and without the InsightEngine's hooks armed are interleaved in one process (the order
alternates each round; ``install`` arms the hooks, so every tracked step is measured) and the
medians compared. Prints results; ``--record`` writes them to bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn

from _results import print_and_record
from vramscope.insight import InsightEngine


def step(model: nn.Module, x: torch.Tensor) -> float:
    start = time.perf_counter()
    model(x).square().mean().backward()
    elapsed = time.perf_counter() - start
    model.zero_grad(set_to_none=True)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--record", action="store_true", help="write to bench/RESULTS.md")
    args = parser.parse_args()

    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(args.d_model, 8, 4 * args.d_model, batch_first=True)
    model = nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)
    x = torch.randn(args.batch, args.seq, args.d_model)
    engine = InsightEngine(namespace={"model": model})

    for _ in range(2):  # warm-up both paths
        step(model, x)
        engine.install()
        step(model, x)
        engine.uninstall()

    engine.install()
    loss = model(x).square().mean()
    saved = engine.tracker.total_bytes()  # live saved bytes after forward = the peak
    loss.backward()
    engine.uninstall()
    model.zero_grad(set_to_none=True)

    off: list[float] = []
    on: list[float] = []
    for i in range(args.rounds):
        for tracked in (i % 2 == 0, i % 2 == 1):
            if tracked:
                engine.install()
                on.append(step(model, x))
                engine.uninstall()
            else:
                off.append(step(model, x))

    med_off, med_on = statistics.median(off), statistics.median(on)
    lines = [
        f"model: TransformerEncoder x4, d={args.d_model}, 8 heads, "
        f"batch {args.batch} x seq {args.seq}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads",
        f"rounds: {args.rounds} (interleaved, order alternating)",
        f"saved activations after forward (tracked): {saved / 2**20:.2f} MiB",
        f"median fwd+bwd without tracking: {med_off * 1000:.1f} ms",
        f"median fwd+bwd with tracking:    {med_on * 1000:.1f} ms",
        f"ratio of medians: {med_on / med_off:.3f} (a measured step; target <= 1.05)",
        f"ratio of best-of: {min(on) / min(off):.3f} (less sensitive to load on shared cores)",
    ]
    print_and_record("activation_overhead", lines, args.record)


if __name__ == "__main__":
    main()

"""Time of the holders scan (and a whole InsightEngine.after_cell) on a crowded namespace.

The namespace holds 1,000 tensors, a 10,000-element list of tensors, a small model and its
Adam optimizer. Prints medians; ``--record`` writes them to bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import torch
from torch import nn

from _results import print_and_record
from vramscope.insight import InsightEngine
from vramscope.insight.holder_scan import scan_holders
from vramscope.insight.holders import ScanLimits


def median_ms(fn: Any, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--record", action="store_true", help="write to bench/RESULTS.md")
    args = parser.parse_args()

    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = torch.optim.Adam(model.parameters())
    model(torch.randn(8, 256)).sum().backward()
    opt.step()
    ns: dict[str, Any] = {f"t{i}": torch.zeros(64) for i in range(1000)}
    ns.update(big_list=[torch.zeros(16) for _ in range(10_000)], model=model, opt=opt)
    limits = ScanLimits(min_bytes=1)

    full = median_ms(lambda: scan_holders(ns, None, time.perf_counter() + 60, limits), args.runs)
    engine = InsightEngine(namespace=ns)
    cell = median_ms(lambda: engine.after_cell(1000), args.runs)
    default = engine.after_cell(20)
    lines = [
        "namespace: 1,000 tensors + a 10,000-element list + model + Adam",
        f"holders scan, unbounded budget (list walk capped at {limits.max_items}): "
        f"{full:.2f} ms median of {args.runs}",
        f"after_cell (layers + breakdown + holders): {cell:.2f} ms median",
        f"after_cell(20 ms budget): scan_ms={default['scan_ms']:.2f}, "
        f"skipped={default['skipped']!r}",
    ]
    print_and_record("holders_scan", lines, args.record)


if __name__ == "__main__":
    main()

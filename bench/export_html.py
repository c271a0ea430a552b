"""Size and time of the HTML export of an 8-hour 10 Hz session (288,000 samples).

The session is synthetic but shaped like a real one: cpu and cuda:0 sampled at 10 Hz for 8 h
(training-loop saw-teeth with rare one-sample spikes), 480 cells, 40 layers and 20 holders.
Targets: < 5 MB and < 3 s. Each case runs twice in one process (A/A: the spread between two
identical runs is the noise); the downsampled file is compared with one that embeds every
sample. ``--record`` writes the results to bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import time
from typing import Any

from _results import print_and_record
from vramscope.exports import chart_data, render

MIB = 1 << 20


def session(n: int = 288_000, hz: float = 10.0, n_cells: int = 480) -> dict[str, Any]:
    rng = random.Random(0)
    t0 = 1_795_000_000.0
    samples = []
    for i in range(n):
        phase = (i % 20) / 20.0  # a 2 s training step
        cuda = int(2048 * MIB + 1024 * MIB * math.sin(math.pi * phase)) + rng.randrange(MIB)
        if rng.random() < 1e-4:
            cuda += 4096 * MIB  # a short spike that only a peak-keeping downsampler shows
        samples.append(
            {
                "t": t0 + i / hz,
                "d": {
                    "cpu": {"used": 900 * MIB + rng.randrange(64 * MIB), "reserved": 1200 * MIB},
                    "cuda:0": {
                        "used": cuda,
                        "reserved": 6144 * MIB,
                        "peak": cuda + MIB,
                        "device_used": 7000 * MIB,
                        "device_total": 81920 * MIB,
                    },
                },
            }
        )
    span = n / hz
    cells = [
        {
            "cell_id": f"cell-{i}",
            "execution_count": i + 1,
            "start_time": t0 + i * span / n_cells,
            "duration": span / n_cells * 0.8,
            "ok": True,
            "error_type": None,
            "oom": False,
            "code_head": f"loss = train_step(model, batch_{i})  # step {i}",
            "devices": {
                d: {
                    "before_bytes": 1000 * MIB,
                    "after_bytes": 1000 * MIB + i * MIB,
                    "delta_bytes": i * MIB,
                    "peak_delta_bytes": (i + 50) * MIB,
                }
                for d in ("cpu", "cuda:0")
            },
        }
        for i in range(n_cells)
    ]
    return {
        "schema": "vramscope.report/1",
        "bridge_version": "bench",
        "protocol_version": "1.1.0",
        "session_id": "bench",
        "created": t0 + span,
        "kernel": {
            "pid": 1,
            "python": "3.11",
            "torch_version": "2.13",
            "cuda_available": True,
            "mps_available": False,
        },
        "devices": [
            {
                "id": "cpu",
                "kind": "cpu",
                "name": "CPU",
                "total_bytes": 64 << 30,
                "used_bytes": 900 * MIB,
                "reserved_bytes": 1200 * MIB,
                "initialized": True,
                "source": "mallinfo2",
            },
            {
                "id": "cuda:0",
                "kind": "cuda",
                "name": "NVIDIA H100",
                "total_bytes": 80 << 30,
                "used_bytes": 2048 * MIB,
                "reserved_bytes": 6144 * MIB,
                "initialized": True,
                "source": "cuda-allocator",
            },
        ],
        "settings": {
            "sample_hz": hz,
            "cuda_peak_policy": "reset",
            "insight": True,
            "insight_budget_ms": 20,
            "history_limit": n,
        },
        "cells": cells,
        "samples": samples,
        "model": "model",
        "models": [{"name": "model", "type": "GPT", "param_bytes": 500 * MIB}],
        "layers": [
            {
                "path": f"blocks.{i}.attn",
                "type": "Attention",
                "saved_bytes": i * MIB,
                "peak_saved_bytes": (i + 5) * MIB,
                "output_shape": [8, 512, 768],
                "param_bytes": 9 * MIB,
                "grad_bytes": 9 * MIB,
            }
            for i in range(40)
        ],
        "breakdown": {
            "cuda:0": {
                "total_bytes": 2048 * MIB,
                "parameters": 500 * MIB,
                "gradients": 500 * MIB,
                "optimizer_state": 1000 * MIB,
                "activations": 40 * MIB,
                "other": 8 * MIB,
            }
        },
        "holders": [
            {
                "name": f"t{i}",
                "kind": "tensor",
                "bytes": (20 - i) * MIB,
                "explanation": "a tensor variable",
                "fix": f"del t{i}",
            }
            for i in range(20)
        ],
        "client_errors": [],
        "notebook": "train.ipynb",
    }


def timed(fn: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--record", action="store_true", help="write to bench/RESULTS.md")
    args = parser.parse_args()
    report = session()
    n = len(report["samples"])
    runs = [timed(lambda: render(report, "html")) for _ in range(2)]  # A/A
    (t_a, page), (t_b, _) = runs
    size = len(page.encode("utf-8"))
    data = chart_data.chart_data(report)
    drawn = sum(len(x["v"]) for x in data["lines"])
    peak = max(max(x["v"]) for x in data["lines"] if x["device"] == "cuda:0")
    true_peak = max(s["d"]["cuda:0"]["used"] for s in report["samples"])
    saved = chart_data.BUCKETS
    chart_data.BUCKETS = n  # every sample embedded: the same page without downsampling
    t_full, full = timed(lambda: render(report, "html"))
    chart_data.BUCKETS = saved
    full_size = len(full.encode("utf-8"))
    load = os.getloadavg()[0]
    lines = [
        f"session: {n:,} samples (8 h at 10 Hz, cpu + cuda:0), {len(report['cells'])} cells, "
        f"40 layers, 20 holders; `python bench/export_html.py` on {os.cpu_count()} cores "
        f"(load average {load:.1f})",
        f"HTML export: {size / 1e6:.2f} MB, {t_a:.2f} s (A/A repeat: {t_b:.2f} s, "
        f"ratio {t_b / t_a:.2f})",
        f"lines drawn: {drawn:,} points for {len(data['lines'])} lines of {n:,} samples; "
        f"cuda:0 peak drawn {peak / MIB:.1f} MiB = true peak {true_peak / MIB:.1f} MiB: "
        f"{'kept' if peak == true_peak else 'LOST'}",
        f"without downsampling: {full_size / 1e6:.2f} MB, {t_full:.2f} s "
        f"(size ratio {full_size / size:.1f}x)",
        f"targets < 5 MB and < 3 s: {'met' if size < 5e6 and max(t_a, t_b) < 3 else 'NOT met'}",
    ]
    print_and_record("export_html", lines, args.record)


if __name__ == "__main__":
    main()

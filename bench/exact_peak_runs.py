"""Exact CPU peaks over repeated ``vramscope profile`` runs of one unchanged notebook (issue 21).

The notebook and the independent counter are test_exact_peak_cli.py's: a re-run
``torch.ones(4M)`` cell, a model, its first Adam steps and a steady-state training cell. Runs
``--runs`` profiles with ``--cpu-peak exact`` (two at a time) and ``--sampled`` with
``--cpu-peak sampled`` for contrast, and the independent counter (glibc's in-use bytes after
every op, in a plain Python process) ``--counters`` times. Prints per cell the min, max and
spread of the peaks, the counter's range, and the baseline alarms ``--tolerance 5%`` would
raise between any two runs of a kind. ``--overhead N`` also times, in this process, N rounds
of that notebook's training step with the counter armed against none, next to an A/A control
(none against none), interleaved. ``--record`` writes them to bench/RESULTS.md.

    python bench/exact_peak_runs.py [--runs 20] [--sampled 5] [--counters 3] [--overhead 0]
                                    [--record]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _results import record

ROOT = Path(__file__).resolve().parents[1]
MIB = 1 << 20


def profile(notebook: Path, out: Path, how: str) -> dict[str, Any]:
    cli = [sys.executable, "-m", "vramscope", "profile", str(notebook), "--device", "cpu"]
    done = subprocess.run([*cli, "--cpu-peak", how, "-o", str(out)], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    report: dict[str, Any] = json.loads(out.read_text())
    return report


def peaks(report: dict[str, Any]) -> list[tuple[int, str]]:
    return [
        (c["devices"]["cpu"]["peak_delta_bytes"], c["devices"]["cpu"].get("peak_source", "?"))
        for c in report["cells"]
    ]


def alarms(reports: list[dict[str, Any]]) -> int:
    from vramscope.cli.gates import check_baseline

    return sum(
        len(check_baseline(old, new, "cpu", 0.05))
        for old in reports
        for new in reports
        if new is not old
    )


def overhead(rounds: int, cells: list[str]) -> str:
    """Median seconds of one training step with the counter armed / without, and A/A."""
    import statistics
    import time

    from vramscope.devices import CpuDevice

    ns: dict[str, Any] = {}
    for code in cells[:4]:  # torch, the tensors, the model and its step function
        exec(code, ns)
    ns["step"]()  # Adam's state
    cpu = CpuDevice(exact=lambda: True)
    times: dict[str, list[float]] = {"plain": [], "exact": [], "plain2": []}
    for r in range(rounds):
        for arm in ("plain", "exact", "plain2") if r % 2 else ("plain2", "exact", "plain"):
            mark = cpu.begin_cell("reset") if arm == "exact" else None
            start = time.perf_counter()
            ns["step"]()
            times[arm].append(time.perf_counter() - start)
            if mark is not None:
                cpu.end_cell(mark, None)
    med = {arm: statistics.median(v) for arm, v in times.items()}
    return (
        f"a training step of that notebook in process ({rounds} rounds, interleaved): "
        f"{med['plain'] * 1e3:.2f} ms without the counter, {med['exact'] * 1e3:.2f} ms with it "
        f"(x{med['exact'] / med['plain']:.3f}); A/A x{med['plain2'] / med['plain']:.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--sampled", type=int, default=5)
    parser.add_argument("--counters", type=int, default=3)
    parser.add_argument("--overhead", type=int, default=0, help="rounds of the step timing")
    parser.add_argument("--record", action="store_true", help="write to bench/RESULTS.md")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "test" / "python"))
    import nbformat

    from test_exact_peak_cli import CELLS, COUNTER

    with tempfile.TemporaryDirectory(prefix="vramscope-exact-") as tmp:
        folder = Path(tmp)
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
        notebook = folder / "train.ipynb"
        nbformat.write(nb, str(notebook))
        jobs = [("exact", i) for i in range(args.runs)] + [
            ("sampled", i) for i in range(args.sampled)
        ]
        with ThreadPoolExecutor(2) as pool:
            done = list(
                pool.map(
                    lambda j: (j[0], profile(notebook, folder / f"{j[0]}{j[1]}.json", j[0])), jobs
                )
            )
        counters = [
            json.loads(
                subprocess.run(
                    [sys.executable, "-c", COUNTER, str(notebook)],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                .stdout.strip()
                .splitlines()[-1]
            )
            for _ in range(args.counters)
        ]
    lines = [
        f"{args.runs} `vramscope profile` runs with --cpu-peak exact and {args.sampled} with "
        f"--cpu-peak sampled of test_exact_peak_cli.py's notebook (two runs at a time), and "
        f"{args.counters} runs of its independent counter (glibc in-use after every op)"
    ]
    for how in ("exact", "sampled"):
        reports = [r for h, r in done if h == how]
        if not reports:
            continue
        table = [peaks(r) for r in reports]
        for index, head in enumerate(CELLS):
            values = [row[index][0] for row in table]
            kinds = sorted({row[index][1] for row in table})
            low, high = min(values), max(values)
            truth = [c[index] for c in counters if c[index] is not None]
            spread = f"{(high - low) / low:.2%}" if low else "-"
            line = (
                f"{how}, cell {index + 1} (`{head.splitlines()[0][:40]}`): peak "
                f"{low / MIB:.3f}-{high / MIB:.3f} MiB (spread {spread}; {'/'.join(kinds)})"
            )
            if truth:
                line += f"; counter {min(truth) / MIB:.3f}-{max(truth) / MIB:.3f} MiB"
            lines.append(line)
        lines.append(
            f"{how}: baseline alarms at --tolerance 5% between any two runs: {alarms(reports)}"
        )
    if args.overhead:
        lines.append(overhead(args.overhead, CELLS))
    print("\n".join(lines))
    if args.record:
        record("exact_peak_runs", lines)


if __name__ == "__main__":
    main()

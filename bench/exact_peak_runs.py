"""Exact CPU peaks over repeated ``vramscope profile`` runs of one unchanged notebook (issue 21).

``notebook``: the notebook to profile, unchanged (bench/notebooks/gpt2_manual_loop.ipynb is an
outside workload: a GPT-2 from a config with a manual loop, from the Hugging Face course);
without it, test_exact_peak_cli.py's own notebook (a re-run ``torch.ones(4M)`` cell, a
model, its first Adam steps and a steady-state training cell). Runs ``--runs`` profiles with
``--cpu-peak exact`` (two at a time) and ``--sampled`` with ``--cpu-peak sampled`` for
contrast, and the independent counter ``--counters`` times: the cells in a plain kernel with
malloc itself counting its in-use bytes at every malloc and free (test/python/alloc_counter.py,
malloc_peak.c). Prints per cell the min, max and spread of the peaks, the counter's range and
the largest gap to it, and the baseline alarms ``--tolerance 5%`` would raise between any two
runs of a kind. ``--overhead N`` (the built-in notebook only) also times, in this process, N
rounds of its training step with the exact count armed against none, next to an A/A control
(none against none), interleaved. ``--record`` writes them to bench/RESULTS.md.

    python bench/exact_peak_runs.py [NOTEBOOK] [--runs 20] [--sampled 5] [--counters 3]
                                    [--overhead 0] [--record]
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

from _results import print_and_record

ROOT = Path(__file__).resolve().parents[1]
MIB = 1 << 20
KIB = 1 << 10


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


def builtin_notebook(folder: Path) -> Path:
    """test_exact_peak_cli.py's notebook, written to ``folder``."""
    import nbformat

    from test_exact_peak_cli import CELLS

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    notebook = folder / "train.ipynb"
    nbformat.write(nb, str(notebook))
    return notebook


def cell_lines(how: str, reports: list[dict[str, Any]], heads: list[str], truth: list) -> list[str]:
    """One line per cell: the peaks' range, spread and kind, the counter's range and the
    largest gap to it (a cell that stays sampled says so)."""
    table = [peaks(r) for r in reports]
    lines = []
    for index, head in enumerate(heads):
        values = [row[index][0] for row in table]
        kinds = sorted({row[index][1] for row in table})
        low, high = min(values), max(values)
        spread = f"{(high - low) / low:.2%}" if low else "-"
        line = (
            f"{how}, cell {index + 1} (`{head[:40]}`): peak {low / MIB:.3f}-{high / MIB:.3f} "
            f"MiB (spread {spread}; {'/'.join(kinds)})"
        )
        counted = [c[index][0] for c in truth]
        if counted and how == "exact" and kinds == ["sampled"] and min(values) > 2 * max(counted):
            # torch came in during it, without the heap counter: VmHWM's pages
            line += f"; counter {min(counted) / MIB:.3f} MiB (not comparable: VmHWM is pages)"
        elif counted:
            gap = max(abs(v - t) for v in values for t in counted)
            line += (
                f"; counter {min(counted) / MIB:.3f}-{max(counted) / MIB:.3f} MiB, largest gap "
                f"{gap / KIB:.0f} KiB ({gap / min(counted):.2%})"
            )
        lines.append(line)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebook", nargs="?", type=Path, help="profiled unchanged")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--sampled", type=int, default=5)
    parser.add_argument("--counters", type=int, default=3)
    parser.add_argument("--overhead", type=int, default=0, help="rounds of the step timing")
    parser.add_argument("--record", action="store_true", help="write to bench/RESULTS.md")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "test" / "python"))
    import nbformat

    from alloc_counter import cell_peaks

    with tempfile.TemporaryDirectory(prefix="vramscope-exact-") as tmp:
        folder = Path(tmp)
        notebook = args.notebook.resolve() if args.notebook else builtin_notebook(folder)
        jobs = [("exact", i) for i in range(args.runs)] + [
            ("sampled", i) for i in range(args.sampled)
        ]
        with ThreadPoolExecutor(2) as pool:
            done = list(
                pool.map(
                    lambda j: (j[0], profile(notebook, folder / f"{j[0]}{j[1]}.json", j[0])), jobs
                )
            )
        truth = [cell_peaks(notebook) for _ in range(args.counters)]
    cells = nbformat.read(str(notebook), as_version=4).cells
    heads = [c.source.splitlines()[0] for c in cells if c.cell_type == "code"]
    name = notebook.name if args.notebook else "test_exact_peak_cli.py's notebook"
    lines = [
        f"{args.runs} `vramscope profile` runs with --cpu-peak exact and {args.sampled} with "
        f"--cpu-peak sampled of {name} (two runs at a time), and {args.counters} runs of the "
        f"independent counter (malloc's in-use bytes counted at every malloc and free, in a "
        f"plain kernel)"
    ]
    for how in ("exact", "sampled"):
        reports = [r for h, r in done if h == how]
        if reports:
            lines += cell_lines(how, reports, heads, truth)
            lines.append(
                f"{how}: baseline alarms at --tolerance 5% between any two runs: {alarms(reports)}"
            )
    if args.overhead and not args.notebook:
        from test_exact_peak_cli import CELLS

        lines.append(overhead(args.overhead, CELLS))
    print_and_record("exact_peak_runs" + (f": {name}" if args.notebook else ""), lines, args.record)


if __name__ == "__main__":
    main()

"""``vramscope profile`` gates on exact CPU peaks (issue 21): an unchanged notebook profiled
three times gives every armed cell's peak within 1% (8 KiB for a small cell) of the others
and of an independent counter, a re-run ``torch.ones`` cell its +16 MiB, and no baseline
alarm at 5%; the summary and the CSV say which peaks are exact and which sampled. (20 runs
by hand, of this notebook and of an outside one: bench/exact_peak_runs.py, bench/RESULTS.md.)

The independent counter (alloc_counter.py) runs the same cells in a plain kernel (no vramscope)
with malloc itself counting its in-use bytes at every malloc and free: the most the allocator
held at once, inside ops too, measured on the allocator rather than on torch's storages. The
profiles run at once (and next to three counters, whose median per cell is the truth: one
counter's kernel alone read the small cell 17.9 KiB high once, its other threads' bytes), on a
shared 2-core machine.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from typing import NamedTuple

import nbformat
import pytest

import alloc_counter
from kernel_harness import COLD_ENV
from vramscope.cli.gates import check_baseline
from vramscope.devices.cpu import load_mallinfo2

pytestmark = pytest.mark.skipif(
    load_mallinfo2() is None or not alloc_counter.available(),
    reason="exact peaks need glibc mallinfo2; the counter a C compiler",
)

MIB = 1 << 20
RUNS = 3
CELLS = [
    # torch's lazy first-use work (the optimizer's import of torch._dynamo, ~23 MiB; the first
    # backward's and Adam step's) done here, where vramscope sets itself up for torch too
    "import torch\nfrom torch import nn\ntorch.manual_seed(0)\ntorch.set_num_threads(1)\n"
    "_w = nn.Linear(8, 8)\n_o = torch.optim.Adam(_w.parameters())\n"
    "_w(torch.ones(2, 8)).sum().backward()\n_o.step()\ndel _w, _o",
    "y = torch.ones(4 * 1024 * 1024)",
    "y = torch.ones(4 * 1024 * 1024)  # again: the new y is made before the old one goes",
    "model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),\n"
    "                      nn.Linear(1024, 10))\n"
    "opt = torch.optim.Adam(model.parameters())\n"
    "x, t = torch.randn(128, 256), torch.randint(0, 10, (128,))\n"
    "def step():\n"
    "    loss = nn.functional.cross_entropy(model(x), t)\n"
    "    loss.backward()\n"
    "    opt.step()\n"
    "    opt.zero_grad()\n"
    "    return loss.item()",
    "for _ in range(2):\n    step()",
    "for _ in range(4):  # steady state\n    step()",
    # small: vramscope's own messages of the previous cell, freed on other threads, or a user
    # namespace that grows at other cells than a plain kernel's, move it by KiBs
    "small = [bytes(2000) for _ in range(60)]",
]
RERUN, STEADY = 2, 5  # indexes in CELLS: the re-run cell, the steady-state training cell


class Runs(NamedTuple):
    reports: list[dict]
    truth: list[int]  # the independent counters' median peak per cell
    progress: str  # the first run's stderr
    summary: str  # and its stdout
    csv_rows: list[dict[str, str]]  # and its CSV export


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    folder = tmp_path_factory.mktemp("exact")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    path = folder / "train.ipynb"
    nbformat.write(nb, str(path))
    cli = [sys.executable, "-m", "vramscope", "profile", str(path), "--device", "cpu"]
    csv_out = ["-o", str(folder / "r0.csv")]
    procs = [
        subprocess.Popen(
            [*cli, "-o", str(folder / f"r{i}.json"), *(csv_out if i == 0 else [])],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            # cold kernels, as the counted truth's (LD_PRELOAD): the import cell is measured
            env={**os.environ, COLD_ENV: "1"},
        )
        for i in range(RUNS)
    ]
    truth = alloc_counter.median_cell_peaks(path)
    outs = [proc.communicate(timeout=600) for proc in procs]
    for proc, (out, err) in zip(procs, outs):
        assert proc.returncode == 0, (out, err[-2000:])
    reports = [json.loads((folder / f"r{i}.json").read_text()) for i in range(RUNS)]
    rows = list(csv.DictReader(io.StringIO((folder / "r0.csv").read_text())))
    return Runs(reports, truth, outs[0][1], outs[0][0], rows)


def _cpu(report: dict, index: int) -> dict:
    return report["cells"][index]["devices"]["cpu"]


def test_rerun_cell_peaks_at_16_mib_in_every_run(runs: Runs) -> None:
    for report in runs.reports:
        d = _cpu(report, RERUN)
        assert d["peak_source"] == "exact"
        assert abs(d["peak_delta_bytes"] - 16 * MIB) <= 8 * 1024, d
        assert _cpu(report, 0)["peak_source"] == "sampled"  # torch came in during that cell
    assert "exact peak +16.0 MiB" in runs.progress


def test_cells_peak_as_the_independent_counter_and_repeat(runs: Runs) -> None:
    """Every cell that allocates (the tensors, the model, the first Adam steps, the steady
    state) within 1% (8 KiB for the small cell) of the counter and of the other runs."""
    for index in range(1, len(CELLS)):
        peaks = [_cpu(r, index)["peak_delta_bytes"] for r in runs.reports]
        assert all(_cpu(r, index)["peak_source"] == "exact" for r in runs.reports)
        truth = runs.truth[index]
        assert truth >= 100 * 1024, (index, runs.truth)  # the cells really allocate
        # within 1%, or 8 KiB for the small cell: both counts are the process's, and the
        # kernels' other threads (IPython's history writer, the IOPub thread sending the
        # last cell's output) allocate a few KiB at times (a CI run: 4.2 KiB in the counter's
        # kernel, every profile agreeing to the byte; another: one profile's small cell
        # 1.6 KiB above the other two, 1.4% of its 118 KiB)
        slack = max(0.01 * truth, 8 * 1024)
        assert max(peaks) - min(peaks) <= slack, (index, peaks)
        assert all(abs(peak - truth) <= slack for peak in peaks), (index, peaks, truth)
    assert runs.truth[STEADY] > 10 * MIB  # the steady-state cell really trains


def test_summary_and_csv_say_exact_or_sampled(runs: Runs) -> None:
    report = runs.reports[0]
    by_id = {c["cell_id"]: c for c in report["cells"]}
    assert len(runs.csv_rows) == len(report["cells"])  # one device (cpu) per cell
    for row in runs.csv_rows:
        cpu = by_id[row["cell_id"]]["devices"]["cpu"]
        assert row["device"] == "cpu"
        assert int(row["peak_delta_bytes"]) == cpu["peak_delta_bytes"]
        assert row["peak_source"] == cpu["peak_source"]
    assert [r["peak_source"] for r in runs.csv_rows] == ["sampled"] + ["exact"] * (len(CELLS) - 1)
    largest = [line for line in runs.summary.splitlines() if "largest peak:" in line]
    assert len(largest) == 3
    assert "import torch): sampled peak +" in largest[0]  # torch's import is the largest
    for line in largest[1:]:
        assert "): exact peak +" in line, line


def test_no_baseline_alarm_at_5_percent(runs: Runs) -> None:
    reports = runs.reports
    for old in reports:
        for new in reports:
            if new is not old:
                assert check_baseline(old, new, "cpu", 0.05) == []  # as --tolerance 5%
    grown = json.loads(json.dumps(reports[1]))  # the gate does fire on a real growth
    before = _cpu(reports[0], STEADY)["peak_delta_bytes"]  # over this run's, not run 1's
    _cpu(grown, STEADY)["peak_delta_bytes"] = before + max(before * 6 // 100, MIB + 64 * 1024)
    assert len(check_baseline(reports[0], grown, "cpu", 0.05)) == 1

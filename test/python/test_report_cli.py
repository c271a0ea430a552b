"""``vramscope profile`` on a tiny training notebook (issue 21): the reports it writes show the
training step's per-layer saved activations (every layer read 0 before), and the torch runtime
baseline as its own part, since the bridge loads before the notebook imports torch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_harness import COLD_ENV
from report_pages import PageText, exact_bytes, md_table
from test_cli import notebook
from vramscope.exports import load_report
from vramscope.exports.summary import breakdown_parts

pytestmark = pytest.mark.kernel
BATCH, IN, HIDDEN = 256, 128, 1024


def test_profile_reports_the_training_step_layers_and_the_runtime(tmp_path: Path) -> None:
    nb = notebook(
        tmp_path / "train.ipynb",
        [
            ("imp", "import torch"),
            (
                "build",
                f"model = torch.nn.Sequential(torch.nn.Linear({IN}, {HIDDEN}), torch.nn.ReLU(), "
                f"torch.nn.Linear({HIDDEN}, 10))\n"
                "opt = torch.optim.SGD(model.parameters(), lr=0.1)",
            ),
            (
                "train",
                f"x = torch.randn({BATCH}, {IN})\nmodel(x).pow(2).mean().backward()\n"
                "opt.step()\nopt.zero_grad()",
            ),
            ("after", "done = True"),
        ],
    )
    outs = {s: tmp_path / f"r.{s}" for s in ("json", "html", "md")}
    exe = Path(sys.executable).with_name("vramscope")
    args = [str(exe), "profile", str(nb), *(a for p in outs.values() for a in ("-o", str(p)))]
    # a cold kernel: the report's runtime is what importing torch in the first cell cost
    env = {**os.environ, COLD_ENV: "1"}
    proc = subprocess.run(args, capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stderr
    report = load_report(outs["json"])
    # ground truth: Linear saves its input x, ReLU its output (float32), the last Linear
    # saves ReLU's output, already counted
    truth = {"0": BATCH * IN * 4, "1": BATCH * HIDDEN * 4}
    saved = {x["path"]: x["peak_saved_bytes"] for x in report["layers"] if x["peak_saved_bytes"]}
    assert saved == truth
    assert report["layers_measured"]["execution_count"] == 3

    cpu = report["breakdown"]["cpu"]
    assert cpu["runtime_bytes"] > 10 << 20  # torch's import, measured: the bridge came first
    parts = breakdown_parts("cpu", cpu)
    assert parts["runtime"] == cpu["runtime_bytes"]
    assert sum(parts.values()) == cpu["total_bytes"]

    page = PageText()
    page.feed(outs["html"].read_text(encoding="utf-8"))
    top = page.tables["summary: Top layers by saved activations"][1:]
    assert {r[0]: exact_bytes(r[3]) for r in top} == truth
    header, row = page.tables["Memory breakdown"][:2]
    assert dict(zip(header, row))["torch runtime"] != "0 B"
    peak = max(
        c["devices"]["cpu"]["before_bytes"] + c["devices"]["cpu"]["peak_delta_bytes"]
        for c in report["cells"]
    )
    peak = max([peak, *(s["d"]["cpu"]["used"] for s in report["samples"] if "cpu" in s["d"])])
    assert f"({peak:,} B) on cpu" in "".join(page.summary)
    made_of = md_table(outs["md"].read_text(encoding="utf-8"), "### What the peak was made of")
    assert sum(exact_bytes(r[2]) for r in made_of) == peak

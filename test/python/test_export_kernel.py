"""Exports in a real kernel: ``vramscope.export(path)`` and the panel's ``export_report``
request (protocol 1.1), checked against the kernel's own ``session_report()``."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from vramscope.exports import load_report

pytestmark = pytest.mark.kernel
MIB = 1 << 20


def test_export_json_round_trips_the_session_report(kernel: Any, tmp_path: Path) -> None:
    kernel.run_ok("import torch\n_w = torch.ones(1 << 20)\ndel _w", cell_id="export-import")
    kernel.run_ok("_exp = torch.ones(4 * 1024 * 1024)", cell_id="export-64")
    out = tmp_path / "session.json"
    written = kernel.eval(f"[str(p) for p in __import__('vramscope').export({str(out)!r})]")
    assert written == [str(out)]
    report = load_report(out)
    live = kernel.eval("__import__('vramscope').session_report()['cells']")
    assert report["cells"] == live  # nothing ran in between (eval is silent)
    cell = next(c for c in report["cells"] if c["cell_id"] == "export-64")
    assert cell["devices"]["cpu"]["delta_bytes"] == pytest.approx(16 * MIB, abs=0.1 * MIB)
    assert report["schema"] == "vramscope.report/1"
    # CSV with samples: two files, the cells table carries the same delta
    csv_path = tmp_path / "session.csv"
    files = kernel.eval(
        f"[str(p) for p in __import__('vramscope').export({str(csv_path)!r}, samples=True)]"
    )
    assert files == [str(csv_path), str(tmp_path / "session.samples.csv")]
    rows = list(csv.DictReader(io.StringIO(csv_path.read_text())))
    row = next(r for r in rows if r["cell_id"] == "export-64")
    assert int(row["delta_bytes"]) == cell["devices"]["cpu"]["delta_bytes"]
    bad = kernel.execute(f"__import__('vramscope').export({str(tmp_path / 'r.txt')!r})")
    assert bad["content"]["status"] == "error" and bad["content"]["ename"] == "ValueError"


def test_export_report_request(kernel: Any) -> None:
    control = kernel.comm_open("control")
    reply = kernel.request(
        control, "export_report", {"format": "html", "notebook": "dir/Train run.ipynb"}
    )
    assert reply["type"] == "reply", reply
    result = reply["result"]
    assert result["filename"] == "Train run.vramscope.html"  # the stem kept, spaces too
    assert result["mime"] == "text/html" and result["format"] == "html"
    assert result["content"].startswith("<!DOCTYPE html>")
    assert "vramscope report: Train run.ipynb" in result["content"]
    md = kernel.request(control, "export_report", {"format": "markdown"})["result"]
    assert md["filename"] == "session.vramscope.md" and md["content"].startswith("# vramscope")
    js = kernel.request(control, "export_report", {"format": "json"})["result"]
    assert json.loads(js["content"])["schema"] == "vramscope.report/1"
    for params in ({}, {"format": "pdf"}, {"format": "html", "notebook": 3}):
        err = kernel.request(control, "export_report", params)
        assert err["type"] == "error" and err["code"] == "invalid_params", err

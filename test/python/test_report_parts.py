"""The report's summary from a report dict (no kernel): the torch runtime baseline as its own
part, the axes' units, applied suggestions predicted vs measured, a peak that came before the
model, and ``vramscope compare -o x.html``. Every figure is checked against one computed here
from the report the test builds (test_export.make_report)."""

from __future__ import annotations

import copy
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from report_pages import PageText, exact_bytes, md_table
from test_export import HOSTILE, MIB, _data_block, _Page, make_report
from vramscope.cli import main
from vramscope.cli.gates import EXIT_OK
from vramscope.exports import render
from vramscope.exports.chart_data import axis_unit, chart_data

GIB = 1 << 30
RUNTIME = 2 * MIB


def with_runtime(report: dict[str, Any]) -> dict[str, Any]:
    """The report's cpu breakdown with a measured torch runtime baseline inside ``other``."""
    report["breakdown"]["cpu"]["runtime_bytes"] = RUNTIME
    report["breakdown"]["cpu"]["other_tensors"] = 0
    return report


def tables(page: str) -> dict[str, list[list[str]]]:
    parser = PageText()
    parser.feed(page)
    return parser.tables


def test_breakdown_shows_the_runtime_baseline_as_its_own_part() -> None:
    report = with_runtime(make_report(["x = 1"], name="m"))
    entry = report["breakdown"]["cpu"]
    page = render(report, "html")
    header, row = tables(page)["Memory breakdown"]
    shown = dict(zip(header, row))
    assert shown["torch runtime"] == "2.0 MiB"
    assert shown["other"] == "45.0 MiB"  # 50 MiB - 4 KiB - 3 MiB - 2 MiB
    other_rest = entry["other"] - RUNTIME
    assert _data_block(page)["breakdown"]["cpu"] == {
        "parameters": 4096,
        "gradients": 0,
        "optimizer_state": 0,
        "activations": 3 * MIB,
        "runtime": RUNTIME,
        "other": other_rest,
    }
    assert sum(_data_block(page)["breakdown"]["cpu"].values()) == entry["total_bytes"]
    (md_row,) = md_table(render(report, "markdown"), "## Memory breakdown")
    assert md_row[-2:] == ["2.0 MiB", "45.0 MiB"]
    # not measured (torch came before vramscope): said, and nothing split off
    del entry["runtime_bytes"]
    entry["runtime_note"] = "torch was imported before vramscope"
    page = render(report, "html")
    assert dict(zip(*tables(page)["Memory breakdown"]))["torch runtime"] == "0 B"
    assert "cpu: torch runtime not measured (torch was imported before vramscope)" in page


def test_the_summary_parts_add_up_to_the_peak() -> None:
    report = with_runtime(make_report(["a = 1", "b = 2", "train()"], name="m"))
    train = report["cells"][2]
    report["layers_measured"] = {
        "cell_id": train["cell_id"],
        "execution_count": 3,
        "forward_index": 2,
        "reason": "first",
    }
    cpu = train["devices"]["cpu"]
    peak = cpu["before_bytes"] + cpu["peak_delta_bytes"]  # the highest of the three cells
    assert peak == 12 * MIB
    page = render(report, "html")
    found = tables(page)
    parts = {r[0]: exact_bytes(r[2]) for r in found["summary: What the peak was made of"][1:]}
    assert sum(parts.values()) == peak
    assert parts["parameters"] == 4096
    assert parts["activations"] == 5 * MIB  # the layer's peak: the measured forward's cell
    assert parts["torch runtime"] == RUNTIME
    assert parts["other"] == peak - 4096 - 5 * MIB - RUNTIME
    parser = PageText()
    parser.feed(page)
    summary = "".join(parser.summary)
    assert f"Peak: 12.0 MiB ({peak:,} B) on cpu in cell [3]: train()" in summary
    assert "model call 2 of the cell, measured layer by layer" in summary
    assert "Measured on model call 2 of cell [3]." in summary


def test_a_peak_before_the_model_counts_no_model_part() -> None:
    report = with_runtime(make_report(["import torch", "train()"], name="m"))
    report["cells"][0]["devices"]["cpu"]["peak_delta_bytes"] = 200 * MIB
    report["layers_measured"] = {
        "cell_id": "c1",
        "execution_count": 2,
        "forward_index": 1,
        "reason": "first",
    }
    rows = md_table(render(report, "markdown"), "### What the peak was made of")
    parts = {r[0]: exact_bytes(r[2]) for r in rows}
    assert parts["parameters"] == parts["activations"] == 0
    assert parts["torch runtime"] == RUNTIME
    assert sum(parts.values()) == 210 * MIB
    # no measured forward, and what is held now exceeds the peak: no parts, and why
    del report["layers_measured"]
    report["cells"][0]["devices"]["cpu"]["peak_delta_bytes"] = MIB  # peak 11 MiB < 33 MiB
    report["breakdown"]["cpu"]["runtime_bytes"] = 30 * MIB
    md = render(report, "markdown")
    assert "not shown: what is held now exceeds the peak by" in md
    assert "| torch runtime |" not in md.split("## Devices")[0]


def test_applied_suggestions_predicted_against_measured() -> None:
    report = make_report(["train()"], name="m")
    run = {"duration_s": 1.0, "cell_id": "c0", "execution_count": 1}
    report["advice"] = {
        "outcomes": [
            {
                "title": "Checkpoint <the> blocks",
                "technique": "checkpoint",
                "predicted": {"saving_bytes": 40 * MIB, "step_peak_saving_bytes": 30 * MIB},
                "before": {**run, "activation_bytes": 100 * MIB, "step_peak_bytes": 300 * MIB},
                "after": {**run, "activation_bytes": 62 * MIB, "step_peak_bytes": 275 * MIB},
                "missed": False,
                "verdict": "met",
                "note": None,
            },
            {
                "title": "Mixed precision",
                "predicted": {"saving_bytes": MIB, "step_peak_saving_bytes": None},
                "before": None,
                "after": None,
                "missed": False,
            },
        ],
        "suggestions": [],
    }
    rows = md_table(render(report, "markdown"), "### Suggestions applied")
    assert rows[0] == [
        "Checkpoint &lt;the&gt; blocks",
        "40.0 MiB",
        "38.0 MiB",  # 100 - 62
        "predicted 30.0 MiB, measured 25.0 MiB",  # 300 - 275
        "met",
    ]
    assert rows[1] == ["Mixed precision", "1.0 MiB", "n/a", "-", "pending"]
    html_rows = tables(render(report, "html"))["summary: Suggestions applied"]
    assert html_rows[1][0] == "Checkpoint <the> blocks"  # escaped in the page, text again


@pytest.mark.parametrize(
    ("top", "unit"),
    [(0, "B"), (1000, "B"), (1536, "KiB"), (512 * MIB, "MiB"), (15 * 1024 * MIB, "GiB")],
)
def test_axis_unit_from_the_data_range(top: int, unit: str) -> None:
    axis = axis_unit([0, top, -top // 2])
    assert axis["unit"] == unit
    assert top / axis["div"] < 1024  # never "15k MiB"
    assert top == 0 or top / axis["div"] >= 1


def test_each_chart_reads_in_its_own_unit() -> None:
    report = make_report(["a = 1", "b = 2"], name="m")
    for i, sample in enumerate(report["samples"]):
        sample["d"]["cpu"]["used"] = 15 * GIB + i  # the "15k MiB" timeline
    axes = chart_data(report)["axes"]
    assert axes["timeline"] == {"unit": "GiB", "div": GIB}
    assert axes["cells"] == {"unit": "MiB", "div": MIB}  # peaks of 1 and 2 MiB
    assert axes["layers"] == {"unit": "MiB", "div": MIB}
    assert axes["breakdown"] == {"unit": "MiB", "div": MIB}


def test_compare_writes_both_sessions_side_by_side(tmp_path: Path) -> None:
    old = make_report(["a = 1", HOSTILE, "c = 3"], name="m")
    new = copy.deepcopy(old)
    new["cells"][2]["devices"]["cpu"]["peak_delta_bytes"] = 4 * MIB  # was 2 MiB: +100%
    new["cells"][0]["devices"]["cuda:0"] = {
        "before_bytes": 0,
        "after_bytes": GIB,
        "delta_bytes": GIB,
        "peak_delta_bytes": 3 * GIB // 2,
    }
    paths = {}
    for name, report in (("old", old), ("new", new)):
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(report))
    out = tmp_path / "cmp.html"
    text = io.StringIO()
    argv = ["compare", str(paths["old"]), str(paths["new"]), "--device", "cpu", "-o", str(out)]
    assert main(argv, text) == EXIT_OK
    assert f"wrote {out}" in text.getvalue()
    page = out.read_text(encoding="utf-8")
    parser = _Page()
    parser.feed(page)
    assert "img" not in parser.tags and page.count("</script>") == 3
    assert HOSTILE in "".join(parser.text)
    found = PageText()
    found.feed(page)
    cpu_rows, cuda_rows = found.tables["cpu"][1:], found.tables["cuda:0"][1:]
    assert [r[0] for r in cpu_rows] == ["[1]", "[2]", "[3]"]
    assert cpu_rows[2][1:6] == ["+1.0 MiB", "+2.0 MiB", "+1.0 MiB", "+4.0 MiB", "+2.0 MiB (+100%)"]
    assert cpu_rows[0][5] == "="
    assert cuda_rows == [["[1]", "-", "-", "+1.0 GiB", "+1.5 GiB", "new", "a = 1"]]
    data = _data_block(page)["compare"]
    assert data["compare-0"]["old"] == [MIB, MIB, 2 * MIB]
    assert data["compare-0"]["new"] == [MIB, MIB, 4 * MIB]
    assert data["compare-1"]["axis"] == {"unit": "GiB", "div": GIB}
    markup = re.sub(r"<script\b[^>]*>.*?</script>", "", page, flags=re.S)  # the page, not JS
    assert re.search(r"<(link|iframe|img|object|embed)\b|<[^>]*\s(src|href)\s*=", markup) is None

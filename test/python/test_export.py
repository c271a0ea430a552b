"""Exports (vramscope.exports): formats, escaping of user strings, downsampling that keeps every
peak, the vendored plotly, and the JSON round trip. Kernel-side tests: test_export_kernel.py."""

from __future__ import annotations

import csv
import gzip
import io
import json
import random
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from vramscope.exports import (
    format_for,
    load_report,
    render,
    render_samples_csv,
    samples_path,
    write_report,
)
from vramscope.exports.chart_data import BUCKETS
from vramscope.exports.downsample import minmax
from vramscope.exports.escape import CSV_FORMULA_STARTS, script_json
from vramscope.exports.request import report_filename

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = "</script><img src=x onerror=alert(1)>"
MIB = 1 << 20


def make_report(heads: list[str], n_samples: int = 50, name: str = HOSTILE) -> dict[str, Any]:
    """A report in the session_report() schema with the given cell code heads."""
    t0 = 1_795_000_000.0
    cells = [
        {
            "cell_id": f"c{i}",
            "execution_count": i + 1,
            "start_time": t0 + i,
            "duration": 0.5,
            "ok": i != 1,
            "error_type": None if i != 1 else "RuntimeError",
            "oom": False,
            "code_head": head,
            "devices": {
                "cpu": {
                    "before_bytes": 10 * MIB,
                    "after_bytes": 10 * MIB + (i - 1) * MIB,
                    "delta_bytes": (i - 1) * MIB,
                    "peak_delta_bytes": max(0, i - 1) * MIB + MIB,
                }
            },
        }
        for i, head in enumerate(heads)
    ]
    return {
        "schema": "vramscope.report/1",
        "bridge_version": "9.9.9",
        "protocol_version": "1.1.0",
        "session_id": "s",
        "created": t0 + 100,
        "kernel": {
            "pid": 1,
            "python": "3.11",
            "torch_version": "2.13",
            "cuda_available": False,
            "mps_available": False,
        },
        "devices": [
            {
                "id": "cpu",
                "kind": "cpu",
                "name": "CPU",
                "total_bytes": 8 << 30,
                "used_bytes": 50 * MIB,
                "reserved_bytes": 80 * MIB,
                "initialized": True,
                "source": "mallinfo2",
            }
        ],
        "settings": {
            "sample_hz": 10,
            "cuda_peak_policy": "reset",
            "insight": True,
            "insight_budget_ms": 20,
            "history_limit": 36000,
        },
        "cells": cells,
        "samples": [
            {"t": t0 + i / 10, "d": {"cpu": {"used": 10 * MIB + i, "reserved": 20 * MIB}}}
            for i in range(n_samples)
        ],
        "model": name,
        "models": [{"name": name, "type": "Sequential", "param_bytes": 4096}],
        "layers": [
            {
                "path": name,
                "type": "Linear",
                "saved_bytes": 3 * MIB,
                "peak_saved_bytes": 5 * MIB,
                "output_shape": [8, 16],
                "param_bytes": 4096,
                "grad_bytes": 0,
            }
        ],
        "breakdown": {
            "cpu": {
                "total_bytes": 50 * MIB,
                "parameters": 4096,
                "gradients": 0,
                "optimizer_state": 0,
                "activations": 3 * MIB,
                "other": 50 * MIB - 4096 - 3 * MIB,
            }
        },
        "holders": [
            {
                "name": name + "|x",
                "kind": "tensor",
                "bytes": 2 * MIB,
                "explanation": "holds <b>it</b>",
                "fix": f"del {name}",
            }
        ],
        "client_errors": [],
        "notebook": name + ".ipynb",
    }


# --- downsampling -------------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 5, 3001, 10_000, 123_457])
def test_minmax_keeps_every_bucket_extreme(n: int) -> None:
    rng = random.Random(n)
    times = [i * 0.1 for i in range(n)]
    values = [rng.randrange(0, 1 << 30) for _ in range(n)]
    values[n // 3 if n else 0 : n // 3 + 1] = [1 << 31] * (1 if n else 0)  # one spike
    buckets = 100
    t_out, v_out = minmax(times, values, buckets)
    assert len(t_out) == len(v_out) <= 2 * buckets + 2
    assert t_out == sorted(t_out)
    kept = dict(zip(t_out, v_out))
    assert all(values[round(t * 10)] == v for t, v in kept.items())  # real points only
    if n:
        assert max(v_out) == max(values) and min(v_out) == min(values)
        assert t_out[0] == times[0] and t_out[-1] == times[-1]
    if n > 2 * buckets + 2:
        # ground truth: every bucket's own max and min are drawn at their own times
        for b in range(buckets):
            lo, hi = 1 + (n - 2) * b // buckets, 1 + (n - 2) * (b + 1) // buckets
            chunk = values[lo:hi]
            assert max(chunk) in [kept.get(times[i]) for i in range(lo, hi)]
            assert min(chunk) in [kept.get(times[i]) for i in range(lo, hi)]


def test_html_of_a_long_session_is_downsampled_with_its_peak() -> None:
    report = make_report(["x = 1"], n_samples=50_000)
    report["samples"][31_337]["d"]["cpu"]["used"] = 7 << 30  # a short spike
    page = render(report, "html")
    data = _data_block(page)
    used = next(x for x in data["lines"] if x["field"] == "used")
    assert len(used["v"]) <= 2 * BUCKETS + 2 and used["n"] == 50_000
    assert max(used["v"]) == 7 << 30
    assert used["t"][used["v"].index(7 << 30)] == pytest.approx(3133.7, abs=1e-3)


# --- escaping -----------------------------------------------------------------------------


def test_csv_cells_never_start_a_formula() -> None:
    heads = ['=HYPERLINK("http://x")', "+1+2", "-2+3", "@SUM(A1)", "\tx", "\rx", "x = 1"]
    report = make_report(heads)
    rows = list(csv.reader(io.StringIO(render(report, "csv"))))
    header, body = rows[0], rows[1:]
    code = [r[header.index("code_head")] for r in body]
    for head, got in zip(heads, code):
        expected = "'" + head if head.startswith(CSV_FORMULA_STARTS) else head
        assert got == expected
    # numbers stay numbers: a negative delta is written as a number, not escaped
    deltas = [int(r[header.index("delta_bytes")]) for r in body]
    assert deltas[0] == -MIB
    # every text field is escaped, not only the code: a hostile cell id too
    report["cells"][0]["cell_id"] = "=cmd|' /C calc'!A0"
    first = list(csv.reader(io.StringIO(render(report, "csv"))))[1]
    assert first[header.index("cell_id")] == "'=cmd|' /C calc'!A0"


def test_csv_samples_table(tmp_path: Path) -> None:
    report = make_report(["a"], n_samples=5)
    written = write_report(report, tmp_path / "r.csv", samples=True)
    assert written == [tmp_path / "r.csv", samples_path(tmp_path / "r.csv")]
    rows = list(csv.reader(io.StringIO(written[1].read_text())))
    assert rows[0] == ["t", "cpu.used", "cpu.reserved"]
    assert [int(r[1]) for r in rows[1:]] == [10 * MIB + i for i in range(5)]
    assert render_samples_csv({"samples": []}) == "t\r\n"


def test_markdown_shows_user_strings_as_text() -> None:
    heads = ["x | y", "*bold* _it_ `code` [a](javascript:alert(1))", HOSTILE]
    md = render(make_report(heads), "markdown")
    assert "<" not in md and ">" not in md.replace("&gt;", "")  # no raw HTML at all
    assert "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;" in md
    assert "\\[a\\](javascript:alert(1))" in md and "\\*bold\\*" in md
    pipes = 0  # a pipe in a user string never adds a column: rows match their header
    for line in md.splitlines():
        count = len(re.findall(r"(?<!\\)\|", line))
        if line.startswith("|---"):
            continue
        if line.startswith("| "):
            pipes = pipes or count
            assert count == pipes, line
        else:
            pipes = 0
    for section in (
        "## Devices",
        "## Worst cells by peak",
        "## Worst cells by delta",
        "## Memory breakdown",
        "## Top layers by saved activations",
        "## What holds memory",
        "## Failed cells",
    ):
        assert section in md


def test_markdown_and_html_say_a_cell_ran_out_of_memory() -> None:
    """Both reports draw their worst-cells tables from the same rows (exports/tables.py)."""
    report = make_report(["x", "y = 2", "z"], name="model")
    report["cells"][2].update(ok=False, error_type="OutOfMemoryError", oom=True)
    md = render(report, "markdown")
    page = render(report, "html")
    # [3] has the largest peak (+2.0 MiB) and the only positive delta (+1.0 MiB): it heads
    # both worst-cells tables; the HTML page lists it once more under "All 3 cells".
    row = "| \\[3\\] | cpu | +1.0 MiB | +2.0 MiB | OutOfMemoryError (out of memory) | z |"
    assert md.count(row) == 2
    assert md.count("(out of memory)") == 2
    cells = (
        '<td>[3]</td><td>cpu</td><td><span class="num">+1.0 MiB</span></td>'
        '<td><span class="num">+2.0 MiB</span></td>'
        "<td>OutOfMemoryError (out of memory)</td><td><code>z</code></td>"
    )
    assert page.count(cells) == 3
    assert page.count("(out of memory)") == 3


class _Page(HTMLParser):
    """Records tags, script bodies and text of an HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.scripts: list[str] = []
        self.text: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        self.tags.append(tag)
        self._in_script = tag == "script"
        if tag == "script":
            self.scripts.append("")

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data
        else:
            self.text.append(data)


def _data_block(page: str) -> dict[str, Any]:
    match = re.search(r'<script type="application/json" id="vramscope-data">(.*?)</script>', page)
    assert match
    data: dict[str, Any] = json.loads(match.group(1))
    return data


def test_html_escapes_every_user_string() -> None:
    report = make_report([HOSTILE, "a\u2028b\u2029c & <!-- x"])
    page = render(report, "html")
    parser = _Page()
    parser.feed(page)
    assert "img" not in parser.tags
    assert parser.tags.count("script") == 3  # the data block, plotly, our chart code
    assert page.count("</script>") == 3  # no user string closes a script
    assert "\u2028" not in page.split('id="vramscope-data">', 1)[1].split("</script>", 1)[0]
    text = "".join(parser.text)
    assert HOSTILE in text  # shown as text: title, tables
    assert f"vramscope report: {HOSTILE}.ipynb" in text
    # the JSON block gives back the exact (plotly-escaped) strings
    data = _data_block(page)
    assert data["layers"][0]["path"] == "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"
    assert data["cells"][1]["head"] == "a\u2028b\u2029c &amp; &lt;!-- x"
    assert json.loads(script_json({"k": HOSTILE}))["k"] == HOSTILE


def test_html_is_self_contained() -> None:
    page = render(make_report(["x = 1"], name="model"), "html")
    markup = re.sub(r"<script\b[^>]*>.*?</script>", "", page, flags=re.S)  # the page, not JS
    assert re.search(r"<(link|iframe|img|object|embed)\b", markup) is None
    assert re.search(r"\b(src|href)\s*=", markup) is None
    assert 'http-equiv="Content-Security-Policy"' in page and "connect-src 'none'" in page
    assert "plotly.js (basic - minified)" in page


def test_vendored_plotly_is_the_front_ends() -> None:
    """assets/plotly-basic.min.js.gz is node_modules' plotly.js-basic-dist-min, byte for byte
    (re-gzip it from there after `npm install` changes that package)."""
    vendored = ROOT / "python_bridge/vramscope/exports/assets/plotly-basic.min.js.gz"
    source = ROOT / "node_modules/plotly.js-basic-dist-min/plotly-basic.min.js"
    assert gzip.decompress(vendored.read_bytes()) == source.read_bytes()


# --- formats and files ----------------------------------------------------------------------


def test_format_from_suffix_or_name(tmp_path: Path) -> None:
    assert [format_for(f"r{s}") for s in (".json", ".csv", ".md", ".markdown", ".HTML")] == [
        "json",
        "csv",
        "markdown",
        "markdown",
        "html",
    ]
    assert format_for("r.txt", "md") == "markdown"
    for bad in ("r.txt", "report"):
        with pytest.raises(ValueError, match="cannot tell the report format"):
            format_for(bad)
    with pytest.raises(ValueError, match="unknown report format"):
        format_for("r.json", "pdf")
    for fmt in ("json", "csv", "markdown", "html"):
        (path,) = write_report(make_report(["x"]), tmp_path / f"out-{fmt}.bin", fmt)
        assert path.stat().st_size > 100


def test_json_round_trip(tmp_path: Path) -> None:
    report = make_report([HOSTILE, "y = 2"])
    (path,) = write_report(report, tmp_path / "r.json")
    assert load_report(path) == report
    (tmp_path / "bad.json").write_text('{"schema": "other/1", "cells": []}')
    with pytest.raises(ValueError, match="not a vramscope report"):
        load_report(tmp_path / "bad.json")
    (tmp_path / "v2.json").write_text('{"schema": "vramscope.report/2", "cells": []}')
    with pytest.raises(ValueError, match="unsupported report schema"):
        load_report(tmp_path / "v2.json")
    with pytest.raises(ValueError, match="No such file"):
        load_report(tmp_path / "missing.json")


def test_report_filename_is_a_plain_name() -> None:
    assert report_filename("work/My notebook.ipynb", "html") == "My notebook.vramscope.html"
    assert report_filename("../../etc/passwd", "markdown") == "passwd.vramscope.md"
    assert report_filename(None, "csv") == "session.vramscope.csv"
    assert (
        report_filename(HOSTILE + ".ipynb", "json")
        == "script__img src=x onerror=alert(1)_-9592609e.vramscope.json"
    )


def test_html_draws_the_largest_cells_when_there_are_many(monkeypatch: pytest.MonkeyPatch) -> None:
    from vramscope.exports import chart_data

    monkeypatch.setattr(chart_data, "MAX_CELLS", 3)
    report = make_report(["a", "b", "c", "d", "e"])  # peaks grow with the cell: 1..4 MiB
    page = render(report, "html")
    data = _data_block(page)
    assert [c["label"] for c in data["cells"]] == ["[3]", "[4]", "[5]"]  # in cell order
    assert data["cellsLeftOut"] == 2 and "2 smaller cells are not drawn" in page
    assert page.count("<tr>") >= 5 + 1  # the all-cells table still lists every cell

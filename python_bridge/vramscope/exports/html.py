"""The self-contained HTML report: one file, plotly embedded, no network request at all.

Tables are rendered here with every user string escaped (``html_text``); the charts are drawn
in the page by ``assets/report.js`` from a ``<script type="application/json">`` block written
with ``script_json`` (``< > &`` and U+2028/2029 escaped, so no string can end the script).
The page carries a Content-Security-Policy that allows no fetch, image, font or frame source.
"""

from __future__ import annotations

import functools
import gzip
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from typing import Any

from .chart_data import chart_data
from .escape import html_text as h
from .escape import script_json
from .summary import (
    BREAKDOWN_PARTS,
    CellDevice,
    advice_items,
    cell_devices,
    cell_label,
    fmt_bytes,
    fmt_time,
    title,
    top_layers,
    worst_cells,
)

CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data:; connect-src 'none'; font-src 'none'; frame-src 'none'; "
    "base-uri 'none'; form-action 'none'"
)


@functools.cache
def _asset(name: str) -> str:
    data = resources.files(__package__).joinpath("assets", name).read_bytes()
    if name.endswith(".gz"):
        data = gzip.decompress(data)
    return data.decode("utf-8")


def plotly_js() -> str:
    """plotly.js basic (scatter, bar, pie; MIT), the front end's own plotly build."""
    return _asset("plotly-basic.min.js.gz")


def _table(header: Sequence[str], rows: Iterable[Sequence[str]], cls: str = "") -> str:
    head = "".join(f"<th>{h(x)}</th>" for x in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _num(text: str) -> str:
    return f'<span class="num">{h(text)}</span>'


def _cell_row(r: CellDevice) -> list[str]:
    cell = r.cell
    status = "ok" if cell.get("ok", True) else (cell.get("error_type") or "error")
    return [
        h(cell_label(cell)),
        h(r.device),
        _num(fmt_bytes(r.delta, signed=True)),
        _num(fmt_bytes(r.peak, signed=True)),
        h(status + (" (out of memory)" if cell.get("oom") else "")),
        f"<code>{h(cell.get('code_head', ''))}</code>",
    ]


CELL_HEADER = ("cell", "device", "delta", "peak", "status", "code")


def _sections(report: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    devices = report.get("devices") or []
    out.append("<h2>Devices</h2>")
    out.append(
        _table(
            ("device", "name", "in use", "capacity", "measured by"),
            (
                [
                    h(d.get("id", "")),
                    h(d.get("name", "")),
                    _num(fmt_bytes(d.get("used_bytes"))),
                    _num(fmt_bytes(d.get("total_bytes"))),
                    h(d.get("source", "")),
                ]
                for d in devices
            ),
        )
    )
    for by, heading in (("peak", "Worst cells by peak"), ("delta", "Worst cells by delta")):
        rows = worst_cells(report, by)
        out.append(f"<h2>{h(heading)}</h2>")
        out.append(
            _table(CELL_HEADER, map(_cell_row, rows)) if rows else "<p>No cell used memory.</p>"
        )
    breakdown = report.get("breakdown") or {}
    if breakdown:
        model = report.get("model")
        out.append("<h2>Memory breakdown</h2>")
        if model:
            out.append(f"<p>Model: <code>{h(model)}</code></p>")
        out.append(
            _table(
                ("device", "total", *(p.replace("_", " ") for p in BREAKDOWN_PARTS)),
                (
                    [h(dev), _num(fmt_bytes(b.get("total_bytes")))]
                    + [_num(fmt_bytes(b.get(p, 0))) for p in BREAKDOWN_PARTS]
                    for dev, b in breakdown.items()
                ),
            )
        )
    layers = top_layers(report)
    if layers:
        out.append("<h2>Top layers by saved activations</h2>")
        out.append(
            _table(
                ("layer", "type", "peak saved", "saved now", "parameters"),
                (
                    [
                        f"<code>{h(x.get('path') or '(model)')}</code>",
                        h(x.get("type", "")),
                        _num(fmt_bytes(x.get("peak_saved_bytes"))),
                        _num(fmt_bytes(x.get("saved_bytes"))),
                        _num(fmt_bytes(x.get("param_bytes"))),
                    ]
                    for x in layers
                ),
            )
        )
    holders = report.get("holders") or []
    if holders:
        out.append("<h2>What holds memory</h2>")
        out.append(
            _table(
                ("name", "kind", "bytes", "why", "fix"),
                (
                    [
                        f"<code>{h(x.get('name', ''))}</code>",
                        h(x.get("kind", "")),
                        _num(fmt_bytes(x.get("bytes"))),
                        h(x.get("explanation", "")),
                        f"<code>{h(x.get('fix', ''))}</code>",
                    ]
                    for x in holders
                ),
            )
        )
    advice = advice_items(report)
    if advice:
        out.append("<h2>Optimization results</h2>")
        out.append(_table(("what", "figures"), ([h(a), h(b)] for a, b in advice)))
    cells = report.get("cells") or []
    if cells:
        out.append(f"<details><summary>All {len(cells)} cells</summary>")
        out.append(_table(CELL_HEADER, map(_cell_row, cell_devices(report)), "all-cells"))
        out.append("</details>")
    return out


def render_html(report: Mapping[str, Any]) -> str:
    kernel = report.get("kernel") or {}
    cells = report.get("cells") or []
    samples = report.get("samples") or []
    page_title = title(report)
    meta = (
        f"Created {fmt_time(report.get('created'))} by vramscope "
        f"{report.get('bridge_version', '?')} · Python {kernel.get('python', '?')} · torch "
        f"{kernel.get('torch_version') or 'not imported'} · {len(cells)} cells · "
        f"{len(samples)} samples"
    )
    data = chart_data(report)
    charts = [
        ("timeline", "Timeline", "Memory in use over time; the bands are the cells."),
        ("cells", "Per cell", "Each cell's change (delta) and highest rise (peak)."),
    ]
    if data["layers"]:
        charts.append(("layers", "Layers", "Saved activations per layer (peak and now)."))
    if data["breakdown"]:
        charts.append(("breakdown", "Breakdown", "What the memory in use is, per device."))
    chart_html = "".join(
        f'<section class="chart"><h2>{h(name)}</h2><p class="hint">{h(hint)}</p>'
        f'<div id="chart-{key}" class="plot" data-chart="{key}"></div></section>'
        for key, name, hint in charts
    )
    note = (
        f"<p class='hint'>{data['cellsLeftOut']} smaller cells are not drawn (the charts show "
        "the largest peaks).</p>"
        if data["cellsLeftOut"]
        else ""
    )
    return "".join(
        [
            "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>",
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{h(page_title)}</title><style>{_asset('report.css')}</style></head>",
            f'<body><header><h1>{h(page_title)}</h1><p class="meta">{h(meta)}</p></header>',
            f"<main>{chart_html}{note}{''.join(_sections(report))}</main>",
            f'<script type="application/json" id="vramscope-data">{script_json(data)}</script>',
            f"<script>{_script_safe(plotly_js())}</script>",
            f"<script>{_script_safe(_asset('report.js'))}</script>",
            "</body></html>\n",
        ]
    )


def _script_safe(code: str) -> str:
    """Our own script text; it must not contain a closing script tag (checked, not escaped)."""
    if "</script" in code.lower():
        raise ValueError("embedded script contains '</script'")
    return code

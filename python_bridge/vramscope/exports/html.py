"""The self-contained HTML report: one file, plotly embedded, no network request at all.

The page opens with the summary (``exports.answer``), then the charts and the tables. Tables
are rendered here with every user string escaped (``html_text``); the charts are drawn
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

from .answer import answer
from .chart_data import chart_data
from .escape import html_text as h
from .escape import script_json
from .summary import cell_devices, fmt_time, title
from .tables import (
    CELL_HEADER,
    Cell,
    Table,
    cell_row,
    insight_tables,
    overview_tables,
    summary_facts,
    summary_tables,
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


_MARKUP = {"text": "{}", "num": '<span class="num">{}</span>', "code": "<code>{}</code>"}


def _cell(c: Cell) -> str:
    return _MARKUP[c.kind].format(h(c.text))


def grid(header: Sequence[str], rows: Iterable[Sequence[Cell]], cls: str = "") -> str:
    """A table of escaped cells (``Cell``: text, figure or code)."""
    head = "".join(f"<th>{h(x)}</th>" for x in header)
    body = "".join("<tr>" + "".join(f"<td>{_cell(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _section(table: Table) -> list[str]:
    out = [f"<h{table.level}>{h(table.heading)}</h{table.level}>"]
    if table.intro:
        out.append("<p>" + "".join(map(_cell, table.intro)) + "</p>")
    if table.rows or not table.empty:
        out.append(grid(table.header, table.rows))
    else:
        out.append(f"<p>{h(table.empty)}</p>")
    return out


def _summary(report: Mapping[str, Any]) -> str:
    """The answer first: the peak, where and what it was made of (exports.answer)."""
    found = answer(report)
    facts = "".join(
        f"<li><strong>{h(f.label)}</strong>: {''.join(map(_cell, f.text))}</li>"
        for f in summary_facts(found)
    )
    tables = [line for table in summary_tables(found, report) for line in _section(table)]
    return f'<section class="summary"><h2>Summary</h2><ul>{facts}</ul>{"".join(tables)}</section>'


def _sections(report: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for table in overview_tables(report) + insight_tables(report):
        out += _section(table)
    cells = report.get("cells") or []
    if cells:
        out.append(f"<details><summary>All {len(cells)} cells</summary>")
        out.append(grid(CELL_HEADER, map(cell_row, cell_devices(report)), "all-cells"))
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
    chart_html = "".join(chart_section(*chart) for chart in charts)
    note = (
        f"<p class='hint'>{data['cellsLeftOut']} smaller cells are not drawn (the charts show "
        "the largest peaks).</p>"
        if data["cellsLeftOut"]
        else ""
    )
    main = f"{_summary(report)}{chart_html}{note}{''.join(_sections(report))}"
    return page(page_title, meta, main, data)


def chart_section(key: str, name: str, hint: str) -> str:
    """A chart's place on the page: ``assets/report.js`` draws ``key`` into it."""
    return (
        f'<section class="chart"><h2>{h(name)}</h2><p class="hint">{h(hint)}</p>'
        f'<div id="chart-{key}" class="plot" data-chart="{key}"></div></section>'
    )


def page(page_title: str, meta: str, main: str, data: Mapping[str, Any]) -> str:
    """The whole self-contained page: ``main`` (HTML already escaped) under a title and a
    meta line (text), the chart ``data`` as escaped JSON, plotly and ``report.js``."""
    return "".join(
        [
            "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>",
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{h(page_title)}</title><style>{_asset('report.css')}</style></head>",
            f'<body><header><h1>{h(page_title)}</h1><p class="meta">{h(meta)}</p></header>',
            f"<main>{main}</main>",
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

"""Two sessions side by side as one self-contained HTML page (``vramscope compare -o x.html``).

Per device, one chart (each cell's peak, old next to new) and one table: each cell's delta and
peak in both sessions and the peak's change. The rows come matched by the caller
(``cli.compare``: cells matched by cell id); the page, its escaping and its charts are the HTML
report's (``html.page``, ``assets/report.js``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from .chart_data import axis_unit, plot_text
from .escape import html_text as h
from .html import chart_section, grid, page
from .summary import cell_label, fmt_bytes, fmt_time, title
from .tables import Cell


class Side(NamedTuple):
    """One session's figures for a cell on a device."""

    delta: int
    peak: int


class CompareRow(NamedTuple):
    cell: Mapping[str, Any]  # the new session's cell, else the old one's
    old: Side | None  # None: the cell did not touch the device in that session
    new: Side | None


HEADER = ("cell", "old delta", "old peak", "new delta", "new peak", "peak change", "code")


def change_text(old: Side | None, new: Side | None) -> str:
    """The peak's change: ``+16.0 MiB (+50%)``, ``=``, ``new`` or ``removed``."""
    if old is None or new is None:
        return "removed" if new is None else "new"
    diff = new.peak - old.peak
    if not diff:
        return "="
    if old.peak == 0:
        return fmt_bytes(diff, signed=True)
    return f"{fmt_bytes(diff, signed=True)} ({diff / old.peak:+.0%})"


def _figure(side: Side | None, i: int) -> Cell:
    return Cell("-" if side is None else fmt_bytes(side[i], signed=True), "num")


def row_cells(row: CompareRow) -> list[Cell]:
    return [
        Cell(cell_label(row.cell)),
        _figure(row.old, 0),
        _figure(row.old, 1),
        _figure(row.new, 0),
        _figure(row.new, 1),
        Cell(change_text(row.old, row.new), "num"),
        Cell(row.cell.get("code_head") or "", "code"),
    ]


def _session(report: Mapping[str, Any]) -> str:
    cells = report.get("cells") or []
    return f"{title(report)}, created {fmt_time(report.get('created'))}, {len(cells)} cells"


def render_compare_html(
    old: Mapping[str, Any], new: Mapping[str, Any], rows: Mapping[str, list[CompareRow]]
) -> str:
    """The page for ``rows`` per device (cells matched by the caller)."""
    charts: dict[str, Any] = {}
    body: list[str] = [
        "<ul>",
        f"<li><strong>old</strong>: {h(_session(old))}</li>",
        f"<li><strong>new</strong>: {h(_session(new))}</li>",
        "</ul>",
    ]
    for i, (device, device_rows) in enumerate(rows.items()):
        key = f"compare-{i}"
        peaks = [
            (plot_text(cell_label(r.cell)), r.old.peak if r.old else 0, r.new.peak if r.new else 0)
            for r in device_rows
        ]
        charts[key] = {
            "device": plot_text(device),
            "labels": [p[0] for p in peaks],
            "old": [p[1] for p in peaks],
            "new": [p[2] for p in peaks],
            "axis": axis_unit(v for p in peaks for v in p[1:]),
        }
        body.append(chart_section(key, device, "Each cell's peak rise: old next to new."))
        body.append(grid(HEADER, map(row_cells, device_rows)))
    if not rows:
        body.append("<p>No cell of either session touched a device.</p>")
    heading = "vramscope compare"
    meta = "Cells matched by cell id; per device: each cell's delta and peak in both sessions."
    return page(heading, meta, "".join(body), {"compare": charts})

"""The tables both human-readable reports show (HTML and Markdown), in one place.

A table is its heading, its header and rows of ``Cell``: raw text and what it is (``text``,
a ``num`` figure or ``code``); each renderer escapes and marks the cells its own way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NamedTuple

from .summary import (
    BREAKDOWN_PARTS,
    CellDevice,
    advice_items,
    cell_label,
    fmt_bytes,
    top_layers,
    worst_cells,
)

Kind = Literal["text", "num", "code"]


class Cell(NamedTuple):
    """One table cell: unescaped text, and what it is."""

    text: str
    kind: Kind = "text"


class Table(NamedTuple):
    heading: str
    header: tuple[str, ...]
    rows: list[list[Cell]]
    #: A line of cells shown between the heading and the table (empty: none).
    intro: tuple[Cell, ...] = ()
    #: Said instead of the table when it has no rows.
    empty: str = ""


CELL_HEADER = ("cell", "device", "delta", "peak", "status", "code")


def cell_row(r: CellDevice) -> list[Cell]:
    """A (cell, device) pair's figures, status and first line of code."""
    cell = r.cell
    status = "ok" if cell.get("ok", True) else (cell.get("error_type") or "error")
    return [
        Cell(cell_label(cell)),
        Cell(r.device),
        Cell(fmt_bytes(r.delta, signed=True), "num"),
        Cell(fmt_bytes(r.peak, signed=True), "num"),
        Cell(status + (" (out of memory)" if cell.get("oom") else "")),
        Cell(cell.get("code_head") or "", "code"),
    ]


def overview_tables(report: Mapping[str, Any]) -> list[Table]:
    """The devices, then the worst cells by peak and by delta."""
    devices = Table(
        "Devices",
        ("device", "name", "in use", "capacity", "measured by"),
        [
            [
                Cell(d.get("id", "")),
                Cell(d.get("name", "")),
                Cell(fmt_bytes(d.get("used_bytes")), "num"),
                Cell(fmt_bytes(d.get("total_bytes")), "num"),
                Cell(d.get("source", "")),
            ]
            for d in report.get("devices") or []
        ],
    )
    worst = [
        Table(
            heading,
            CELL_HEADER,
            [cell_row(r) for r in worst_cells(report, by)],
            empty="No cell used memory.",
        )
        for by, heading in (("peak", "Worst cells by peak"), ("delta", "Worst cells by delta"))
    ]
    return [devices, *worst]


def insight_tables(report: Mapping[str, Any]) -> list[Table]:
    """The memory breakdown, top layers, holders and optimization results the report has."""
    breakdown = report.get("breakdown") or {}
    model = report.get("model")
    tables = [
        Table(
            "Memory breakdown",
            ("device", "total", *(p.replace("_", " ") for p in BREAKDOWN_PARTS)),
            [
                [Cell(dev), Cell(fmt_bytes(b.get("total_bytes")), "num")]
                + [Cell(fmt_bytes(b.get(p, 0)), "num") for p in BREAKDOWN_PARTS]
                for dev, b in breakdown.items()
            ],
            intro=(Cell("Model: "), Cell(model, "code")) if model else (),
        ),
        Table(
            "Top layers by saved activations",
            ("layer", "type", "peak saved", "saved now", "parameters"),
            [
                [
                    Cell(x.get("path") or "(model)", "code"),
                    Cell(x.get("type", "")),
                    Cell(fmt_bytes(x.get("peak_saved_bytes")), "num"),
                    Cell(fmt_bytes(x.get("saved_bytes")), "num"),
                    Cell(fmt_bytes(x.get("param_bytes")), "num"),
                ]
                for x in top_layers(report)
            ],
        ),
        Table(
            "What holds memory",
            ("name", "kind", "bytes", "why", "fix"),
            [
                [
                    Cell(x.get("name", ""), "code"),
                    Cell(x.get("kind", "")),
                    Cell(fmt_bytes(x.get("bytes")), "num"),
                    Cell(x.get("explanation", "")),
                    Cell(x.get("fix", ""), "code"),
                ]
                for x in report.get("holders") or []
            ],
        ),
        Table(
            "Optimization results",
            ("what", "figures"),
            [[Cell(a), Cell(b)] for a, b in advice_items(report)],
        ),
    ]
    return [t for t in tables if t.rows]

"""The tables both human-readable reports show (HTML and Markdown), in one place.

A table is its heading, its header and rows of ``Cell``: raw text and what it is (``text``,
a ``num`` figure or ``code``); each renderer escapes and marks the cells its own way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NamedTuple

from .answer import Answer
from .summary import (
    PART_LABELS,
    SHOWN_PARTS,
    CellDevice,
    advice_items,
    breakdown_parts,
    cell_label,
    fmt_bytes,
    fmt_count,
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
    #: Its heading's level (2: a section, 3: a part of the summary).
    level: int = 2


class Fact(NamedTuple):
    """One line of the summary: what it is about, and its text."""

    label: str
    text: tuple[Cell, ...]


CELL_HEADER = ("cell", "device", "delta", "peak", "status", "code")


def cell_row(r: CellDevice) -> list[Cell]:
    """A (cell, device) pair's figures, status and first line of code."""
    cell = r.cell
    status = "ok" if cell.get("ok", True) else (cell.get("error_type") or "error")
    return [
        Cell(cell_label(cell)),
        Cell(r.device),
        Cell(fmt_bytes(r.delta, signed=True), "num"),
        Cell(fmt_bytes(r.peak, signed=True) + _peak_source(cell, r.device), "num"),
        Cell(status + (" (out of memory)" if cell.get("oom") else "")),
        Cell(cell.get("code_head") or "", "code"),
    ]


def _peak_source(cell: Mapping[str, Any], device: str) -> str:
    """`` (exact)`` or `` (sampled)``: how a CPU peak was measured, when the record says."""
    how = ((cell.get("devices") or {}).get(device) or {}).get("peak_source")
    return f" ({how})" if how in ("exact", "sampled") else ""


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


def _breakdown_intro(model: Any, breakdown: Mapping[str, Any]) -> tuple[Cell, ...]:
    """The model, and why a device's torch runtime baseline was not measured."""
    out: list[Cell] = [Cell("Model: "), Cell(model, "code"), Cell(". ")] if model else []
    for dev, b in breakdown.items():
        if b.get("runtime_note"):
            out.append(Cell(f"{dev}: torch runtime not measured ({b['runtime_note']}). "))
    return tuple(out)


def insight_tables(report: Mapping[str, Any]) -> list[Table]:
    """The memory breakdown, top layers, holders and optimization results the report has."""
    breakdown = report.get("breakdown") or {}
    model = report.get("model")
    tables = [
        Table(
            "Memory breakdown",
            ("device", "total", *(PART_LABELS[p] for p in SHOWN_PARTS)),
            [
                [Cell(dev), Cell(fmt_bytes(b.get("total_bytes")), "num")]
                + [Cell(fmt_bytes(v), "num") for v in breakdown_parts(dev, b).values()]
                for dev, b in breakdown.items()
            ],
            intro=_breakdown_intro(model, breakdown),
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
            intro=measured_intro(report),
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


def measured_intro(report: Mapping[str, Any]) -> tuple[Cell, ...]:
    """Which forward the per-layer figures were measured on (``layers_measured``)."""
    m = report.get("layers_measured")
    if not isinstance(m, Mapping):
        return ()
    cell = f"cell {cell_label(m)}" if m.get("execution_count") is not None else "a cell"
    return (Cell(f"Measured on model call {m.get('forward_index', '?')} of {cell}."),)


def _share(part: int, whole: int) -> Cell:
    return Cell(f"{part / whole:.1%}" if whole > 0 else "-", "num")


def summary_facts(a: Answer) -> list[Fact]:
    """The summary's lines: the peak, where it happened, and its training step."""
    if a.peak is None:
        return [Fact("Peak", (Cell("no cell was measured"),))]
    where: tuple[Cell, ...] = (Cell(" between cells"),)
    cell = a.peak.cell
    if cell is not None:
        where = (Cell(f" in cell {cell_label(cell)}"),)
        if cell.get("code_head"):
            where += (Cell(": "), Cell(cell["code_head"], "code"))
    peak = Cell(f"{fmt_bytes(a.peak.bytes)} ({fmt_count(a.peak.bytes)}) on {a.peak.device}")
    facts = [Fact("Peak", (peak, *where))]
    if a.step:
        facts.append(Fact("Training step", (Cell(a.step),)))
    return facts


def summary_tables(a: Answer, report: Mapping[str, Any]) -> list[Table]:
    """What the peak was made of, the top layers and the applied suggestions."""
    peak = a.peak.bytes if a.peak is not None else 0
    made_of = Table(
        "What the peak was made of",
        ("part", "size", "bytes", "share"),
        [
            [
                Cell(PART_LABELS[p]),
                Cell(fmt_bytes(v), "num"),
                Cell(fmt_count(v), "num"),
                _share(v, peak),
            ]
            for p, v in a.parts.items()
        ],
        intro=(Cell(a.note),) if a.note and a.parts else (),
        empty=a.note,
        level=3,
    )
    layers = Table(
        "Top layers by saved activations",
        ("layer", "type", "peak saved", "bytes", "share"),
        [
            [
                Cell(x.get("path") or "(model)", "code"),
                Cell(x.get("type", "")),
                Cell(fmt_bytes(x.get("peak_saved_bytes")), "num"),
                Cell(fmt_count(int(x.get("peak_saved_bytes") or 0)), "num"),
                _share(int(x.get("peak_saved_bytes") or 0), a.activations),
            ]
            for x in a.layers
        ],
        intro=measured_intro(report),
        level=3,
    )
    applied = Table(
        "Suggestions applied",
        ("suggestion", "predicted saving", "measured saving", "step peak", "verdict"),
        [
            [
                Cell(x.title),
                Cell(fmt_bytes(x.predicted), "num"),
                Cell(fmt_bytes(x.measured), "num"),
                Cell(
                    f"predicted {fmt_bytes(x.predicted_step)}, measured "
                    f"{fmt_bytes(x.measured_step)}"
                    if x.predicted_step is not None
                    else "-"
                ),
                Cell(x.verdict + (f": {x.note}" if x.note else "")),
            ]
            for x in a.applied
        ],
        level=3,
    )
    return [t for t in (made_of, layers, applied) if t.rows or t.empty]

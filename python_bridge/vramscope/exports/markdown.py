"""The Markdown summary: devices, worst cells by peak and by delta, breakdown, top layers,
holders and optimization results. Every user string goes through ``markdown_text``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .escape import markdown_text as md
from .summary import (
    BREAKDOWN_PARTS,
    CellDevice,
    advice_items,
    cell_label,
    fmt_bytes,
    fmt_time,
    title,
    top_layers,
    worst_cells,
)


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return [*lines, ""]


def _cell_rows(rows: list[CellDevice]) -> list[list[str]]:
    return [
        [
            md(cell_label(r.cell)),
            md(r.device),
            fmt_bytes(r.delta, signed=True),
            fmt_bytes(r.peak, signed=True),
            "ok" if r.cell.get("ok", True) else md(r.cell.get("error_type") or "error"),
            md(r.cell.get("code_head") or ""),
        ]
        for r in rows
    ]


def render_markdown(report: Mapping[str, Any]) -> str:
    out: list[str] = [f"# {md(title(report))}", ""]
    kernel = report.get("kernel") or {}
    cells = report.get("cells") or []
    out += [
        f"Created {fmt_time(report.get('created'))} by vramscope "
        f"{md(report.get('bridge_version', '?'))}; Python {md(kernel.get('python', '?'))}, "
        f"torch {md(kernel.get('torch_version') or 'not imported')}; "
        f"{len(cells)} cells, {len(report.get('samples') or [])} samples.",
        "",
        "## Devices",
        "",
    ]
    out += _table(
        ("device", "name", "in use", "capacity", "measured by"),
        (
            [
                md(d.get("id", "")),
                md(d.get("name", "")),
                fmt_bytes(d.get("used_bytes")),
                fmt_bytes(d.get("total_bytes")),
                md(d.get("source", "")),
            ]
            for d in report.get("devices") or []
        ),
    )
    header = ("cell", "device", "delta", "peak", "status", "code")
    for by, heading in (("peak", "Worst cells by peak"), ("delta", "Worst cells by delta")):
        rows = worst_cells(report, by)
        out += [f"## {heading}", ""]
        out += _table(header, _cell_rows(rows)) if rows else ["No cell used memory.", ""]
    failed = [c for c in cells if not c.get("ok", True)]
    if failed:
        out += ["## Failed cells", ""]
        out += _table(
            ("cell", "error", "out of memory", "code"),
            (
                [
                    md(cell_label(c)),
                    md(c.get("error_type") or "error"),
                    "yes" if c.get("oom") else "no",
                    md(c.get("code_head") or ""),
                ]
                for c in failed
            ),
        )
    out += _insight(report)
    advice = advice_items(report)
    if advice:
        out += ["## Optimization results", ""]
        out += _table(("what", "figures"), ([md(a), md(b)] for a, b in advice))
    return "\n".join(out).rstrip("\n") + "\n"


def _insight(report: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    breakdown = report.get("breakdown") or {}
    if breakdown:
        out += ["## Memory breakdown", ""]
        if report.get("model"):
            out += [f"Model: {md(report['model'])}", ""]
        out += _table(
            ("device", "total", *(p.replace("_", " ") for p in BREAKDOWN_PARTS)),
            (
                [md(dev), fmt_bytes(b.get("total_bytes"))]
                + [fmt_bytes(b.get(p, 0)) for p in BREAKDOWN_PARTS]
                for dev, b in breakdown.items()
            ),
        )
    layers = top_layers(report)
    if layers:
        out += ["## Top layers by saved activations", ""]
        out += _table(
            ("layer", "type", "peak saved", "saved now", "parameters"),
            (
                [
                    md(x.get("path") or "(model)"),
                    md(x.get("type", "")),
                    fmt_bytes(x.get("peak_saved_bytes")),
                    fmt_bytes(x.get("saved_bytes")),
                    fmt_bytes(x.get("param_bytes")),
                ]
                for x in layers
            ),
        )
    holders = report.get("holders") or []
    if holders:
        out += ["## What holds memory", ""]
        out += _table(
            ("name", "kind", "bytes", "why", "fix"),
            (
                [
                    md(h.get("name", "")),
                    md(h.get("kind", "")),
                    fmt_bytes(h.get("bytes")),
                    md(h.get("explanation", "")),
                    md(h.get("fix", "")),
                ]
                for h in holders
            ),
        )
    return out

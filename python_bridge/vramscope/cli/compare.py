"""``vramscope compare old.json new.json``: the per-cell differences of two reports, as text
on stdout and, with ``-o x.html``, as a self-contained HTML page (exports.compare_html)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from ..exports.compare_html import HEADER, CompareRow, Side, render_compare_html, row_cells
from .gates import match_cells


def _side(cell: Mapping[str, Any] | None, device: str) -> Side | None:
    d = ((cell or {}).get("devices") or {}).get(device)
    return None if d is None else Side(int(d["delta_bytes"]), int(d["peak_delta_bytes"]))


def compare_rows(old: Mapping[str, Any], new: Mapping[str, Any], device: str) -> list[CompareRow]:
    """One row per matched cell that touched ``device`` in either session."""
    rows = []
    for pair in match_cells(old, new):
        fo, fn = _side(pair.old, device), _side(pair.new, device)
        if fo is not None or fn is not None:
            rows.append(CompareRow(pair.new or pair.old or {}, fo, fn))
    return rows


def compare_devices(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Every device a cell of either session touched, in first-seen order."""
    seen: dict[str, None] = {}
    for report in (old, new):
        for cell in report.get("cells") or []:
            for device in cell.get("devices") or {}:
                seen.setdefault(device, None)
    return list(seen)


def compare_table(old: Mapping[str, Any], new: Mapping[str, Any], device: str) -> list[str]:
    """One line per cell: old and new delta and peak on ``device``, and the peak's change."""
    rows: list[list[str]] = [list(HEADER)]
    for row in compare_rows(old, new, device):
        texts = [c.text for c in row_cells(row)]
        rows.append([*texts[:6], texts[6][:50]])
    widths = [max(len(r[i]) for r in rows) for i in range(6)]
    return [
        "  ".join(
            c.ljust(w) if i in (0, 6) else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, [*widths, 0]))
        ).rstrip()
        for r in rows
    ]


def print_compare(old: Mapping[str, Any], new: Mapping[str, Any], device: str, out: TextIO) -> None:
    out.write(f"vramscope compare on {device} (cells matched by cell id)\n")
    for line in compare_table(old, new, device):
        out.write(line + "\n")


def write_compare_html(old: Mapping[str, Any], new: Mapping[str, Any], path: Path) -> Path:
    """Both sessions side by side, per cell and device, as one HTML file at ``path``."""
    rows = {device: compare_rows(old, new, device) for device in compare_devices(old, new)}
    path.write_text(render_compare_html(old, new, rows), encoding="utf-8", errors="replace")
    return path

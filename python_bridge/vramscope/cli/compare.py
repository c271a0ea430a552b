"""``vramscope compare old.json new.json``: the per-cell differences of two reports."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TextIO

from ..exports.summary import cell_label, fmt_bytes
from .gates import match_cells


def _fig(cell: Mapping[str, Any] | None, device: str) -> tuple[int, int] | None:
    d = ((cell or {}).get("devices") or {}).get(device)
    return None if d is None else (int(d["delta_bytes"]), int(d["peak_delta_bytes"]))


def _change(old: int, new: int) -> str:
    diff = new - old
    if old == 0:
        return fmt_bytes(diff, signed=True) if diff else "="
    return f"{fmt_bytes(diff, signed=True)} ({diff / old:+.0%})" if diff else "="


def compare_table(old: Mapping[str, Any], new: Mapping[str, Any], device: str) -> list[str]:
    """One line per cell: old and new delta and peak on ``device``, and the peak's change."""
    rows = [("cell", "old delta", "old peak", "new delta", "new peak", "peak change", "code")]
    for pair in match_cells(old, new):
        cell = pair.new or pair.old or {}
        fo, fn = _fig(pair.old, device), _fig(pair.new, device)
        if fo is None and fn is None:
            continue

        def show(f: tuple[int, int] | None, i: int) -> str:
            return "-" if f is None else fmt_bytes(f[i], signed=True)

        change = _change(fo[1], fn[1]) if fo and fn else ("removed" if fn is None else "new")
        rows.append(
            (
                cell_label(cell),
                show(fo, 0),
                show(fo, 1),
                show(fn, 0),
                show(fn, 1),
                change,
                (cell.get("code_head") or "")[:50],
            )
        )
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

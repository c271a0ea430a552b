"""The short summary ``vramscope profile`` prints on stdout when it is done."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..exports.summary import fmt_bytes, worst_cells
from .gates import cell_name


def peak_in_use(report: Mapping[str, Any], device: str) -> int | None:
    """Highest in-use bytes seen on ``device``: cells' before + peak, and samples."""
    best: int | None = None
    for cell in report.get("cells") or []:
        d = (cell.get("devices") or {}).get(device)
        if d is not None:
            value = int(d["before_bytes"]) + int(d["peak_delta_bytes"])
            best = value if best is None else max(best, value)
    for sample in report.get("samples") or []:
        used = sample.get("d", {}).get(device, {}).get("used")
        if used is not None:
            best = used if best is None else max(best, used)
    return best


def summary_lines(report: Mapping[str, Any], device: str, notebook: str) -> list[str]:
    cells = report.get("cells") or []
    lines = [
        f"vramscope profile {notebook}: {len(cells)} cells on {device}, "
        f"peak in use {fmt_bytes(peak_in_use(report, device))}"
    ]
    worst = [r for r in worst_cells(report, "peak", 50) if r.device == device][:3]
    for r in worst:
        how = ((r.cell.get("devices") or {}).get(device) or {}).get("peak_source")
        kind = f"{how} peak" if how in ("exact", "sampled") else "peak"
        lines.append(
            f"  largest peak: {cell_name(r.cell)}: {kind} {fmt_bytes(r.peak, signed=True)}, "
            f"delta {fmt_bytes(r.delta, signed=True)}"
        )
    return lines

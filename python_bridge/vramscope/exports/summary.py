"""What every human-readable report shows: byte formatting, cell labels and the worst cells."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, NamedTuple

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def fmt_bytes(n: float | None, signed: bool = False) -> str:
    """``67108864`` -> ``64.0 MiB`` (binary units); ``signed`` adds ``+`` to positive values."""
    if n is None:
        return "n/a"
    sign = "-" if n < 0 else ("+" if signed and n > 0 else "")
    size = float(abs(n))
    unit = 0
    while size >= 1024 and unit < len(_UNITS) - 1:
        size /= 1024
        unit += 1
    return f"{sign}{int(size)} B" if unit == 0 else f"{sign}{size:.1f} {_UNITS[unit]}"


def fmt_time(t: float | None) -> str:
    if t is None:
        return "n/a"
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M:%S UTC"
    )


def cell_label(cell: Mapping[str, Any]) -> str:
    """``[12]`` for In[12]; ``[ ]`` when the cell has no execution count."""
    count = cell.get("execution_count")
    return f"[{count}]" if count is not None else "[ ]"


class CellDevice(NamedTuple):
    """One cell's figures on one device."""

    position: int  # position in report["cells"]
    cell: Mapping[str, Any]
    device: str
    delta: int
    peak: int


def main_device(cell: Mapping[str, Any]) -> CellDevice | None:
    """The cell's most affected device: the largest of ``|delta|`` and peak; None if none."""
    best: tuple[int, str, Mapping[str, Any]] | None = None
    for device, d in (cell.get("devices") or {}).items():
        size = max(abs(int(d.get("delta_bytes", 0))), int(d.get("peak_delta_bytes", 0)))
        if best is None or size > best[0]:
            best = (size, device, d)
    if best is None:
        return None
    d = best[2]
    return CellDevice(-1, cell, best[1], int(d["delta_bytes"]), int(d["peak_delta_bytes"]))


def cell_devices(report: Mapping[str, Any]) -> list[CellDevice]:
    """Every (cell, device) pair of the report, in cell order."""
    out: list[CellDevice] = []
    for index, cell in enumerate(report.get("cells") or []):
        for device, d in (cell.get("devices") or {}).items():
            out.append(
                CellDevice(index, cell, device, int(d["delta_bytes"]), int(d["peak_delta_bytes"]))
            )
    return out


def worst_cells(report: Mapping[str, Any], by: str = "peak", n: int = 10) -> list[CellDevice]:
    """The ``n`` (cell, device) pairs with the largest peak (``by="peak"``) or delta."""
    rows = cell_devices(report)
    key = (lambda r: r.peak) if by == "peak" else (lambda r: r.delta)
    rows.sort(key=lambda r: (-key(r), r.position))
    return [r for r in rows if key(r) > 0][:n]


def top_layers(report: Mapping[str, Any], n: int = 15) -> list[Mapping[str, Any]]:
    """Layers with the most saved activations (peak, then current), largest first."""
    layers = [x for x in report.get("layers") or [] if x.get("peak_saved_bytes") or 0]
    layers.sort(key=lambda x: (-int(x.get("peak_saved_bytes", 0)), -int(x.get("saved_bytes", 0))))
    return layers[:n]


BREAKDOWN_PARTS = ("parameters", "gradients", "optimizer_state", "activations", "other")
#: The parts a report shows: ``other`` split into the runtime baseline and the rest.
SHOWN_PARTS = ("parameters", "gradients", "optimizer_state", "activations", "runtime", "other")
PART_LABELS = {
    "parameters": "parameters",
    "gradients": "gradients",
    "optimizer_state": "optimizer state",
    "activations": "activations",
    "runtime": "torch runtime",
    "other": "other",
}


def breakdown_parts(device: str, entry: Mapping[str, Any]) -> dict[str, int]:
    """A breakdown entry as :data:`SHOWN_PARTS`, which add up to its ``total_bytes``.

    ``runtime`` is the runtime baseline measured at torch's import (``runtime_bytes``) where
    it is a part of ``other``: on ``cpu``. On an accelerator the baseline (the CUDA context)
    is outside the allocator's total (a part of ``outside_pytorch``): ``runtime`` is 0 there.
    """
    parts = {p: int(entry.get(p) or 0) for p in BREAKDOWN_PARTS}
    runtime = int(entry.get("runtime_bytes") or 0) if device == "cpu" else 0
    parts["runtime"] = max(0, min(runtime, parts["other"]))
    parts["other"] -= parts["runtime"]
    return {p: parts[p] for p in SHOWN_PARTS}


def fmt_count(n: int) -> str:
    """``225755136`` -> ``225,755,136 B``: the exact figure next to a rounded one."""
    return f"{int(n):,} B"


def title(report: Mapping[str, Any]) -> str:
    """``vramscope report: <notebook>`` (the notebook is a user string: escape it)."""
    notebook = report.get("notebook")
    return f"vramscope report: {notebook}" if notebook else "vramscope report"


def measured_saving(before: Mapping[str, Any], after: Mapping[str, Any], key: str) -> int | None:
    """``before[key] - after[key]`` of an outcome's two runs, None unless both have it."""
    b, a = before.get(key), after.get(key)
    return b - a if isinstance(b, int) and isinstance(a, int) else None


def _versus(predicted: Any, before: Mapping[str, Any], after: Mapping[str, Any], key: str) -> str:
    """A predicted saving next to the measured one (before - after of ``key``, when both runs
    have it: a step peak is null unless both runs had a measured step)."""
    got = measured_saving(before, after, key)
    return f"predicted {fmt_bytes(predicted)}, measured {fmt_bytes(got)}"


def advice_items(report: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Optimization results when the report carries them (``advice``): (title, figures)."""
    advice = report.get("advice")
    if not isinstance(advice, Mapping):
        return []
    items: list[tuple[str, str]] = []
    for outcome in advice.get("outcomes") or []:
        if not isinstance(outcome, Mapping):
            continue
        predicted = outcome.get("predicted") or {}
        before = outcome.get("before") or {}
        after = outcome.get("after") or {}
        text = "applied: saved activations " + _versus(
            predicted.get("saving_bytes"), before, after, "activation_bytes"
        )
        if predicted.get("step_peak_saving_bytes") is not None:
            text += "; step peak " + _versus(
                predicted["step_peak_saving_bytes"], before, after, "step_peak_bytes"
            )
        items.append((str(outcome.get("title") or outcome.get("technique") or "outcome"), text))
    for suggestion in advice.get("suggestions") or []:
        if not isinstance(suggestion, Mapping):
            continue
        saving = (suggestion.get("predicted") or {}).get("saving_bytes")
        cost = (suggestion.get("cost") or {}).get("text") or ""
        items.append(
            (
                str(suggestion.get("title") or suggestion.get("technique") or "suggestion"),
                f"suggested: saves {fmt_bytes(saving)}" + (f"; cost: {cost}" if cost else ""),
            )
        )
    return items

"""The summary a human-readable report opens with: the answer before the charts.

The session's peak (bytes, device), the cell and, when known, the training step where it
happened; what it was made of; the layers that saved the most activations; and the applied
suggestions, predicted against measured. Both the HTML and the Markdown report render the
:class:`Answer` this module computes from the report dict (no torch, no runtime).

What the peak was made of is put together from what the report measured, and its parts add
up to the peak exactly: parameters, gradients and optimizer state as the breakdown holds them
(they outlive the cell), the saved activations of the last measured forward when it ran in
the peak's cell (the layers' peaks) else the live ones, the torch runtime baseline measured at
torch's import (``breakdown_parts``), and ``other``: the rest of the peak (temporaries, the
gradients and optimizer state a step allocates and frees, Python objects). A peak in a cell
before the model's measured forward counts no model part; when the parts held now still
exceed the peak, none are shown and ``note`` says why.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from .summary import SHOWN_PARTS, breakdown_parts, fmt_bytes, measured_saving, top_layers

#: Layers listed in the summary.
TOP_LAYERS = 5


class Peak(NamedTuple):
    """The most bytes in use on ``device`` during the session, and the cell it was in."""

    device: str
    bytes: int
    cell: Mapping[str, Any] | None  # None: between cells (a sample outside any cell)


class Applied(NamedTuple):
    """One applied suggestion: predicted and measured savings (None: not measured yet)."""

    title: str
    predicted: int | None
    measured: int | None
    predicted_step: int | None
    measured_step: int | None
    verdict: str
    note: str


class Answer(NamedTuple):
    peak: Peak | None
    step: str | None  # the training step of the peak's cell, in words, when known
    parts: dict[str, int]  # SHOWN_PARTS, adding up to peak.bytes (empty: no breakdown)
    note: str  # how the parts were put together, or why they are approximate
    layers: list[Mapping[str, Any]]  # the top layers by peak saved activations
    activations: int  # all layers' peak saved bytes (what the top layers are a share of)
    applied: list[Applied]


def report_device(report: Mapping[str, Any]) -> str:
    """The device a summary is about: the first accelerator any cell touched, else cpu."""
    seen = [d for c in report.get("cells") or [] for d in c.get("devices") or {}]
    return next((d for d in seen if d != "cpu"), "cpu")


def session_peak(report: Mapping[str, Any], device: str) -> Peak | None:
    """The highest in-use bytes on ``device``: each cell's ``before + peak_delta``, and the
    samples (a sample's cell is the one running at its time); None when nothing read it."""
    best: Peak | None = None
    cells = list(report.get("cells") or [])
    for cell in cells:
        d = (cell.get("devices") or {}).get(device)
        if d is not None:
            value = int(d["before_bytes"]) + int(d["peak_delta_bytes"])
            if best is None or value > best.bytes:
                best = Peak(device, value, cell)
    for sample in report.get("samples") or []:
        used = (sample.get("d") or {}).get(device, {}).get("used")
        if used is not None and (best is None or used > best.bytes):
            best = Peak(device, int(used), _cell_at(cells, float(sample["t"])))
    return best


def _cell_at(cells: list[Mapping[str, Any]], t: float) -> Mapping[str, Any] | None:
    for cell in cells:
        start = float(cell.get("start_time") or 0.0)
        if start <= t <= start + float(cell.get("duration") or 0.0):
            return cell
    return None


def _same_cell(cell: Mapping[str, Any], ref: Any) -> bool:
    """``ref`` (a CellRef or a measured run: cell_id and execution_count) is ``cell``."""
    if not isinstance(ref, Mapping):
        return False
    if ref.get("cell_id") and cell.get("cell_id"):
        return bool(ref["cell_id"] == cell["cell_id"])
    count = ref.get("execution_count")
    return count is not None and count == cell.get("execution_count")


def _measured_here(report: Mapping[str, Any], cell: Mapping[str, Any] | None) -> bool:
    """The layers' measured forward ran in ``cell``."""
    return cell is not None and _same_cell(cell, report.get("layers_measured"))


def _step(report: Mapping[str, Any], cell: Mapping[str, Any] | None) -> str | None:
    """The training step of ``cell`` in words: its measured forward and its step peak."""
    if cell is None:
        return None
    said: list[str] = []
    forward = report.get("layers_measured") or {}
    if _measured_here(report, cell):
        index = forward.get("forward_index", "?")
        said.append(f"model call {index} of the cell, measured layer by layer")
    advice = report.get("advice") if isinstance(report.get("advice"), Mapping) else {}
    runs = [
        run
        for o in (advice or {}).get("outcomes") or []
        for run in (o.get("before"), o.get("after"))
        if isinstance(run, Mapping) and _same_cell(cell, run)
    ]
    peaks = [run["step_peak_bytes"] for run in runs if run.get("step_peak_bytes") is not None]
    if peaks:
        said.append(f"a training step measured op by op, step peak {fmt_bytes(peaks[-1])}")
    elif _same_cell(cell, (advice or {}).get("training_cell")):
        said.append("the training cell Optimize advised on")
    return "; ".join(said) or None


def _position(report: Mapping[str, Any], cell: Mapping[str, Any] | None) -> int | None:
    cells = list(report.get("cells") or [])
    return next((i for i, c in enumerate(cells) if c is cell), None)


def _measured_position(report: Mapping[str, Any]) -> int | None:
    """Where in ``cells`` the layers' measured forward ran (None: none, or not found)."""
    ref = report.get("layers_measured")
    cells = list(report.get("cells") or [])
    return next((i for i, c in enumerate(cells) if _same_cell(c, ref)), None)


def _parts(report: Mapping[str, Any], peak: Peak, layers_total: int) -> tuple[dict[str, int], str]:
    entry = (report.get("breakdown") or {}).get(peak.device)
    if not isinstance(entry, Mapping):
        return {}, ""
    held = breakdown_parts(peak.device, entry)
    parts = {p: held[p] for p in ("parameters", "gradients", "optimizer_state", "runtime")}
    parts["activations"] = held["activations"]
    how = "parameters, gradients and optimizer state as held when the report was made; "
    measured_at, peak_at = _measured_position(report), _position(report, peak.cell)
    if _measured_here(report, peak.cell):
        parts["activations"] = layers_total
        how += "activations: those the measured forward in that cell saved; "
    elif measured_at is not None and (peak_at is None or peak_at < measured_at):
        for p in ("parameters", "gradients", "optimizer_state", "activations"):
            parts[p] = 0
        how = "the peak came before the model's measured forward: no model part is counted; "
    else:
        how += "activations: those alive when the report was made; "
    note = how + "torch runtime: measured at torch's import; other: the rest of the peak"
    known = sum(parts.values())
    if known > peak.bytes:  # the parts held now did not all exist at the peak
        return {}, (
            f"not shown: what is held now exceeds the peak by {known - peak.bytes:,} B "
            "(the peak came before it); see the memory breakdown below"
        )
    parts["other"] = peak.bytes - known
    return {p: parts[p] for p in SHOWN_PARTS}, note


def _applied(report: Mapping[str, Any]) -> list[Applied]:
    advice = report.get("advice")
    if not isinstance(advice, Mapping):
        return []
    out: list[Applied] = []
    for o in advice.get("outcomes") or []:
        if not isinstance(o, Mapping):
            continue
        predicted = o.get("predicted") or {}
        before, after = o.get("before") or {}, o.get("after") or {}

        verdict = o.get("verdict") or (
            "pending" if not after else ("missed" if o.get("missed") else "met")
        )
        out.append(
            Applied(
                str(o.get("title") or o.get("technique") or "suggestion"),
                predicted.get("saving_bytes"),
                measured_saving(before, after, "activation_bytes"),
                predicted.get("step_peak_saving_bytes"),
                measured_saving(before, after, "step_peak_bytes"),
                str(verdict),
                str(o.get("note") or ""),
            )
        )
    return out


def answer(report: Mapping[str, Any]) -> Answer:
    """The summary of ``report`` (see the module doc)."""
    peak = session_peak(report, report_device(report))
    all_layers = top_layers(report, n=len(report.get("layers") or []))
    total = sum(int(x.get("peak_saved_bytes") or 0) for x in all_layers)
    parts, note = _parts(report, peak, total) if peak is not None else ({}, "")
    return Answer(
        peak,
        _step(report, peak.cell if peak else None),
        parts,
        note,
        all_layers[:TOP_LAYERS],
        total,
        _applied(report),
    )

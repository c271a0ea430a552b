"""Helpers every technique uses to build a protocol ``Suggestion``."""

from __future__ import annotations

from typing import Any

from ...messages.optimize import CellRef, Predicted, Suggestion, SuggestionKind


def mib(n: float) -> str:
    """``12.3 MiB``; under a MiB in KiB (``20.0 KiB``) so small figures do not read as 0."""
    if abs(n) < 2**20:
        return f"{n / 2**10:.1f} KiB"
    return f"{n / 2**20:.1f} MiB"


def predicted(
    before: int | None, after: int | None, saving: int, step_peak: int | None = None
) -> Predicted:
    saving = max(0, int(saving))
    fraction = None
    if before:
        fraction = round(min(1.0, saving / before), 4)
    return {
        "activation_bytes_before": None if before is None else max(0, int(before)),
        "activation_bytes_after": None if after is None else max(0, int(after)),
        "saving_bytes": saving,
        "step_peak_saving_bytes": None if step_peak is None else max(0, int(step_peak)),
        "saving_fraction": fraction,
    }


def suggestion(
    sid: str,
    technique: str,
    title: str,
    why: list[str],
    pred: Predicted,
    cost: tuple[str, float | None],
    kind: SuggestionKind,
    code: str,
    undo: str | None = None,
    target: dict[str, Any] | None = None,
) -> Suggestion:
    target_cell: CellRef | None = None
    if target is not None:
        target_cell = {
            "cell_id": target.get("cell_id"),
            "execution_count": target.get("execution_count"),
        }
    return {
        "id": sid,
        "technique": technique,
        "title": title,
        "why": why,
        "predicted": pred,
        "cost": {"text": cost[0], "factor": cost[1]},
        "kind": kind,
        "code": code,
        "undo_code": undo,
        "target_cell": target_cell,
    }

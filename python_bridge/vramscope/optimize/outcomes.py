"""Predicted vs measured: what each training-cell run measured, and, for every applied
suggestion (a cell carrying its ``# vramscope: <id>`` marker ran), the run before and after.

Per cell, before advice was ever asked for, :meth:`CellLog.add` only appends a tuple of
references to a short deque: nothing is computed. Once active, a cell's source is checked
for the training-cell pattern and for markers (a substring test).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..messages.optimize import Measured, Outcome, Predicted
from .names import CellSource, is_training_source, marker_ids
from .stepwatch import StepFigures

#: A measured saving further than this from the prediction is flagged as missed.
MISS_LIMIT = 0.2
KEEP_CELLS = 32


@dataclass
class CellRun:
    """One recorded cell with the insight that followed it (references, computed later)."""

    cell: CellSource
    record: dict[str, Any]
    insight: dict[str, Any] | None
    step: StepFigures | None = None  # its first training step, measured (stepwatch)


def activation_bytes(insight: dict[str, Any] | None) -> int:
    """The watched model's saved activations at their peak during the cell (sum of rows)."""
    if not insight:
        return 0
    return sum(int(row.get("peak_saved_bytes", 0)) for row in insight.get("layers", ()))


def measured(run: CellRun, steps: bool = False) -> Measured:
    """``steps``: both runs of the outcome had a measured training step; the step peak is
    this run's, else null. The cell's own peak rise is no stand-in: the run before advice was
    asked for is usually the first, whose peak includes creating the optimizer's state."""
    return {
        "activation_bytes": activation_bytes(run.insight),
        "step_peak_bytes": run.step.peak if steps and run.step else None,
        "duration_s": float(run.record.get("duration", 0.0)),
        "cell_id": run.cell.cell_id,
        "execution_count": run.cell.execution_count,
    }


@dataclass
class Applied:
    suggestion: dict[str, Any]
    before: CellRun | None
    after: CellRun | None = None


class CellLog:
    """Recent cells (always, as references) and the outcomes (once advice is active)."""

    def __init__(self) -> None:
        self.recent: deque[CellRun] = deque(maxlen=KEEP_CELLS)
        self.active = False
        self.last_training: CellRun | None = None
        self.offered: dict[str, dict[str, Any]] = {}  # suggestion id -> the suggestion
        self.applied: dict[str, Applied] = {}

    def add(
        self, cell: CellSource, record: dict[str, Any], step: StepFigures | None = None
    ) -> bool:
        """Keep one cell; True when an outcome changed (a marked cell ran)."""
        run = CellRun(cell, record, None, step)
        self.recent.append(run)
        if not self.active:
            return False
        changed = False
        for sid in marker_ids(cell.source):
            suggestion = self.offered.get(sid)
            if suggestion is not None:
                self.applied[sid] = Applied(suggestion, self.last_training)
                changed = True
        if is_training_source(cell.source) and record.get("ok", True):
            for applied in self.applied.values():
                if applied.after is None:
                    applied.after = run
            self.last_training = run
            return False  # the outcome is complete with this run's insight (attach)
        return changed

    def attach(self, insight: dict[str, Any]) -> bool:
        """The insight that followed the newest cells (it may cover several: coalesced).

        True when it completes an applied suggestion's "after" run.
        """
        completed = False
        for run in reversed(self.recent):
            if run.insight is not None:
                break
            run.insight = insight
            completed = completed or any(a.after is run for a in self.applied.values())
        return completed

    def activate(self, training: CellRun | None, suggestions: Sequence[Any]) -> None:
        self.active = True
        if training is not None and self.last_training is None:
            self.last_training = training
        for s in suggestions:
            self.offered[s["id"]] = s

    def measured_run(self, run: CellRun) -> CellRun:
        """``run`` with the insight that measured it: its own, else the next cell's (insight
        is coalesced: one run for several quick cells covers them all)."""
        if run.insight is not None or run not in self.recent:
            return run
        later = list(self.recent)[list(self.recent).index(run) + 1 :]
        found = next((r.insight for r in later if r.insight is not None), None)
        return CellRun(run.cell, run.record, found, run.step) if found is not None else run

    def baseline(self, run: CellRun) -> dict[str, Any] | None:
        """The insight before ``run``'s own: what was saved when ``run`` started."""
        runs = list(self.recent)
        if run not in runs:
            return None
        for earlier in reversed(runs[: runs.index(run)]):
            if earlier.insight is not None and earlier.insight is not run.insight:
                return earlier.insight
        return None

    def find_run(self, execution_count: int | None) -> CellRun | None:
        for run in reversed(self.recent):
            if run.cell.execution_count == execution_count:
                return run
        return None

    def outcomes(self) -> list[Outcome]:
        found = []
        for sid, a in self.applied.items():
            before = self.measured_run(a.before) if a.before else None
            after = self.measured_run(a.after) if a.after else None
            found.append(outcome(sid, Applied(a.suggestion, before, after)))
        return found


def outcome(sid: str, applied: Applied) -> Outcome:
    s = applied.suggestion
    predicted: Predicted = s["predicted"]
    steps = bool(applied.before and applied.before.step and applied.after and applied.after.step)
    before = measured(applied.before, steps) if applied.before else None
    after = measured(applied.after, steps) if applied.after else None
    miss: float | None = None
    if before is not None and after is not None:
        # the same instrument before and after: the model's saved activations at their peak
        want = predicted["saving_bytes"]
        got = before["activation_bytes"] - after["activation_bytes"]
        if want and predicted["activation_bytes_before"] is not None:
            miss = round(abs(got - want) / want, 4)
    return {
        "suggestion_id": sid,
        "technique": s["technique"],
        "title": s["title"],
        "predicted": predicted,
        "before": before,
        "after": after,
        "miss_fraction": miss,
        "missed": miss is not None and miss > MISS_LIMIT,
    }

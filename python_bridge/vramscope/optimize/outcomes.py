"""Predicted vs measured: what each training-cell run measured, and, for every applied
suggestion (a cell carrying its ``# vramscope: <id>`` marker ran), the run before and after.

Per cell, before advice was ever asked for, :meth:`CellLog.add` only appends a tuple of
references to a short deque: nothing is computed. Once active, a cell's source is checked
for the training-cell pattern and for markers (a substring test).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..messages.optimize import Measured, Outcome, OutcomeVerdict, Predicted
from .names import CellSource, marker_ids
from .roles import is_training, rebinds, unchanged_template, undo_ids
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
    #: how many of its measured forwards still held saved tensors when it ended: 2 or more
    #: is a cell that kept every graph it made (``losses.append(loss)``), a leak
    kept_forwards: int = 0


def activation_bytes(insight: dict[str, Any] | None, baseline: dict[str, Any] | None = None) -> int:
    """The watched model's saved activations at their peak during the cell (sum of rows),
    less what was already saved when the cell started (``baseline``: the insight before it;
    a graph another cell kept alive is not this run's)."""
    if not insight:
        return 0
    rows = own_peaks(list(insight.get("layers", ())), baseline, insight.get("model"))
    return sum(int(row.get("peak_saved_bytes", 0)) for row in rows)


def own_peaks(
    layers: list[dict[str, Any]], baseline: dict[str, Any] | None, model: Any = None
) -> list[dict[str, Any]]:
    """Rows whose peaks leave out what was already saved when the run started (the
    baseline's live ``saved_bytes``, same model). Rows are copied only when there is any."""
    if not baseline or baseline.get("model") is None:
        return layers  # read only: the rows are not copied
    if model is not None and baseline.get("model") != model:
        return layers
    held = {
        r["path"]: int(r["saved_bytes"]) for r in baseline.get("layers", ()) if r.get("saved_bytes")
    }
    if not held:
        return layers
    return [
        {**r, "peak_saved_bytes": max(0, int(r["peak_saved_bytes"]) - held.get(r["path"], 0))}
        if r["path"] in held
        else r
        for r in layers
    ]


def measured(run: CellRun, steps: bool = False, baseline: dict[str, Any] | None = None) -> Measured:
    """``steps``: both runs of the outcome had a measured training step; the step peak is
    this run's, else null. The cell's own peak rise is no stand-in: the run before advice was
    asked for is usually the first, whose peak includes creating the optimizer's state.
    ``baseline``: the insight before the run (what it did not save itself)."""
    return {
        "activation_bytes": activation_bytes(run.insight, baseline),
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
        self,
        cell: CellSource,
        record: dict[str, Any],
        step: StepFigures | None = None,
        ns: dict[str, Any] | None = None,
        kept_forwards: int = 0,
    ) -> bool:
        """Keep one cell; True when an outcome changed (a marked cell ran).

        A suggestion is applied when a cell carrying its marker runs for the first time
        since it was offered (or since its undo cell ran): the training run before that cell
        is its "before", the first training run from that cell on its "after". Running the
        marked cell, the training cell or the old cell again changes neither; a template run
        exactly as generated applies nothing."""
        run = CellRun(cell, record, None, step, kept_forwards)
        self.recent.append(run)
        if not self.active:
            return False
        changed = False
        for sid in undo_ids(cell.source):
            if self.applied.pop(sid, None) is not None:
                changed = True
        for sid in marker_ids(cell.source):
            suggestion = self.offered.get(sid)
            if suggestion is None or sid in self.applied:
                continue
            if unchanged_template(suggestion, cell.source):
                continue
            if suggestion.get("kind") == "free":  # measured by the cell itself: what it freed
                self.applied[sid] = Applied(suggestion, None, run)
            else:
                self.applied[sid] = Applied(suggestion, self.last_training)
            changed = True
        if record.get("ok", True) and is_training(cell.source, step, ns):
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
        return replace(run, insight=found) if found is not None else run

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
            baselines = (
                self.baseline(a.before) if a.before else None,
                self.baseline(a.after) if a.after else None,
            )
            found.append(outcome(sid, Applied(a.suggestion, before, after), baselines))
        return found


def outcome(
    sid: str,
    applied: Applied,
    baselines: tuple[dict[str, Any] | None, dict[str, Any] | None] = (None, None),
) -> Outcome:
    """Predicted vs measured for one applied suggestion. Saved activations and the step peak
    are each judged against their own prediction; ``missed`` when either is off by more than
    ``MISS_LIMIT``. ``verdict``: pending (no run after it yet), undone (the run after it
    re-created what the suggestion changed), missed, or met."""
    s = applied.suggestion
    predicted: Predicted = s["predicted"]
    if s.get("kind") == "free":
        return freed_outcome(sid, s, applied.after)
    steps = bool(applied.before and applied.before.step and applied.after and applied.after.step)
    before = measured(applied.before, steps, baselines[0]) if applied.before else None
    after = measured(applied.after, steps, baselines[1]) if applied.after else None
    miss: float | None = None
    peak_miss: float | None = None
    if before is not None and after is not None:
        # the same instrument before and after: the model's saved activations at their peak
        want = predicted["saving_bytes"]
        got = before["activation_bytes"] - after["activation_bytes"]
        if want and predicted["activation_bytes_before"] is not None:
            miss = round(abs(got - want) / want, 4)
        want_peak = predicted["step_peak_saving_bytes"]
        if want_peak and before["step_peak_bytes"] is not None and after["step_peak_bytes"]:
            got_peak = before["step_peak_bytes"] - after["step_peak_bytes"]
            peak_miss = round(abs(got_peak - want_peak) / want_peak, 4)
    note = undone_note(s, applied.after) if applied.after is not None else None
    missed = any(m is not None and m > MISS_LIMIT for m in (miss, peak_miss))
    verdict: OutcomeVerdict = (
        "pending" if after is None else "undone" if note else "missed" if missed else "met"
    )
    return {
        "suggestion_id": sid,
        "technique": s["technique"],
        "title": s["title"],
        "predicted": predicted,
        "before": before,
        "after": after,
        "miss_fraction": miss,
        "missed": missed and note is None,
        "step_peak_miss_fraction": peak_miss,
        "verdict": verdict,
        "note": note,
        "freed_bytes": None,
    }


def freed_outcome(sid: str, s: dict[str, Any], cell: CellRun | None) -> Outcome:
    """A "free" suggestion (the output cache, a kept traceback, graphs held by a list) is
    measured by its own cell: the bytes it gave back (the fall of the cell's memory, over its
    devices) against the bytes predicted."""
    predicted: Predicted = s["predicted"]
    freed: int | None = None
    miss: float | None = None
    if cell is not None:
        deltas = (cell.record.get("devices") or {}).values()
        freed = max(0, -sum(int(d.get("delta_bytes", 0)) for d in deltas if isinstance(d, dict)))
        want = predicted["saving_bytes"]
        if want:
            miss = round(abs(freed - want) / want, 4)
    missed = miss is not None and miss > MISS_LIMIT
    verdict: OutcomeVerdict = "pending" if cell is None else "missed" if missed else "met"
    return {
        "suggestion_id": sid,
        "technique": s["technique"],
        "title": s["title"],
        "predicted": predicted,
        "before": None,
        "after": measured(cell) if cell is not None else None,
        "miss_fraction": miss,
        "missed": missed,
        "step_peak_miss_fraction": None,
        "verdict": verdict,
        "note": None,
        "freed_bytes": freed,
    }


def undone_note(suggestion: dict[str, Any], after: CellRun) -> str | None:
    """An enable cell changed objects in place; a training run that assigns one of the names
    it changed again (``optimizer = torch.optim.AdamW(...)`` in the training cell) built
    them anew without the change."""
    if suggestion.get("kind") != "enable":
        return None
    code = suggestion.get("code") or ""
    if after.cell.source and marker_ids(after.cell.source):
        return None  # the marked cell itself
    changed = _names_used(code)
    again = sorted(changed & rebinds(after.cell.source))
    if not again:
        return None
    listed = ", ".join(f"`{n}`" for n in again[:3])
    return (
        f"your training cell [{after.cell.execution_count}] re-created {listed}, "
        "so this change was not in the run measured after it: apply it in that cell "
        "(after the line that creates it), or run this cell after that line"
    )


def _names_used(code: str) -> set[str]:
    """The names ``code`` uses, but those its loops, comprehensions and lambdas bind."""
    import ast

    from .names import parse

    tree = parse(code)
    if tree is None:
        return set()
    used: set[str] = set()
    local: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            used.add(node.id)
        targets: list[ast.AST] = []
        if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            targets.append(node.target)
        elif isinstance(node, ast.Lambda):
            local.update(a.arg for a in node.args.args)
        for target in targets:
            local.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return {n for n in used - local if not n.startswith("_")} - _NOT_USER_NAMES


_NOT_USER_NAMES = {"torch", "nn", "F", "print", "len", "list", "dict", "set", "getattr"}

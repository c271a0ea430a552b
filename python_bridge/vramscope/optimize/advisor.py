"""The advisor: ranked suggestions, mistakes and outcomes for the user's model.

:class:`Advisor` is the kernel's one instance (``Runtime.optimize``). Until advice is asked
for, its per-cell work is one deque append (:meth:`Advisor.after_cell`). ``advise`` never
raises: a failure becomes a note in an otherwise empty Advice.
"""

from __future__ import annotations

import gc
import sys
import time
import weakref
from typing import Any, Callable

from ..messages.optimize import Advice, Suggestion
from .names import CellSource
from .outcomes import CellLog, CellRun
from .roles import is_training
from .stepwatch import StepWatch

SourceFn = Callable[[int | None], str]


def empty_advice(note: str | None = None) -> Advice:
    return {
        "model": None,
        "training_cell": None,
        "names": {"model": None, "optimizer": None, "loss_fn": None, "data": None, "batch": None},
        "suggestions": [],
        "mistakes": [],
        "outcomes": [],
        "notes": [note] if note else [],
        "finder_code": None,
        "compute_ms": 0.0,
    }


def rank(suggestions: list[Suggestion]) -> list[Suggestion]:
    """Largest predicted saving at the step's peak (else of bytes) first; ties: the cheaper
    (lower cost factor) first."""

    def key(s: Suggestion) -> tuple[int, float, str]:
        pred = s["predicted"]
        peak = pred["step_peak_saving_bytes"]
        return (
            -(peak if peak is not None else pred["saving_bytes"]),
            s["cost"]["factor"] or 1.0,
            s["id"],
        )

    return sorted(suggestions, key=key)


class Advisor:
    """Args:
    namespace: the user's namespace (a callable: the shell may change).
    source_of: an execution count -> that cell's source ("" when unknown).
    records: the recorded cells (CellRecord dicts), oldest first.
    last_insight: the latest after-cell Insight (holders), or None.
    watch: makes model insight measure a module (the model the training cell uses, when it
        is not a namespace name such as ``trainer.model``).
    cell_key: the running cell's start time, its record's ``start_time`` (None between
        cells); with it, once advice was asked for, each cell's first training step of the
        model is measured (stepwatch).
    follow: the step watch's way onto the model's forward hooks (stepwatch.StepWatch).
    """

    def __init__(
        self,
        namespace: Callable[[], dict[str, Any]],
        source_of: SourceFn,
        records: Callable[[], list[dict[str, Any]]],
        last_insight: Callable[[], dict[str, Any] | None],
        watch: Callable[[Any], None] | None = None,
        cell_key: Callable[[], float | None] | None = None,
        follow: Any = None,
    ) -> None:
        self._ns = namespace
        self._source_of = source_of
        self._records = records
        self._last_insight = last_insight
        self._watch = watch
        self.log = CellLog()
        self.steps = StepWatch(cell_key, follow) if cell_key is not None else None
        # (model weakref, insight, baseline, rows, figures): see _memo_for
        self._memo: tuple[Any, Any, Any, int, dict[Any, Any]] = (None, None, None, 0, {})

    # --- per cell ---------------------------------------------------------------------------

    def after_cell(self, record: dict[str, Any], kept_forwards: int = 0) -> bool:
        """Keep the cell (``kept_forwards``: how many of its measured forwards still held
        saved tensors at its end); True when an applied suggestion's outcome changed."""
        count = record.get("execution_count")
        source = self._source_of(count) if self.log.active else ""
        cell = CellSource(count, record.get("cell_id"), source)
        step = self.steps.take(record.get("start_time")) if self.steps is not None else None
        ns = self._ns() if self.log.active else None
        return self.log.add(cell, record, step, ns, kept_forwards)

    def cell_ended(self) -> None:
        """The running cell ended (its post_run_cell): a step left open is dropped."""
        if self.steps is not None:
            self.steps.cell_ended()

    def after_insight(self, insight: Any) -> bool:
        """The after-cell insight; True when it completes an outcome (a training run after an
        applied suggestion)."""
        return isinstance(insight, dict) and self.log.attach(insight)

    # --- advice -----------------------------------------------------------------------------

    def advise(self, model: str | None = None) -> Advice:
        start = time.perf_counter()
        torch = sys.modules.get("torch")
        if torch is None:
            return empty_advice("torch is not imported in this kernel: nothing to advise on")
        # no cyclic collection in the middle: it would walk the user's whole heap (a big
        # model's modules) for garbage that this short computation does not make
        collecting = gc.isenabled()
        gc.disable()
        try:
            advice = self._advise(torch, model)
        except Exception as exc:
            advice = empty_advice(f"advice failed: {type(exc).__name__}: {exc}")
        finally:
            if collecting:
                gc.enable()
        advice["compute_ms"] = round((time.perf_counter() - start) * 1000.0, 3)
        return advice

    def _memo_for(
        self, model: Any, run: CellRun | None, baseline: Any, rows: int
    ) -> dict[Any, Any]:
        """The figures worked out for this model and these measured rows (the same insight
        and baseline objects): kept while they stay, so that advice asked again (the panel
        reopened, each outcome) does not walk a 10,000-module model again."""
        insight = run.insight if run is not None else None
        memo_model, memo_insight, memo_baseline, memo_rows, memo = self._memo
        if (
            memo_model is not None
            and memo_model() is model
            and memo_insight is insight
            and memo_baseline is baseline
            and memo_rows == rows
        ):
            return memo
        ref = weakref.ref(model) if model is not None else None
        self._memo = (ref, insight, baseline, rows, {})
        return self._memo[4]

    def _cells(self) -> list[CellSource]:
        cells = []
        for record in self._records():
            count = record.get("execution_count")
            cells.append(CellSource(count, record.get("cell_id"), self._source_of(count)))
        for run in self.log.recent:
            if not run.cell.source:
                run.cell.source = self._source_of(run.cell.execution_count)
        return cells

    def _training_run(self, cells: list[CellSource]) -> CellRun | None:
        """The newest cell that trained the model: its step was measured, or its code trains
        (roles.is_training); one that failed is skipped."""
        ns = self._ns()
        steps = {
            run.cell.execution_count: run.step for run in self.log.recent if run.step is not None
        }
        for cell in reversed(cells):
            if not is_training(cell.source, steps.get(cell.execution_count), ns):
                continue
            run = self.log.find_run(cell.execution_count)
            if run is not None and run.record.get("ok", True):
                return self.log.measured_run(run)
            if run is None:
                return CellRun(cell, {}, None)
        return self.log.last_training

    def _advise(self, torch: Any, model: str | None) -> Advice:
        from . import finder_cell, mistakes
        from .context import build_context
        from .techniques import accumulation, attention, autocast, checkpointing, lora, simple
        from .techniques import optimizer as lighter_optimizer
        from .techniques.framework_advice import adapt as in_framework_terms

        if model is not None and not resolves_to_module(model, self._ns(), torch):
            return empty_advice(
                f"no module is found at {model[:200]!r}: name a module in the namespace, or "
                "an attribute path or constant index to one (trainer.model, "
                "models['lm'].encoder)"
            )
        cells = self._cells()
        training_run = self._training_run(cells)
        baseline = self.log.baseline(training_run) if training_run else None
        ctx = build_context(
            torch, self._ns(), cells, training_run, model, self._last_insight(), baseline
        )
        ctx.memo = self._memo_for(ctx.model, training_run, baseline, len(ctx.layers))
        if ctx.model is not None and self.steps is not None:
            try:
                self.steps.watch(torch, ctx.model)  # its steps are measured from now on
            except Exception as exc:
                ctx.notes.append(f"the training step cannot be measured: {exc}")
        skipped = self.steps.skipped if self.steps is not None else None
        if skipped and training_run is not None and training_run.step is None:
            ctx.notes.append(skipped)
        if ctx.model is not None and not ctx.layers and self._watch is not None:
            self._watch(ctx.model)  # measure this module (not a namespace name) from now on
        runs = list(self.log.recent)
        suggestions: list[Suggestion] = []
        for technique in (checkpointing.suggest, autocast.suggest, accumulation.suggest):
            suggestions += _safe(technique, ctx)
        suggestions += _safe(simple.zero_grad, ctx)
        suggestions += _safe(lighter_optimizer.suggest, ctx)
        suggestions += _safe(lora.suggest, ctx)
        suggestions += _safe(attention.suggest, ctx)
        suggestions += _safe(lambda c: simple.inference_mode(c, runs), ctx)
        suggestions += _safe(simple.free_holders, ctx)
        suggestions = in_framework_terms(ctx, suggestions)  # a Trainer's own settings
        evals = simple.eval_cells(ctx, runs)
        ranked = [s for s in rank(suggestions) if worth_offering(s, ctx.step)]
        self.log.activate(training_run if training_run and training_run.record else None, ranked)
        ranked = with_applied(ranked, self.log)
        return {
            "model": ctx.model_name,
            "training_cell": ctx.training.ref if ctx.training else None,  # type: ignore[typeddict-item]
            "names": ctx.names.as_dict(),  # type: ignore[typeddict-item]
            "suggestions": ranked,
            "mistakes": mistakes.find(ctx, evals),
            "outcomes": self.log.outcomes(),
            "notes": ctx.notes,
            "finder_code": finder_cell.code(ctx),
            "compute_ms": 0.0,
        }


def resolves_to_module(name: str, ns: dict[str, Any], torch: Any) -> bool:
    from .context import lookup

    return lookup(ns, name, torch) is not None


#: Below this fraction of the saved activations (and of the measured step's peak) a saving is
#: not offered (README, "Predictions").
MIN_SAVING_FRACTION = 0.02


def worth_offering(s: Suggestion, step: Any) -> bool:
    """A memory technique's card is offered when it saves at least ``MIN_SAVING_FRACTION``:
    of the measured step's peak when a step was measured and the technique predicts it (the
    peak decides what fits: a card never says "saves 2 MiB" while the peak stays or rises),
    else of the saved activations. Freeing what holders keep and the fixes for mistakes are
    always offered."""
    if s["technique"] not in ("checkpointing", "autocast", "accumulation", "attention"):
        return True
    pred = s["predicted"]
    peak_saving = pred["step_peak_saving_bytes"]
    peak = getattr(step, "peak", None)
    if peak and peak_saving is not None:
        return peak_saving >= MIN_SAVING_FRACTION * peak
    fraction = pred["saving_fraction"]
    return fraction is None or fraction >= MIN_SAVING_FRACTION


def with_applied(ranked: list[Suggestion], log: CellLog) -> list[Suggestion]:
    """The ranked suggestions, each marked ``applied`` or not, followed by the applied ones
    no longer offered (the technique is in place): their cards stay, with the undo cell."""
    out: list[Suggestion] = []
    seen = set()
    for s in ranked:
        seen.add(s["id"])
        out.append({**s, "applied": s["id"] in log.applied})
    for sid, applied in log.applied.items():
        if sid not in seen:
            out.append({**applied.suggestion, "applied": True})  # type: ignore[typeddict-item]
    return out


def _safe(technique: Callable[[Any], list[Suggestion]], ctx: Any) -> list[Suggestion]:
    try:
        return technique(ctx)
    except Exception as exc:  # one technique failing must not hide the others
        name = getattr(technique, "__module__", "technique").rsplit(".", 1)[-1]
        ctx.notes.append(f"{name}: failed ({type(exc).__name__}: {exc})")
        return []

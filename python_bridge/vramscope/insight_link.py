"""Defensive link to the model-insight engine (``vramscope.insight``), used only with torch."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Callable, Optional

from .messages.insight import empty_insight
from .torch_import import TorchImportWatch

# device id -> the device's reading (see insight.breakdown.TotalFn)
TotalFn = Callable[[str], "Mapping[str, Any] | None"]


class InsightLink:
    """Creates the engine lazily once torch is imported; any failure just disables insight."""

    def __init__(self, shell: Any, total_fn: TotalFn | None = None) -> None:
        self._shell = shell
        self._total_fn = total_fn
        self._engine: Any = None
        self._installed = False
        self.unavailable: str | None = None
        self.last: dict[str, Any] | None = None
        #: the newest after-cell Insight whose layers saved activations (the last measured
        #: step's per-layer figures, which the next cell's peak reset sets to 0): the report's
        self.measured: dict[str, Any] | None = None
        self._rows_seen: list[dict[str, Any]] | None = None
        #: the last after-cell Insight has other layer rows than the one before (the engine
        #: hands the same list again after a cell that changed none: never changed in place)
        self.rows_changed = False
        self._import_watch: Optional[TorchImportWatch] = None
        # IPython 9 counts a cell before pre_run_cell, older versions after it: the
        # difference to the record's count is learned at the first cell's end
        self._count_offset = 0
        self._started: tuple[Optional[str], Optional[int]] = (None, None)
        #: at the last cell's end: how many of its measured forwards still held saved
        #: tensors (several: the cell kept every graph it made, a leak)
        self.kept_forwards = 0

    def begin_cell(
        self, cell_id: Optional[str], execution_count: Optional[int], enabled: bool
    ) -> None:
        """A cell starts: arm activation tracking for its first forwards. Without torch yet,
        tracking starts the moment torch finishes importing (``import torch`` and a forward
        in one cell are tracked)."""
        if isinstance(execution_count, int):
            execution_count -= self._count_offset
        self._started = (cell_id, execution_count)
        if not enabled:
            self._stop_import_watch()
            return
        if "torch" in sys.modules:
            self._stop_import_watch()
            self._start_tracking(cell_id, execution_count)
            return
        if self._import_watch is None:
            self._import_watch = TorchImportWatch()
        self._import_watch.arm(lambda: self._start_tracking(cell_id, execution_count))

    def end_cell(self, execution_count: Optional[int]) -> bool:
        """The cell ended with this (the record's) execution count: the tracker's note of
        its measured call gets the same number. True when the cell ran a measured model
        call (its insight should not wait for the end of a Run All)."""
        cell_id, started = self._started
        engine = self._engine if self._installed else None
        self.kept_forwards = 0
        if engine is None:
            return False
        tracker = engine.tracker
        self.kept_forwards = tracker.kept_forwards()
        known = isinstance(execution_count, int) and isinstance(started, int)
        if known and started != execution_count:
            self._count_offset += started - execution_count  # type: ignore[operator]
            tracker.renumber_cell((cell_id, started), (cell_id, execution_count))
        return bool(tracker.measured_this_cell)

    def notes(self) -> list[str]:
        """What model insight could not measure, and why, each said once."""
        engine = self._engine if self._installed else None
        if engine is None:
            return []
        try:
            return list(engine.tracker.notes())
        except Exception:
            return []

    def _start_tracking(self, cell_id: Optional[str], execution_count: Optional[int]) -> None:
        self.set_enabled(True)
        if self._installed:
            self._engine.begin_cell(cell_id, execution_count)

    def _stop_import_watch(self) -> None:
        if self._import_watch is not None:
            self._import_watch.disarm()
            self._import_watch = None

    def engine(self) -> Any:
        if self._engine is not None or self.unavailable is not None:
            return self._engine
        if "torch" not in sys.modules:
            return None
        try:
            from .insight import InsightEngine  # type: ignore[attr-defined,unused-ignore]

            self._engine = InsightEngine(self._shell, total_fn=self._total_fn)
        except Exception as exc:
            self.unavailable = f"model insight unavailable ({type(exc).__name__}: {exc})"
        return self._engine

    def set_enabled(self, enabled: bool) -> None:
        engine = self.engine() if enabled or self._installed else None
        if engine is None or enabled == self._installed:
            return
        if enabled:
            engine.install()
        else:
            engine.uninstall()
        self._installed = enabled

    def after_cell(self, budget_ms: float, resume: bool = False) -> dict[str, Any] | None:
        """The after-cell Insight; with ``resume`` the holders scan that stopped at its
        budget continues (None when there is none to continue, or when the cell changed
        nothing the last one shows: ``InsightEngine.unchanged``)."""
        self.set_enabled(True)
        if not self._installed or (not resume and self._engine.unchanged()):
            return None
        result: dict[str, Any] | None = (
            self._engine.continue_scan(budget_ms) if resume else self._engine.after_cell(budget_ms)
        )
        if result is not None:
            self.last = result
            rows = result.get("layers") or []
            if not resume:  # rows looked at once, not after every cell (1,000: ~0.25 ms)
                self.rows_changed = rows is not self._rows_seen
                self._rows_seen = rows
                if self.rows_changed and any(row.get("peak_saved_bytes") for row in rows):
                    self.measured = result
        return result

    def sent(self) -> None:
        """The after-cell insight went out (``InsightEngine.settle_shown``)."""
        if self._installed and self._engine is not None:
            self._engine.settle_shown()

    def snapshot(self, model: str | None) -> dict[str, Any]:
        """An Insight now; a ``model`` name also becomes the watched model (it sticks)."""
        engine = self.engine()
        if engine is None:
            reason = self.unavailable or "model insight needs torch to be imported"
            return dict(empty_insight(reason))
        if model is not None:
            engine.watch(model)
        result: dict[str, Any] = engine.snapshot(model)
        self.last = result
        return result

    def watch(self, model: Any) -> bool:
        engine = self.engine()
        if engine is None:
            return False
        engine.watch(model)
        return True

    def close(self) -> None:
        self._stop_import_watch()
        if self._installed and self._engine is not None:
            self._engine.uninstall()
        self._installed = False

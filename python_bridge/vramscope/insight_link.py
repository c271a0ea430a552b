"""Defensive link to the model-insight engine (``vramscope.insight``), used only with torch."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Callable

from .protocol import empty_insight

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

    def after_cell(self, budget_ms: float) -> dict[str, Any] | None:
        self.set_enabled(True)
        if not self._installed:
            return None
        result: dict[str, Any] = self._engine.after_cell(budget_ms)
        self.last = result
        return result

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
        if self._installed and self._engine is not None:
            self._engine.uninstall()
        self._installed = False

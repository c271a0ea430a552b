"""In-process cells for the Optimize tests: an InsightEngine over a plain namespace and the
Advisor fed as the kernel's runtime feeds it (cell record, then the after-cell insight)."""

from __future__ import annotations

import time
from typing import Any

import torch

from vramscope.insight import InsightEngine
from vramscope.optimize.advisor import Advisor


class Cells:
    """Runs cells in a namespace and feeds the advisor as the kernel's runtime does."""

    def __init__(self) -> None:
        self.ns: dict[str, Any] = {"torch": torch}
        self.sources = [""]
        self.records: list[dict[str, Any]] = []
        self.engine = InsightEngine(namespace=self.ns)
        self.engine.install()
        self.last: dict[str, Any] | None = None
        self.running: float | None = None  # the running cell's start (the step watch's key)
        self.advisor = Advisor(
            lambda: self.ns,
            self._source,
            lambda: self.records,
            lambda: self.last,
            watch=self.engine.watch,
            cell_key=lambda: self.running,
            follow=self.engine.tracker.follow,
        )

    def _source(self, count: int | None) -> str:
        return self.sources[count] if isinstance(count, int) else ""

    def run(self, code: str, cell_id: str | None = None, insight: bool = True) -> None:
        """Run ``code`` as the next cell (``cell_id``: the same cell run again; without
        ``insight``, none follows it: in a quick Run All one insight covers several cells)."""
        self.sources.append(code)
        count = len(self.sources) - 1
        cell_id = cell_id or f"cell-{count}"
        self.engine.begin_cell(cell_id, count)
        start = time.perf_counter()
        self.running = start
        try:
            exec(compile(code, f"<cell {count}>", "exec"), self.ns)
        finally:
            self.running = None
            self.advisor.cell_ended()
        record = {
            "cell_id": cell_id,
            "execution_count": count,
            "start_time": start,
            "duration": time.perf_counter() - start,
            "ok": True,
            "devices": {},
        }
        self.records.append(record)
        self.advisor.after_cell(record, self.engine.tracker.kept_forwards())
        if insight:
            self.last = self.engine.after_cell(2000)
            self.advisor.after_insight(self.last)

    def close(self) -> None:
        self.engine.uninstall()

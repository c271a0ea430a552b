"""The runtime's side of Optimize: the ``get_advice`` request, the ``advice`` message after a
cell whose outcome changed, and ``batch_search`` progress. Never raises into the kernel."""

from __future__ import annotations

import threading
from typing import Any

from ..messages.optimize import Advice, BatchSearch
from .advisor import Advisor, empty_advice


class OptimizeLink:
    def __init__(self, runtime: Any) -> None:
        self._runtime = runtime
        self.advisor = Advisor(
            namespace=self._namespace,
            source_of=self._source_of,
            records=lambda: list(runtime.recorder.records),
            last_insight=lambda: runtime.insight.last,
            watch=lambda module: runtime.insight.watch(module),
            cell_key=self._cell_key,
            follow=self._follow,
        )
        self._end_hook_on: Any = None  # the shell our post_run_cell hook is registered on
        self.last: Advice | None = None  # the last advice computed (the session report's)

    def _namespace(self) -> dict[str, Any]:
        ns = getattr(self._runtime.shell, "user_ns", None)
        return ns if isinstance(ns, dict) else {}

    def _source_of(self, count: int | None) -> str:
        history = self._namespace().get("In")
        if isinstance(count, int) and isinstance(history, list) and 0 <= count < len(history):
            source = history[count]
            return source if isinstance(source, str) else ""
        return ""

    def _follow(self, model: Any, pre: Any, post: Any) -> Any:
        """The step watch's hooks ride on model insight's own hooks on the model."""
        engine = self._runtime.insight.engine()
        if engine is None:
            raise ValueError("model insight is unavailable")
        return engine.tracker.follow(model, pre, post)

    def _cell_key(self) -> float | None:
        """The running cell's start time (its record's ``start_time``); None between cells
        (silent executions)."""
        stack = getattr(self._runtime.recorder, "_stack", None)
        return stack[-1].start_time if stack else None

    def _cell_ended(self, *_: Any) -> None:
        """post_run_cell (registered once steps are watched): a step left open is dropped.
        After the bridge was unloaded it removes itself and the step watch's hooks."""
        try:
            steps = self.advisor.steps
            if self._runtime._installed_on is not self._end_hook_on:
                self._end_hook_on.events.unregister("post_run_cell", self._cell_ended)
                self._end_hook_on = None
                if steps is not None:
                    steps.stop()
            elif steps is not None:
                steps.cell_ended()
        except Exception as exc:
            self._runtime._internal(exc)

    def _hook_cell_end(self) -> None:
        shell = self._runtime.shell
        steps = self.advisor.steps
        if steps is None or not steps.watching or self._end_hook_on is shell or shell is None:
            return
        shell.events.register("post_run_cell", self._cell_ended)
        self._end_hook_on = shell

    def advise(self, model: str | None = None) -> Advice:
        """``model``: for this call only (a module named once is watched from then on, so
        later advice without one finds it as the measured model)."""
        try:
            # the last cells' queued insight first (it measured the training cell); from the
            # kernel's main thread only (vramscope.advise() in a cell, a request while idle):
            # a request served on a subshell during a cell must not reset its measurement
            main = threading.current_thread() is threading.main_thread()
            if main or not self._runtime.recorder.running:
                self._runtime.after_reply.flush()
        except Exception as exc:
            self._runtime._internal(exc)
        try:
            self.last = self.advisor.advise(model)
            self._hook_cell_end()
        except Exception as exc:  # advise() catches its own; a last guard
            self.last = empty_advice(f"advice failed: {type(exc).__name__}: {exc}")
        return self.last

    def report(self) -> Advice | None:
        """For ``session_report()["advice"]``: the last advice, its outcomes as of now (the
        runs measured since); None until advice was asked for."""
        if self.last is None:
            return None
        try:
            return {**self.last, "outcomes": self.advisor.log.outcomes()}
        except Exception:
            return self.last

    def after_cell(self, record: Any, kept_forwards: int = 0) -> None:
        """Per cell: keep it (with how many of its forwards' graphs it kept alive); re-send
        the advice when a marked cell ran."""
        self._guarded(lambda: self.advisor.after_cell(record, kept_forwards))

    def after_insight(self, insight: Any) -> None:
        """Per after-cell insight: re-send the advice when it completes an outcome."""
        self._guarded(lambda: self.advisor.after_insight(insight))

    def _guarded(self, step: Any) -> None:
        runtime = self._runtime
        try:
            if step() and runtime.bridge.has_streams:
                runtime.bridge.broadcast({"type": "advice", "advice": self.advise()})
        except Exception as exc:
            runtime._internal(exc, "optimize failed")

    def publish_search(self, search: BatchSearch) -> None:
        self._runtime.bridge.broadcast({"type": "batch_search", "search": search})

"""Run a notebook in a fresh kernel with nbclient, the vramscope bridge loaded, every cell
recorded under its notebook cell id (sent as the execute request's ``cellId`` metadata, which
nbclient leaves out)."""

from __future__ import annotations

import ast
import asyncio
import inspect
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, cast

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

BOOTSTRAP = '__import__("vramscope")._bootstrap()'
#: CPU peaks of a headless run: "exact" (op by op, devices/exact.py) unless asked otherwise
CPU_PEAK = "__import__('vramscope').settings(cpu_peak={!r})"
PROBE = "__import__('vramscope.cli.probe', fromlist=['probe'])"
#: jupyter_client's words for a kernel gone before it answered (KernelClient.wait_for_ready)
KERNEL_DIED = "Kernel died before replying"


@dataclass
class CellDone:
    """One finished code cell, for the progress display."""

    index: int  # position among the notebook's code cells (0-based)
    total: int  # code cells in the notebook
    cell_id: str | None
    record: dict[str, Any] | None  # the bridge's CellRecord, None when it has none


@dataclass
class Failure:
    """Why the run stopped early: the cell, and what happened."""

    cell_id: str | None
    index: int
    kind: str  # "error", "timeout", "dead-kernel"
    message: str
    code_head: str


@dataclass
class RunResult:
    report: dict[str, Any]
    failure: Failure | None


class ProfileClient(NotebookClient):
    """A NotebookClient that loads the bridge first and tags each execute with its cell id."""

    def __init__(
        self,
        nb: Any,
        on_cell: Callable[[CellDone], None] | None = None,
        cpu_peak: str = "exact",
        **kw: Any,
    ) -> None:
        super().__init__(nb, **kw)
        self._on_cell = on_cell
        self._cpu_peak = cpu_peak
        self._cell_id: Optional[str] = None
        self._started_again = False

    def _kc(self) -> Any:
        return self.kc

    async def async_start_new_kernel_client(self) -> Any:
        """The kernel's client, once the kernel answered. A kernel that died before its first
        reply is started once more, on new ports: jupyter_client picks free TCP ports that the
        kernel binds a moment later, and another process can take one meanwhile ("Address
        already in use": a CI machine running jobs side by side)."""
        try:
            return await super().async_start_new_kernel_client()
        except RuntimeError as exc:
            # nbclient has shut that kernel down and dropped its manager (its ports)
            if self._started_again or KERNEL_DIED not in str(exc):
                raise
        self._started_again = True
        self.log.warning("the kernel died before its first reply: starting it again")
        self.create_kernel_manager()
        await self.async_start_new_kernel()
        return await super().async_start_new_kernel_client()

    def _execute_with_cell_id(self, code: str, **kwargs: Any) -> str:
        """``kc.execute`` with the notebook cell id in the request metadata."""
        kc = self._kc()
        content = {
            "code": code,
            "silent": kwargs.get("silent", False),
            "store_history": kwargs.get("store_history", True),
            "user_expressions": kwargs.get("user_expressions") or {},
            "allow_stdin": kwargs.get("allow_stdin", False),
            "stop_on_error": kwargs.get("stop_on_error", True),
        }
        metadata = {"cellId": self._cell_id} if self._cell_id else {}
        msg = kc.session.msg("execute_request", content, metadata=metadata)
        kc.shell_channel.send(msg)
        msg_id: str = msg["header"]["msg_id"]
        return msg_id

    async def _expression(self, expr: str) -> Any:
        """The JSON value of a kernel-side expression returning a JSON string (silent).

        Retried when the kernel aborted it (requests queued behind an interrupted cell are).
        """
        for _ in range(5):
            msg_id = self._kc().execute(
                "", silent=True, store_history=False, user_expressions={"v": expr}
            )
            reply = await self.async_wait_for_reply(msg_id)
            content = (reply or {}).get("content", {})
            if content.get("status") != "aborted":
                break
            await asyncio.sleep(0.2)
        value = content.get("user_expressions", {}).get("v", {})
        if value.get("status") != "ok":
            raise RuntimeError(
                f"the kernel did not answer {expr!r}: {content.get('status')}, "
                f"{value.get('ename')}: {value.get('evalue')}"
            )
        return json.loads(ast.literal_eval(value["data"]["text/plain"]))

    async def _silent(self, code: str) -> None:
        reply = await self.async_wait_for_reply(
            self._kc().execute(code, silent=True, store_history=False)
        )
        content = (reply or {}).get("content", {})
        if content.get("status") != "ok":
            raise RuntimeError(
                f"the vramscope bridge did not load in the kernel: "
                f"{content.get('ename')}: {content.get('evalue')}"
            )

    async def profile(self, report_path: str) -> RunResult:
        self.reset_execution_trackers()
        failure: Failure | None = None
        code_cells = [(i, c) for i, c in enumerate(self.nb.cells) if c.cell_type == "code"]
        async with self.async_setup_kernel():
            info = await self.async_wait_for_reply(self._kc().kernel_info())
            if info is not None and "language_info" in info["content"]:
                self.nb.metadata["language_info"] = info["content"]["language_info"]
            await self._silent(BOOTSTRAP)
            await self._silent(CPU_PEAK.format(self._cpu_peak))
            kc = self._kc()
            kc.execute = self._make_execute(kc.execute)
            for n, (index, cell) in enumerate(code_cells):
                self._cell_id = cell.get("id")
                try:
                    await self.async_execute_cell(
                        cell, index, execution_count=self.code_cells_executed + 1
                    )
                except (CellExecutionError, CellTimeoutError, DeadKernelError) as exc:
                    failure = _failure(exc, cell, n)
                finally:
                    self._cell_id = None
                if failure is not None and failure.kind == "dead-kernel":
                    break
                if failure is not None and failure.kind == "timeout":
                    await _maybe_await(
                        cast(Any, self.km).interrupt_kernel()
                    )  # stop the cell, keep the kernel
                record = await self._expression(f"{PROBE}.last_record()")
                if self._on_cell is not None:
                    self._on_cell(CellDone(n, len(code_cells), cell.get("id"), record))
                if failure is not None:
                    break
            if failure is None or failure.kind != "dead-kernel":
                await self._expression(f"{PROBE}.write_report({report_path!r})")
        from ..exports import load_report

        report = load_report(report_path) if os.path.getsize(report_path) else {}
        return RunResult(report, failure)

    def _make_execute(self, original: Callable[..., str]) -> Callable[..., str]:
        def execute(code: str, **kwargs: Any) -> str:
            if kwargs.get("silent"):
                return original(code, **kwargs)
            return self._execute_with_cell_id(code, **kwargs)

        return execute


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def _failure(exc: BaseException, cell: Any, n: int) -> Failure:
    kind = (
        "timeout"
        if isinstance(exc, CellTimeoutError)
        else "dead-kernel"
        if isinstance(exc, DeadKernelError)
        else "error"
    )
    if isinstance(exc, CellExecutionError):
        message = f"{exc.ename}: {exc.evalue}"
    else:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    head = next((line.strip() for line in cell.source.splitlines() if line.strip()), "")
    return Failure(cell.get("id"), n, kind, message, head[:120])


def run_notebook(
    path: Path,
    *,
    timeout: float | None = None,
    kernel_name: str | None = None,
    on_cell: Callable[[CellDone], None] | None = None,
    cpu_peak: str = "exact",
) -> tuple[RunResult, Any]:
    """Execute the notebook at ``path`` in a fresh kernel (cwd: its folder); returns the run's
    report and failure, and the executed notebook. ``cpu_peak``: the kernel's setting of that
    name ("exact": every cell's CPU peak counted op by op)."""
    nb = nbformat.read(str(path), as_version=4)
    kw: dict[str, Any] = {
        "timeout": timeout,
        "resources": {"metadata": {"path": str(path.parent.resolve())}},
    }
    if kernel_name:
        kw["kernel_name"] = kernel_name
    client = ProfileClient(nb, on_cell=on_cell, cpu_peak=cpu_peak, **kw)
    with tempfile.TemporaryDirectory(prefix="vramscope-") as tmp:
        report_path = str(Path(tmp) / "report.json")
        Path(report_path).touch()
        result = asyncio.run(client.profile(report_path))
    return result, nb

"""What the bridge owns: the collector, the process table, the fork hook's target, and the
``processes`` message (docs/protocol.md, since 1.1). Nothing here raises into the kernel."""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable

from . import cow, reporter
from .collector import Collector
from .table import ProcessTable


class ProcessesService:
    def __init__(
        self,
        send: Callable[[dict[str, Any]], None],
        wants: Callable[[], bool],
        namespace: Callable[[], dict[str, Any] | None],
        execution_count: Callable[[], int | None],
    ) -> None:
        self._send = send
        self._wants = wants
        self._namespace = namespace
        self._execution_count = execution_count
        #: the execution count of the running cell (None between cells)
        self.cell: int | None = None
        self._count_offset = _ipython_count_offset()
        self._forks_seen = reporter.forks()
        self.table = ProcessTable()
        self.collector: Collector | None = None
        self._findings: list[dict[str, Any]] = []
        self._findings_key: tuple[Any, ...] = ()
        #: each process's info as the last incremental message left it, by key
        self._sent: dict[str, dict[str, Any]] = {}
        self.report_hz = reporter._env_hz()
        self.error: str | None = None

    # --- lifecycle ----------------------------------------------------------------------

    def start(self) -> bool:
        if self.collector is not None and self.collector.running:
            return True
        collector = Collector(self.table, self.publish)
        try:
            address = collector.start()
        except OSError as exc:
            self.error = f"the process collector could not start: {exc}"
            collector.stop()
            return False
        self.collector = collector
        reporter.configure(
            reporter.Target(address, collector.token.encode(), self.report_hz),
            lambda: self.cell,
        )
        # the token is not put in the kernel's environment (every subprocess would inherit
        # it): processes that should report are given it explicitly (child_env, attach_args)
        return True

    def stop(self) -> None:
        reporter.configure(None)
        collector, self.collector = self.collector, None
        if collector is not None:
            collector.stop()

    def credentials(self) -> dict[str, str]:
        """The local collector's address and token, as the environment variables a process
        started from the kernel needs for ``vramscope.attach()``."""
        collector = self.collector
        if collector is None or collector.address is None:
            raise RuntimeError(self.error or "the vramscope bridge is not running in this kernel")
        return {reporter.ENV_ADDRESS: collector.address, reporter.ENV_TOKEN: collector.token}

    def listen(self, host: str = "127.0.0.1", port: int = 0) -> dict[str, str]:
        """Accept remote ranks on UDP ``host:port``; the lines a remote rank needs."""
        if self.collector is None:
            raise RuntimeError(self.error or "the vramscope bridge is not running in this kernel")
        address = self.collector.listen(host, port)
        self.publish(force=True)
        return {
            reporter.ENV_ADDRESS: address,
            reporter.ENV_TOKEN: self.collector.token,
        }

    # --- cells --------------------------------------------------------------------------

    def open_cell(self) -> None:
        """A cell starts: forked children from now on belong to it."""
        count = self._count()
        self.cell = None if count is None else count - self._count_offset
        self.table.open_cell()

    def close_cell(self, execution_count: int | None = None) -> dict[str, dict[str, Any]]:
        """The cell ended: the peaks of the processes that reported during it.

        IPython 9 counts the cell before ``pre_run_cell`` (older versions after it): the
        offset between the shell's counter there and the record's count is learned here.
        """
        if self.cell is not None and execution_count is not None:
            self._count_offset += self.cell - execution_count
        self.cell = None
        # The collector thread takes reports as they come; draining here makes sure a child
        # that ended in this cell has its final report in the record. Only where a child
        # could have reported: each receive releases the GIL, which in a Run All of quick
        # cells cost the main thread ~0.2 ms of waiting for the IOPub thread to give it back.
        forked = reporter.forks()
        if self.collector is not None and (self.table.procs or forked != self._forks_seen):
            self._forks_seen = forked
            with contextlib.suppress(Exception):
                self.collector.drain()
        return self.table.close_cell()

    # --- messages -----------------------------------------------------------------------

    def findings(self) -> list[dict[str, Any]]:
        """The current findings (copy-on-access), as data."""
        with self.table.lock:
            procs = list(self.table.procs.values())
            key = tuple((p.key, p.seq) for p in procs if p.kind == "worker")
        if key != self._findings_key:
            self._findings_key = key
            self._findings = cow.detect(procs, self._safe_namespace())
        return [dict(f) for f in self._findings]

    def message(self, history: bool) -> dict[str, Any]:
        """All processes with every kept lane point (``history``: what ``get_processes``
        answers), else an incremental message: the points not yet published, and only the
        processes whose info changed since the last one (an ended worker is not sent again
        every half second: the table keeps up to 512)."""
        infos, samples = self.table.snapshot(history)
        collector = self.collector
        message: dict[str, Any] = {
            "type": "processes",
            "time": time.time(),
            "full": history,
            "processes": infos,
            "samples": samples,
            "findings": self.findings(),
            "stats": self.table.stats(),
            "remote": collector.udp_address if collector is not None else None,
        }
        if not history:
            current = {info["key"]: info for info in infos}
            sent = self._sent
            message["processes"] = [i for k, i in current.items() if sent.get(k) != i]
            message["forgotten"] = [key for key in sent if key not in current]
            message["changed_only"] = True
            self._sent = current
        return message

    def publish(self, force: bool = False) -> None:
        """The collector's periodic call: one incremental message when something changed."""
        try:
            if not self._wants():
                return
            if not (force or self.table.changed):
                return
            self._send(self.message(history=False))
        except Exception:
            pass

    def _count(self) -> int | None:
        try:
            count = self._execution_count()
        except Exception:
            return None
        return count if isinstance(count, int) else None

    def _safe_namespace(self) -> dict[str, Any] | None:
        try:
            return self._namespace()
        except Exception:
            return None


def _ipython_count_offset() -> int:
    """1 where IPython counts a cell before its ``pre_run_cell`` (IPython 9), else 0."""
    try:
        import IPython

        return 1 if IPython.version_info[0] >= 9 else 0
    except Exception:
        return 0

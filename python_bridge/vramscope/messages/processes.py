"""Protocol shape of the ``processes`` message (since 1.1; docs/protocol.md, "Processes"):
child processes and ranks. Mirrors ``src/messages/processes.ts``; no torch here.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict


class _ProcessesMessageRequired(TypedDict):
    type: Literal["processes"]
    time: float
    full: bool
    processes: list[dict[str, Any]]
    samples: dict[str, list[list[float | None]]]
    findings: list[dict[str, Any]]
    stats: dict[str, int]
    remote: str | None


class ProcessesMessage(_ProcessesMessageRequired, total=False):
    """Child processes and ranks (since 1.1; docs/protocol.md "Processes")."""

    #: since 1.1: ``processes`` holds only those whose info changed since the last
    #: incremental message (merge them by key), and ``forgotten`` the keys the kernel let go
    changed_only: bool
    forgotten: list[str]

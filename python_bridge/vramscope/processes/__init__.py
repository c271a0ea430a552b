"""Child processes and ranks, live: DataLoader workers and fork-started ranks report by
themselves; other processes call ``vramscope.attach()``; remote ranks opt in with ``listen``.

Kernel-side API (inside a kernel where the bridge runs):

- ``findings()``: the current copy-on-access findings as dicts (for the optimize advisor);
- ``child_env(env=None)``: ``env`` (default: a copy of the kernel's environment) with the
  collector's address and token, for a process started from the notebook that should report
  (``subprocess.Popen(cmd, env=vramscope.processes.child_env())``; it calls
  ``vramscope.attach()``). The kernel does not export the token to every subprocess;
- ``attach_args()``: the same two as ``vramscope.attach`` arguments, for a spawned child
  (``mp.spawn(fn, args=(vramscope.processes.attach_args(),))``, then
  ``vramscope.attach(**args)`` in it);
- ``listen(host="127.0.0.1", port=0)``: also accept remote ranks over UDP; returns the two
  environment variables a remote rank needs (then it calls ``vramscope.attach()``). See
  docs/processes.md for what listening exposes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .reporter import ENV_ADDRESS, ENV_TOKEN, attach

__all__ = [
    "ENV_ADDRESS",
    "ENV_TOKEN",
    "attach",
    "attach_args",
    "child_env",
    "findings",
    "listen",
]


def findings() -> list[dict[str, Any]]:
    service = _service()
    return service.findings() if service is not None else []


def child_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: a copy of ``os.environ``) plus ``VRAMSCOPE_COLLECTOR`` and
    ``VRAMSCOPE_TOKEN``, for one process that should report; RuntimeError without a bridge."""
    base = dict(os.environ if env is None else env)
    base.update(_running().credentials())
    return base


def attach_args() -> dict[str, str]:
    """``{"address": ..., "token": ...}``: ``vramscope.attach(**attach_args())`` in a child."""
    lines = _running().credentials()
    return {"address": lines[ENV_ADDRESS], "token": lines[ENV_TOKEN]}


def listen(host: str = "127.0.0.1", port: int = 0) -> dict[str, str]:
    return dict(_running().listen(host, port))


def _running() -> Any:
    service = _service()
    if service is None:
        raise RuntimeError("the vramscope bridge is not running in this kernel")
    return service


def _service() -> Any:
    from ..runtime import current_runtime

    runtime = current_runtime()
    return getattr(runtime, "processes", None) if runtime is not None else None

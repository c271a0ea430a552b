"""Child processes and ranks, live: DataLoader workers and fork-started ranks report by
themselves; other processes call ``vramscope.attach()``; remote ranks opt in with ``listen``.

Kernel-side API (inside a kernel where the bridge runs):

- ``findings()``: the current copy-on-access findings as dicts (for the optimize advisor);
- ``listen(host="127.0.0.1", port=0)``: also accept remote ranks over UDP; returns the two
  environment variables a remote rank needs (then it calls ``vramscope.attach()``).
"""

from __future__ import annotations

from typing import Any

from .reporter import ENV_ADDRESS, ENV_TOKEN, attach

__all__ = ["ENV_ADDRESS", "ENV_TOKEN", "attach", "findings", "listen"]


def findings() -> list[dict[str, Any]]:
    service = _service()
    return service.findings() if service is not None else []


def listen(host: str = "127.0.0.1", port: int = 0) -> dict[str, str]:
    service = _service()
    if service is None:
        raise RuntimeError("the vramscope bridge is not running in this kernel")
    return service.listen(host, port)


def _service() -> Any:
    from ..runtime import current_runtime

    runtime = current_runtime()
    return getattr(runtime, "processes", None) if runtime is not None else None

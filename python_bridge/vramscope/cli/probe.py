"""Kernel side of ``vramscope profile``: what the CLI asks the kernel between cells.

Called through silent executes (``user_expressions``), which run no cell hooks and are not
recorded; each returns a JSON string.
"""

from __future__ import annotations

import json

from ..runtime import get_runtime


def last_record() -> str:
    """The newest cell record as JSON (``null`` before the first cell)."""
    records = get_runtime().recorder.records
    return json.dumps(records[-1] if records else None)


def write_report(path: str) -> str:
    """Write ``session_report()`` to ``path`` as JSON; returns ``path``."""
    from ..exports import write_report as write

    runtime = get_runtime()
    runtime.after_reply.flush()  # the last cell's insight, if its reply left no time for it
    write(runtime.report(), path, "json", overwrite=True)  # the runner's own temporary file
    return json.dumps(path)

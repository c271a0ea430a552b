"""The CLI's usage error and the report loading that raises it (shared by its commands)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


class UsageError(Exception):
    """Bad command-line input: the CLI says so and exits with ``EXIT_USAGE``."""


def load(path: Path, what: str) -> dict[str, Any]:
    """A JSON report, or a usage error naming ``what`` it was for."""
    from ..exports import load_report

    try:
        return load_report(path)
    except ValueError as err:
        raise UsageError(f"{what}: {err}") from None

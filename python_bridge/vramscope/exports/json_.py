"""The JSON export: the ``session_report()`` dict as it is (docs/report-schema.md), and its
loader for ``vramscope compare`` and the CLI's baseline."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

SCHEMA_PREFIX = "vramscope.report/"


def render_json(report: Mapping[str, Any]) -> str:
    """Compact JSON (a 1 h session at 10 Hz is ~36,000 samples); never NaN or Infinity."""
    return json.dumps(report, separators=(",", ":"), ensure_ascii=False, allow_nan=False) + "\n"


def parse_report(text: str, source: str = "report") -> dict[str, Any]:
    """A report dict from JSON text; ValueError naming ``source`` when it is not one."""
    try:
        data = json.loads(text)
    except ValueError as err:
        raise ValueError(f"{source}: not JSON ({err})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{source}: a vramscope report is a JSON object")
    schema = data.get("schema")
    if not isinstance(schema, str) or not schema.startswith(SCHEMA_PREFIX):
        raise ValueError(
            f"{source}: not a vramscope report (schema {schema!r}, expected {SCHEMA_PREFIX}1)"
        )
    if schema != SCHEMA_PREFIX + "1":
        raise ValueError(f"{source}: unsupported report schema {schema!r} (this reads /1)")
    if not isinstance(data.get("cells"), list):
        raise ValueError(f"{source}: report has no 'cells' list")
    return data


def load_report(path: str | Path) -> dict[str, Any]:
    """Read a JSON report written by ``vramscope.exports`` or ``vramscope profile``."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as err:
        raise ValueError(f"{p}: {err.strerror or err}") from None
    return parse_report(text, str(p))

"""Make kernel messages sendable whatever strings the user's objects carry.

Python strings may hold lone surrogates (``chr(0xD800)``, a module added under such a name,
a namespace key built by code); Jupyter's message serializer encodes UTF-8 strictly and
raises on them, so one such name in an insight, a record or an export would make that
message vanish. ``wire_safe`` returns a copy with every surrogate code point that is not
half of a valid pair replaced by U+FFFD (valid pairs become the character they encode).
"""

from __future__ import annotations

import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")


def safe_text(text: str) -> str:
    """``text`` encodable as UTF-8: lone surrogates become U+FFFD."""
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def wire_safe(value: Any) -> Any:
    """A copy of a JSON-like value (dicts, lists, tuples, strings) with every string safe."""
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, dict):
        return {wire_safe(k): wire_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [wire_safe(v) for v in value]
    return value

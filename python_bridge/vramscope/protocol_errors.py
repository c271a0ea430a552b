"""The protocol's error type and the helpers its request checks quote values with.

The bottom of the protocol: ``protocol_params`` (the 1.1 methods' params) and ``protocol``
(messages, ``validate_request``) both build on it, and it imports neither.
"""

from __future__ import annotations

import math
from typing import Literal

ErrorCode = Literal[
    "protocol_mismatch",
    "invalid_message",
    "unknown_type",
    "unknown_method",
    "invalid_params",
    "internal",
]
MAX_NAME_CHARS = 256  # longest model name a get_insight request may carry
MAX_ECHO_CHARS = 80  # longest user-sent value quoted back in an error message
MAX_ID_CHARS = 256  # longest request id; a longer one is invalid, echoed cut to this


class ProtocolError(Exception):
    """A message the kernel cannot accept; becomes an ``error`` message, never a raise."""

    def __init__(self, code: ErrorCode, message: str, in_reply_to: str | None = None) -> None:
        super().__init__(message)
        self.code: ErrorCode = code
        self.message = message
        self.in_reply_to = in_reply_to


def is_finite_number(value: object) -> bool:
    """An int or float that is finite as a float (an int past 1.8e308 is not: no raise)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def reply_id(raw: object) -> str | None:
    """What an error's ``in_reply_to`` echoes of a request's ``id``, whatever was sent: a
    string cut to ``MAX_ID_CHARS``; a number as its text (an int of more than 1,024 bits,
    which even ``str()`` may refuse, as ``int:<bits> bits``); anything else null."""
    if isinstance(raw, str):
        return raw[:MAX_ID_CHARS] or None
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return str(raw) if raw.bit_length() <= 1024 else f"int:{raw.bit_length()} bits"
    if isinstance(raw, float):
        return repr(raw)
    return None


def echo(value: object) -> str:
    """``repr(value)`` cut to ``MAX_ECHO_CHARS`` (error messages never echo huge input)."""
    try:
        text = repr(value)
    except Exception:
        return f"<{type(value).__name__}>"
    if len(text) <= MAX_ECHO_CHARS:
        return text
    return f"{text[: MAX_ECHO_CHARS - 1]}… ({len(text)} chars)"


def kind_of(value: object) -> str:
    """The JSON-ish name of ``value``'s type for an error message (``null`` for None)."""
    return "null" if value is None else type(value).__name__

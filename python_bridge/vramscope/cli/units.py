"""Command-line values: sizes (``8GiB``, ``2GB``, ``512MiB``, ``1e9``) and tolerances (``10%``)."""

from __future__ import annotations

import argparse
import re

_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")
_FACTORS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "m": 1000**2,
    "mb": 1000**2,
    "g": 1000**3,
    "gb": 1000**3,
    "t": 1000**4,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}


def parse_size(text: str) -> int:
    """Bytes from ``8GiB`` (powers of 1024), ``8GB`` / ``8G`` (powers of 1000) or ``1024``."""
    match = _SIZE.match(text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _FACTORS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a size: use e.g. 8GiB, 512MiB, 2GB or a byte count"
        )
    value = float(match.group(1)) * _FACTORS[unit]
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a size must be positive")
    return int(value)


def parse_tolerance(text: str) -> float:
    """A fraction from ``10%`` or ``0.1`` (10% either way); must be >= 0."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a tolerance: use e.g. 10%") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a tolerance must be >= 0")
    return value

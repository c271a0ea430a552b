"""``session_report()``: the whole session as one JSON-serialisable dict (docs/report-schema.md).

The runtime gathers the parts and hands them in; this module does not know the runtime.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from ._version import __version__
from .messages.optimize import Advice
from .protocol import PROTOCOL_VERSION, CellRecord, DeviceInfo, KernelInfo, Sample

REPORT_SCHEMA = "vramscope.report/1"
REPORT_KEYS = (
    "schema",
    "bridge_version",
    "protocol_version",
    "session_id",
    "created",
    "kernel",
    "devices",
    "settings",
    "cells",
    "samples",
    "model",
    "models",
    "layers",
    "breakdown",
    "holders",
    "client_errors",
    "advice",  # since 1.1 (Optimize)
)


def build_report(
    *,
    session_id: str,
    kernel: KernelInfo,
    devices: list[DeviceInfo],
    settings: Mapping[str, Any],
    cells: list[CellRecord],
    samples: list[Sample],
    insight: Mapping[str, Any],
    client_errors: Iterable[Mapping[str, Any]],
    advice: Advice | None,
) -> dict[str, Any]:
    """The report from the session's parts; ``insight`` is model insight as of now."""
    return {
        "schema": REPORT_SCHEMA,
        "bridge_version": __version__,
        "protocol_version": PROTOCOL_VERSION,
        "session_id": session_id,
        "created": time.time(),
        "kernel": kernel,
        "devices": devices,
        "settings": dict(settings),
        "cells": cells,
        "samples": samples,
        "model": insight.get("model"),
        "models": list(insight.get("models") or []),
        "layers": list(insight.get("layers") or []),
        "breakdown": dict(insight.get("breakdown") or {}),
        "holders": list(insight.get("holders") or []),
        "client_errors": list(client_errors),
        "advice": advice,
    }

"""``session_report()``: the whole session as one JSON-serialisable dict (docs/report-schema.md)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ._version import __version__
from .protocol import PROTOCOL_VERSION

if TYPE_CHECKING:
    from .runtime import Runtime

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


def _current_insight(runtime: Runtime) -> dict[str, Any]:
    """Model insight as of now (not as of the last cell end), or the last one on failure."""
    try:
        if runtime.settings.get("insight", True) and runtime.insight.engine() is not None:
            return runtime.insight.snapshot(None)
    except Exception:
        pass
    return runtime.insight.last or {}


def build_report(runtime: Runtime) -> dict[str, Any]:
    insight = _current_insight(runtime)
    return {
        "schema": REPORT_SCHEMA,
        "bridge_version": __version__,
        "protocol_version": PROTOCOL_VERSION,
        "session_id": runtime.session_id,
        "created": time.time(),
        "kernel": runtime.kernel_info(),
        "devices": runtime.device_infos(),
        "settings": dict(runtime.settings),
        "cells": runtime.recorder.history(),
        "samples": runtime.ring.snapshot(),
        "model": insight.get("model"),
        "models": list(insight.get("models") or []),
        "layers": list(insight.get("layers") or []),
        "breakdown": dict(insight.get("breakdown") or {}),
        "holders": list(insight.get("holders") or []),
        "client_errors": list(runtime.client_errors),
        "advice": runtime.optimize.report(),
    }

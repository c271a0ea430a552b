"""``session_report()``: the whole session as one JSON-serialisable dict (docs/report-schema.md).

The runtime gathers the parts and hands them in; this module does not know the runtime.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from ._version import __version__
from .messages.optimize import Advice
from .messages.records import CellRecord, DeviceInfo, KernelInfo, Sample
from .protocol import PROTOCOL_VERSION

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
    "layers_measured",  # since 1.2: the measured forward ``layers`` come from
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
    measured: Mapping[str, Any] | None = None,
    client_errors: Iterable[Mapping[str, Any]],
    advice: Advice | None,
) -> dict[str, Any]:
    """The report from the session's parts; ``insight`` is model insight as of now,
    ``measured`` the newest after-cell insight whose layers saved activations (see
    :func:`measured_layers`)."""
    layers, layers_measured = measured_layers(insight, measured)
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
        "layers": layers,
        "breakdown": dict(insight.get("breakdown") or {}),
        "holders": list(insight.get("holders") or []),
        "client_errors": list(client_errors),
        "advice": advice,
        "layers_measured": layers_measured,
    }


def _saved_any(layers: list[Mapping[str, Any]]) -> bool:
    return any(row.get("peak_saved_bytes") for row in layers)


def measured_layers(
    now: Mapping[str, Any], measured: Mapping[str, Any] | None
) -> tuple[list[Any], Any]:
    """The per-layer rows of the last measured step, and which forward that was.

    The per-layer peaks are reset at every cell's end, so an insight taken later (a report
    made after the training cell) reads 0 for every peak. The rows are ``measured``'s (the
    after-cell insight of the newest cell whose forwards saved activations: what the panel
    showed then) for the same model, unless ``now`` measured a newer forward that saved
    activations (a report made in the training cell itself).
    """
    rows = list(now.get("layers") or [])
    forward = now.get("activations_measured")
    if measured is None or (_saved_any(rows) and forward != measured.get("activations_measured")):
        return rows, forward if _saved_any(rows) else None
    if measured.get("model") != now.get("model"):
        return rows, forward if _saved_any(rows) else None
    return list(measured.get("layers") or []), measured.get("activations_measured")

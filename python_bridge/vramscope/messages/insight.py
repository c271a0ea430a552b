"""Protocol shapes of model insight (docs/protocol.md, "Insight"): the models found, the
measured forward, the insight payload, and the helpers that build and check them.

No torch here; ``insight/`` fills these, ``protocol.py`` wraps them in the ``insight`` message.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict


class ModelInfo(TypedDict):
    """One ``nn.Module`` found in the user namespace (the panel's model picker)."""

    name: str
    type: str
    param_bytes: int


class ActivationsMeasured(TypedDict):
    """Since 1.1: which forward the per-layer saved figures were measured on."""

    cell_id: str | None
    execution_count: int | None
    forward_index: int  # 1-based index of the root forward within its cell
    reason: Literal["first", "shapes", "dtype", "mode", "graph_kept"]


class _InsightRequired(TypedDict):
    model: str | None
    models: list[ModelInfo]
    layers: list[dict[str, Any]]
    breakdown: dict[str, dict[str, Any]]  # numbers; since 1.1 also runtime_note
    holders: list[dict[str, Any]]
    scan_ms: float
    skipped: str | None


class Insight(_InsightRequired, total=False):
    activations_measured: ActivationsMeasured  # since 1.1
    partial: bool  # since 1.1: the holders list is incomplete; the scan continues
    #: since 1.1: ``layers`` is empty: they are those of the previous ``insight`` message
    layers_unchanged: bool


INSIGHT_KEYS = ("model", "models", "layers", "breakdown", "holders", "scan_ms", "skipped")
MODEL_INFO_KEYS = ("name", "type", "param_bytes")


def empty_insight(reason: str | None = None) -> Insight:
    """An Insight with nothing in it; ``reason`` goes to ``skipped``."""
    return {
        "model": None,
        "models": [],
        "layers": [],
        "breakdown": {},
        "holders": [],
        "scan_ms": 0.0,
        "skipped": reason,
    }


def model_info(name: str, type_name: str, param_bytes: int) -> ModelInfo:
    return {"name": name, "type": type_name, "param_bytes": int(param_bytes)}


def is_model_info(value: object) -> bool:
    """True when ``value`` is a well-formed ``ModelInfo`` (extra keys allowed)."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("name"), str)
        and isinstance(value.get("type"), str)
        and isinstance(value.get("param_bytes"), int)
        and not isinstance(value.get("param_bytes"), bool)
        and value["param_bytes"] >= 0
    )

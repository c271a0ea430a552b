"""Bridge settings: defaults and validated partial updates (protocol ``Settings``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .messages.records import Settings
from .protocol import ProtocolError, echo, is_finite_number

MIN_SAMPLE_HZ = 0.5
MAX_SAMPLE_HZ = 50.0
#: Samples the kernel's ring buffer may keep (each sample ~0.3-0.7 KB: at most ~0.7 GB).
MAX_HISTORY_LIMIT = 1_000_000
#: The longest slice of the holders scan a setting may ask for (the panel's setting: 1..60,000).
MAX_INSIGHT_BUDGET_MS = 60_000.0


def default_settings() -> Settings:
    return {
        "sample_hz": 10.0,
        "cuda_peak_policy": "reset",
        "insight": True,
        "insight_budget_ms": 20.0,
        "history_limit": 36_000,
        "cpu_peak": "sampled",
    }


def apply_settings(current: Settings, patch: Mapping[str, Any]) -> Settings:
    """Return ``current`` updated with ``patch``; unknown keys are ignored.

    Raises ProtocolError("invalid_params") naming the first bad value; nothing is applied then.
    """
    new: Settings = dict(current)  # type: ignore[assignment]
    if "sample_hz" in patch:
        hz = patch["sample_hz"]
        if not is_finite_number(hz) or not (hz == 0 or MIN_SAMPLE_HZ <= hz <= MAX_SAMPLE_HZ):
            raise _bad("sample_hz", hz, f"0 (off) or {MIN_SAMPLE_HZ}..{MAX_SAMPLE_HZ}")
        new["sample_hz"] = float(hz)
    if "cuda_peak_policy" in patch:
        policy = patch["cuda_peak_policy"]
        if policy not in ("reset", "preserve"):
            raise _bad("cuda_peak_policy", policy, "'reset' or 'preserve'")
        new["cuda_peak_policy"] = policy
    if "cpu_peak" in patch:
        mode = patch["cpu_peak"]
        if mode not in ("sampled", "exact"):
            raise _bad("cpu_peak", mode, "'sampled' or 'exact'")
        new["cpu_peak"] = mode
    if "insight" in patch:
        flag = patch["insight"]
        if not isinstance(flag, bool):
            raise _bad("insight", flag, "a boolean")
        new["insight"] = flag
    if "insight_budget_ms" in patch:
        budget = patch["insight_budget_ms"]
        if not is_finite_number(budget) or not 0 <= budget <= MAX_INSIGHT_BUDGET_MS:
            raise _bad("insight_budget_ms", budget, f"a number 0..{MAX_INSIGHT_BUDGET_MS:,.0f}")
        new["insight_budget_ms"] = float(budget)
    if "history_limit" in patch:
        limit = patch["history_limit"]
        if (
            not isinstance(limit, int)
            or isinstance(limit, bool)
            or not 1 <= limit <= MAX_HISTORY_LIMIT
        ):
            raise _bad("history_limit", limit, f"an integer 1..{MAX_HISTORY_LIMIT}")
        new["history_limit"] = limit
    return new


def _bad(key: str, value: object, expected: str) -> ProtocolError:
    return ProtocolError("invalid_params", f"setting {key!r} must be {expected}, got {echo(value)}")

"""What a model's training setup measures as: its parameters' dtype, the precision that
implies (with the dtype its activations were measured at), and the optimizer over its
parameters found in the namespace, with its kind and measured state bytes per parameter.

The estimator uses these as the defaults for a model (a choice made by the caller wins).
Only names and numbers are kept; nothing here raises into the caller (a failure reads as
"not measured").
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..dtype_names import dtype_name


@dataclass(frozen=True)
class MeasuredSetup:
    #: the dtype most of the parameters are stored in ("float32"), None without any
    param_dtype: str | None = None
    #: the precision this measures as ("32-true", "bf16-mixed", "bf16-true"...), or None
    precision: str | None = None
    #: the optimizer's kind as an estimator name ("adamw", "sgd-momentum"...), None: unknown
    optimizer: str | None = None
    #: the optimizer's namespace name and class
    optimizer_variable: str | None = None
    optimizer_class: str | None = None
    #: bytes of its state per parameter of the model; None before its first step
    optimizer_state_bytes_per_param: float | None = None


def implied_precision(param_dtype: str | None, activation_dtype: str | None) -> str | None:
    """fp32 parameters: "32-true", or mixed when the activations were half precision."""
    if param_dtype == "float32":
        return {"bfloat16": "bf16-mixed", "float16": "16-mixed"}.get(
            activation_dtype or "", "32-true"
        )
    return {"bfloat16": "bf16-true", "float16": "16-true"}.get(param_dtype or "")


def optimizer_kind(opt: Any) -> str | None:
    """The estimator's name for a torch / bitsandbytes / transformers optimizer, or None."""
    name = type(opt).__name__.lower().replace("_", "")
    if "8bit" in name:
        return "adamw-8bit" if "adamw" in name else "adam-8bit" if "adam" in name else None
    if name in ("adamw", "adam", "adafactor"):
        return name
    if name == "sgd":
        groups = getattr(opt, "param_groups", None) or [{}]
        return "sgd-momentum" if float(groups[0].get("momentum") or 0) > 0 else "sgd"
    return None


def measure_setup(
    module: Any, namespace: Mapping[str, Any], activation_dtype: str | None
) -> MeasuredSetup:
    try:
        return _measure(module, namespace, activation_dtype)
    except Exception:
        return MeasuredSetup()


def _measure(
    module: Any, namespace: Mapping[str, Any], activation_dtype: str | None
) -> MeasuredSetup:
    params = list(module.parameters())
    counts: Counter[str] = Counter()
    for p in params:
        if p.is_floating_point():
            counts[dtype_name(p.dtype)] += int(p.numel())
    param_dtype = counts.most_common(1)[0][0] if counts else None
    precision = implied_precision(param_dtype, activation_dtype)
    found = _find_optimizer(params, namespace)
    if found is None:
        return MeasuredSetup(param_dtype, precision)
    name, opt, mine = found
    return MeasuredSetup(
        param_dtype,
        precision,
        optimizer_kind(opt),
        name,
        type(opt).__name__,
        _state_per_param(opt, mine),
    )


def _find_optimizer(
    params: list[Any], namespace: Mapping[str, Any]
) -> tuple[str, Any, list[Any]] | None:
    """The namespace optimizer holding the most of these parameters (name, it, those held)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    ids = {id(p) for p in params}
    best: tuple[str, Any, list[Any]] | None = None
    for name, value in list(namespace.items()):
        if name.startswith("_") or not isinstance(value, torch.optim.Optimizer):
            continue
        mine = [p for group in value.param_groups for p in group.get("params", []) if id(p) in ids]
        if mine and (best is None or len(mine) > len(best[2])):
            best = (name, value, mine)
    return best


def _state_per_param(opt: Any, params: list[Any]) -> float | None:
    torch = sys.modules["torch"]
    seen: set[tuple[int, int]] = set()
    nbytes = 0
    count = 0
    for p in params:
        count += int(p.numel())
        for value in (opt.state.get(p) or {}).values():
            if isinstance(value, torch.Tensor):
                key = (value.untyped_storage().data_ptr(), value.storage_offset())
                if key not in seen:
                    seen.add(key)
                    nbytes += int(value.numel()) * value.element_size()
    return nbytes / count if nbytes and count else None

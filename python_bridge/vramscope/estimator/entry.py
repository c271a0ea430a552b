"""The estimator's entry points: ``vramscope.estimate`` and the ``estimate`` request.

Both find the model's measured activations (``Runtime.activation_memo``, filled after every
cell from model insight) under the namespace name(s) the model is bound to.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from ..protocol import ProtocolError
from .api import Estimate, compute, module_params, parse_param_count
from .measured import ActivationMemo, Measurement
from .scaling import measured_dtype
from .setup import measure_setup

#: options whose None means "the default" (the measured one for a model)
_NAMED = ("precision", "optimizer")
_OPTIONS = ("optimizer", "precision", "batch_size", "seq_len", "zero_stage", "n_gpus", "offload")


def _is_module(obj: object) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.nn.Module)


def _names_of(obj: object, namespace: Mapping[str, Any]) -> list[str]:
    return [name for name, value in list(namespace.items()) if value is obj]


def _measurement(
    memo: ActivationMemo | None, names: list[str]
) -> tuple[Measurement | None, str | None]:
    for name in names:
        found = memo.get(name) if memo is not None else None
        if found is not None:
            return found, name
    return None, names[0] if names else None


def estimate_for(
    model_or_param_count: object,
    namespace: Mapping[str, Any],
    memo: ActivationMemo | None,
    defaults_from_setup: bool = False,
    **options: Any,
) -> Estimate:
    """An Estimate for a module (found in ``namespace`` for its measurement) or a count.

    ``defaults_from_setup``: a precision / optimizer left out (or None) is the one the
    model's setup measures as (``Estimate.measured``), else the estimator's default.
    """
    if _is_module(model_or_param_count):
        count, shapes = module_params(model_or_param_count)
        if count == 0:
            raise ValueError("the model has no parameters")
        measured, name = _measurement(memo, _names_of(model_or_param_count, namespace))
        act_dtype = measured_dtype(measured.by_dtype) if measured is not None else None
        setup = measure_setup(model_or_param_count, namespace, act_dtype)
        if defaults_from_setup:
            # what was measured is the default; a choice the caller made wins
            if options.get("precision") is None and setup.precision is not None:
                options["precision"] = setup.precision
            if options.get("optimizer") is None and setup.optimizer is not None:
                options["optimizer"] = setup.optimizer
        options = {k: v for k, v in options.items() if v is not None or k not in _NAMED}
        return compute(
            count, shapes=shapes, measurement=measured, model=name, setup=setup, **options
        )
    options = {k: v for k, v in options.items() if v is not None or k not in _NAMED}
    return compute(parse_param_count(model_or_param_count), **options)


def handle_request(
    params: Mapping[str, Any], namespace: Mapping[str, Any], memo: ActivationMemo | None
) -> dict[str, Any]:
    """The ``estimate`` request: ``{model: name}`` or ``{params: count}`` plus options."""
    options = {key: params[key] for key in _OPTIONS if key in params}
    model = params.get("model")
    target: object = params.get("params")
    if isinstance(model, str):
        target = namespace.get(model)
        if not _is_module(target):
            raise ProtocolError(
                "invalid_params", f"{model[:80]!r} is not a torch.nn.Module in the namespace"
            )
    try:
        result = estimate_for(target, namespace, memo, defaults_from_setup=True, **options)
    except ValueError as err:
        raise ProtocolError("invalid_params", str(err)) from None
    return {"estimate": result.to_dict()}

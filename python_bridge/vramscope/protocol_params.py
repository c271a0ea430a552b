"""Request params of the methods added in protocol 1.1 (``get_advice``, ``estimate``,
``export_report``): checked by :func:`vramscope.protocol.validate_request`
(which imports this module; this one builds on ``protocol_errors`` only)."""

from __future__ import annotations

from typing import Any

from .protocol_errors import MAX_NAME_CHARS, ProtocolError, echo, is_finite_number, kind_of


def check_feature_params(method: str, params: dict[str, Any], request_id: str) -> None:
    """Raise ProtocolError('invalid_params') when a 1.1 method's params are malformed."""
    if method == "get_advice":
        _check_model_param(params.get("model"), request_id)
    elif method == "estimate":
        _check_estimate_params(params, request_id)
    elif method == "export_report":
        _check_export_params(params, request_id)


#: ``export_report`` formats (since 1.1) and the longest notebook path it takes.
EXPORT_FORMATS = ("json", "csv", "markdown", "html")
MAX_PATH_CHARS = 4096


def _check_export_params(params: dict[str, Any], request_id: str) -> None:
    """``export_report`` (since 1.1): ``format`` one of EXPORT_FORMATS, ``notebook?`` a path."""
    fmt = params.get("format")
    if fmt not in EXPORT_FORMATS:
        raise ProtocolError(
            "invalid_params",
            f"'format' must be one of {', '.join(EXPORT_FORMATS)}, got {echo(fmt)}",
            request_id,
        )
    notebook = params.get("notebook")
    if notebook is not None and (
        not isinstance(notebook, str) or not 0 < len(notebook) <= MAX_PATH_CHARS
    ):
        raise ProtocolError(
            "invalid_params",
            f"'notebook' must be a path of 1..{MAX_PATH_CHARS} chars, got {kind_of(notebook)}",
            request_id,
        )


def _check_model_param(model: object, request_id: str) -> None:
    """``get_advice``'s ``model``: absent, null or a namespace name of 1..256 chars."""
    if model is None:
        return
    if not isinstance(model, str) or not 0 < len(model) <= MAX_NAME_CHARS:
        raise ProtocolError(
            "invalid_params",
            f"'model' must be null or a name of 1..{MAX_NAME_CHARS} chars, got {kind_of(model)}",
            request_id,
        )


def _check_estimate_params(params: dict[str, Any], request_id: str) -> None:
    """``estimate`` (since 1.1): ``model`` (a name) or ``params`` (a count), typed options.

    Unknown precision/optimizer names are the estimator's to reject (also ``invalid_params``).
    """

    def bad(message: str) -> ProtocolError:
        return ProtocolError("invalid_params", message, request_id)

    model, count = params.get("model"), params.get("params")
    if (model is None) == (count is None):
        raise bad("estimate needs exactly one of 'model' (a name) and 'params' (a count)")
    if model is not None and (not isinstance(model, str) or not 0 < len(model) <= MAX_NAME_CHARS):
        raise bad(f"'model' must be a name of 1..{MAX_NAME_CHARS} chars")
    if count is not None and (not is_finite_number(count) or count < 1):
        raise bad(f"'params' must be a number >= 1, got {echo(count)}")
    for key in ("optimizer", "precision"):
        if key in params and not isinstance(params[key], str):
            raise bad(f"{key!r} must be a string, got {kind_of(params[key])}")
    if params.get("offload") is not None and not isinstance(params["offload"], str):
        raise bad(f"'offload' must be a string or null, got {kind_of(params['offload'])}")
    for key, low, nullable in (
        ("batch_size", 1, True),
        ("seq_len", 1, True),
        ("n_gpus", 1, False),
        ("zero_stage", 0, False),
    ):
        if key not in params or (nullable and params[key] is None):
            continue
        value = params[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise bad(f"{key!r} must be an integer >= {low}, got {echo(value)}")

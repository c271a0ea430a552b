"""Comm protocol v1 (kernel side): the messages each side sends, and validation of what the
front end sends.

``docs/protocol.md`` is the reference; ``src/protocol.ts`` is the front end's mirror. What the
messages carry (a cell's record, a sample, a device, model insight, processes) is in
``messages/``, one module per subject.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict, Union, get_args

from .messages.insight import Insight
from .messages.optimize import AdviceMessage, BatchSearchMessage  # since 1.1
from .messages.processes import ProcessesMessage
from .messages.records import CellRecord, DeviceInfo, KernelInfo, Sample, Settings
from .protocol_errors import MAX_ECHO_CHARS as MAX_ECHO_CHARS
from .protocol_errors import MAX_ID_CHARS, kind_of, reply_id
from .protocol_errors import MAX_NAME_CHARS as MAX_NAME_CHARS
from .protocol_errors import ErrorCode as ErrorCode
from .protocol_errors import ProtocolError as ProtocolError
from .protocol_errors import echo as echo
from .protocol_errors import is_finite_number as is_finite_number
from .protocol_params import check_feature_params

PROTOCOL_VERSION = "1.1.0"
COMM_TARGET = "vramscope"
CHANNELS = ("stream", "control")

Method = Literal[
    "get_report",
    "get_devices",
    "set_settings",
    "get_insight",
    "clear_history",
    "report_error",
    "get_samples",
    "get_advice",  # since 1.1
    "export_report",  # since 1.1
    "estimate",  # since 1.1
    "get_processes",  # since 1.1
]
METHODS: tuple[str, ...] = get_args(Method)
#: Longest ``report_error`` message the kernel keeps (longer ones are cut).
MAX_CLIENT_ERROR_CHARS = 500
KERNEL_MESSAGE_TYPES = (
    "hello",
    "cell",
    "samples",
    "devices",
    "insight",
    "notice",
    "error",
    "reply",
    "processes",  # since 1.1
    "advice",  # since 1.1
    "batch_search",  # since 1.1
    "cells",  # since 1.1
)


# --- kernel -> front end ------------------------------------------------------------------


class _HelloMessageRequired(TypedDict):
    type: Literal["hello"]
    protocol_version: str
    bridge_version: str
    session_id: str
    kernel: KernelInfo
    devices: list[DeviceInfo]
    settings: Settings
    cells: list[CellRecord]
    warnings: list[str]


class HelloMessage(_HelloMessageRequired, total=False):
    #: since 1.1: vramscope's own memory in the kernel (an estimate, vramscope.selfmem)
    self_bytes: int
    #: since 1.1: the last model insight computed in this kernel (absent before the first),
    #: so that a reloaded page shows it without asking
    insight: Insight


class _CellMessageRequired(TypedDict):
    type: Literal["cell"]
    record: CellRecord
    devices: list[DeviceInfo]


class CellMessage(_CellMessageRequired, total=False):
    self_bytes: int  # since 1.1, as in HelloMessage


class _CellsMessageRequired(TypedDict):
    type: Literal["cells"]
    records: list[CellRecord]
    devices: list[DeviceInfo]


class CellsMessage(_CellsMessageRequired, total=False):
    """Since 1.1: several cells' records at once (a Run All of quick cells), in order."""

    self_bytes: int


class SamplesMessage(TypedDict):
    type: Literal["samples"]
    samples: list[Sample]
    dropped: int


class _DevicesMessageRequired(TypedDict):
    type: Literal["devices"]
    devices: list[DeviceInfo]


class DevicesMessage(_DevicesMessageRequired, total=False):
    """``warnings``: the bridge's current warnings; the front end replaces hello's with them."""

    warnings: list[str]


class InsightMessage(TypedDict):
    type: Literal["insight"]
    insight: Insight


class NoticeMessage(TypedDict):
    type: Literal["notice"]
    level: Literal["info", "warning"]
    message: str


class ErrorMessage(TypedDict):
    type: Literal["error"]
    code: ErrorCode
    message: str
    in_reply_to: str | None


class ReplyMessage(TypedDict):
    type: Literal["reply"]
    id: str
    ok: Literal[True]
    result: dict[str, Any]


KernelMessage = Union[
    HelloMessage,
    CellMessage,
    CellsMessage,
    SamplesMessage,
    DevicesMessage,
    InsightMessage,
    NoticeMessage,
    ErrorMessage,
    ReplyMessage,
    ProcessesMessage,
    AdviceMessage,
    BatchSearchMessage,
]


# --- front end -> kernel ------------------------------------------------------------------


class Request(TypedDict):
    type: Literal["request"]
    id: str
    method: Method
    params: dict[str, Any]


def error_message(code: ErrorCode, message: str, in_reply_to: str | None = None) -> ErrorMessage:
    return {"type": "error", "code": code, "message": message, "in_reply_to": in_reply_to}


def reply_message(request_id: str, result: dict[str, Any]) -> ReplyMessage:
    return {"type": "reply", "id": request_id, "ok": True, "result": result}


def notice_message(level: Literal["info", "warning"], message: str) -> NoticeMessage:
    return {"type": "notice", "level": level, "message": message}


def major(version: str) -> int | None:
    """The semver major of ``version``, or None when it is not a version string."""
    head = version.split(".", 1)[0].strip()
    return int(head) if head.isdigit() else None


def check_protocol_version(metadata: object) -> None:
    """Accept an open whose metadata names a protocol with our major; raise otherwise."""
    theirs = metadata.get("protocol_version") if isinstance(metadata, dict) else None
    if not isinstance(theirs, str) or major(theirs) != major(PROTOCOL_VERSION):
        raise ProtocolError(
            "protocol_mismatch",
            f"front end speaks vramscope protocol {theirs!r}, kernel bridge speaks "
            f"{PROTOCOL_VERSION!r} (major versions must match); update the package that is older",
        )


def validate_request(obj: object) -> Request:
    """Check a received payload; return it typed as a Request or raise ProtocolError.

    Every error carries the request's id as far as one was sent (``reply_id``): also an
    invalid id, and also when a check fails in an unforeseen way (``invalid_params``)."""
    if not isinstance(obj, dict):
        raise ProtocolError("invalid_message", f"message must be an object, got {kind_of(obj)}")
    reply_to = reply_id(obj.get("id"))
    try:
        return _validate_request(obj, reply_to)
    except ProtocolError as err:
        if err.in_reply_to is None:
            err.in_reply_to = reply_to
        raise
    except Exception as exc:  # a check that broke on hostile input still answers the caller
        raise ProtocolError(
            "invalid_params", f"request could not be checked ({type(exc).__name__})", reply_to
        ) from None


def _validate_request(obj: dict[str, Any], reply_to: str | None) -> Request:
    raw_id = obj.get("id")
    msg_type = obj.get("type")
    if not isinstance(msg_type, str):
        raise ProtocolError("invalid_message", "message has no string 'type'", reply_to)
    if msg_type != "request":
        raise ProtocolError(
            "unknown_type",
            f"the kernel accepts only 'request' messages, got {echo(msg_type)}",
            reply_to,
        )
    if not isinstance(raw_id, str) or not 0 < len(raw_id) <= MAX_ID_CHARS:
        raise ProtocolError(
            "invalid_message", f"request needs a string 'id' of 1..{MAX_ID_CHARS} chars", reply_to
        )
    method = obj.get("method")
    if not isinstance(method, str):
        raise ProtocolError("invalid_message", "request needs a string 'method'", raw_id)
    params = obj.get("params")
    if not isinstance(params, dict):
        raise ProtocolError("invalid_message", "request needs an object 'params'", raw_id)
    if method not in METHODS:
        raise ProtocolError(
            "unknown_method",
            f"unknown method {echo(method)}; known: {', '.join(METHODS)}",
            raw_id,
        )
    if method == "get_insight":
        model = params.get("model")
        if model is not None and not isinstance(model, str):
            raise ProtocolError(
                "invalid_params", f"'model' must be a string, got {kind_of(model)}", raw_id
            )
        if isinstance(model, str) and not 0 < len(model) <= MAX_NAME_CHARS:
            raise ProtocolError(
                "invalid_params", f"'model' must be a name of 1..{MAX_NAME_CHARS} chars", raw_id
            )
    if method in ("get_advice", "estimate", "export_report"):  # since 1.1
        check_feature_params(method, params, raw_id)
    if method == "get_samples":
        since = params.get("since")
        if since is not None and not is_finite_number(since):
            raise ProtocolError(
                "invalid_params", f"'since' must be a finite number, got {kind_of(since)}", raw_id
            )
    if method == "report_error":
        for key in ("code", "message"):
            value = params.get(key)
            if not isinstance(value, str) or not value:
                raise ProtocolError("invalid_params", f"{key!r} must be a non-empty string", raw_id)
        if len(params["code"]) > MAX_NAME_CHARS:
            raise ProtocolError("invalid_params", "'code' is too long", raw_id)
    return {"type": "request", "id": raw_id, "method": method, "params": params}  # type: ignore[typeddict-item]

"""``test/fixtures/kernel-messages.json`` (real kernel messages, written by
``make_protocol_fixtures.py``) against the Python side of the protocol.

protocol.py has no validator for kernel -> front-end messages (the kernel only sends them), so
this file checks each message structurally against protocol.py's TypedDicts (``KernelMessage``),
plus the rules of docs/protocol.md "Validation": numbers finite, byte counts non-negative
integers (``delta_bytes`` may be negative), and the Insight parts protocol.py leaves as ``Any``.
The same fixture file is validated by the TypeScript validator in the jest suite.
"""

from __future__ import annotations

import copy
import json
import math
import types
from pathlib import Path
from typing import Any, Literal, TypedDict, Union, get_args, get_origin, get_type_hints

import pytest

from vramscope import protocol
from vramscope.messages.insight import empty_insight, is_model_info
from vramscope.messages.records import DeviceInfo
from vramscope.protocol import KERNEL_MESSAGE_TYPES, KernelMessage
from vramscope.runtime import Runtime

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "kernel-messages.json"

# keys whose value is a byte count (a non-negative integer) wherever they appear
BYTE_KEYS = {
    "total_bytes",
    "used_bytes",
    "reserved_bytes",
    "before_bytes",
    "after_bytes",
    "peak_delta_bytes",
    "param_bytes",
    "saved_bytes",
    "peak_saved_bytes",
    "grad_bytes",
    "bytes",
    # DeviceSample
    "used",
    "reserved",
    "peak",
    "device_used",
    "device_total",
}


# --- the Insight parts protocol.py types as dict[str, Any] (docs/protocol.md) ----------------


class LayerInfo(TypedDict):
    path: str
    type: str
    saved_bytes: int
    peak_saved_bytes: int
    output_shape: list[int] | None
    param_bytes: int
    grad_bytes: int


class _BreakdownRequired(TypedDict):
    total_bytes: int
    parameters: int
    gradients: int
    optimizer_state: int
    activations: int
    other: int


class Breakdown(_BreakdownRequired, total=False):
    reserved_free: int
    outside_pytorch: int


class Holder(TypedDict):
    name: str
    kind: str
    bytes: int
    explanation: str
    fix: str


class Invalid(AssertionError):
    pass


def _fail(path: str, why: str) -> Invalid:
    return Invalid(f"{path}: {why}")


def check(value: Any, tp: Any, path: str = "$") -> None:
    """Raise Invalid unless ``value`` (parsed JSON) is of type ``tp``."""
    if tp is Any:
        return
    if isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__"):
        if not isinstance(value, dict):
            raise _fail(path, f"expected an object, got {type(value).__name__}")
        hints = get_type_hints(tp)
        for key in tp.__required_keys__:
            if key not in value:
                raise _fail(path, f"missing {key!r}")
        for key, hint in hints.items():
            if key in value:
                check(value[key], hint, f"{path}.{key}")
        return
    origin, args = get_origin(tp), get_args(tp)
    if origin is Literal:
        if not any(value == a and type(value) is type(a) for a in args):
            raise _fail(path, f"{value!r} not one of {args}")
        return
    if origin in (Union, types.UnionType):
        errors = []
        for arg in args:
            try:
                check(value, arg, path)
                return
            except Invalid as err:
                errors.append(str(err))
        raise _fail(path, " / ".join(errors))
    if origin is list:
        if not isinstance(value, list):
            raise _fail(path, f"expected an array, got {type(value).__name__}")
        for i, item in enumerate(value):
            check(item, args[0], f"{path}[{i}]")
        return
    if origin is dict:
        if not isinstance(value, dict):
            raise _fail(path, f"expected an object, got {type(value).__name__}")
        for key, item in value.items():
            check(key, args[0], f"{path} key")
            check(item, args[1], f"{path}.{key}")
        return
    if tp is type(None):
        ok = value is None
    elif tp is bool:
        ok = isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        ok = ok and math.isfinite(value)
    elif tp is str:
        ok = isinstance(value, str)
    else:
        raise TypeError(f"{path}: validator does not know {tp!r}")
    if not ok:
        raise _fail(path, f"expected {tp.__name__}, got {value!r}")


def _byte_counts(value: Any, path: str) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            here = f"{path}.{key}"
            bad = not isinstance(item, int) or isinstance(item, bool) or item < 0
            if key in BYTE_KEYS and item is not None and bad:
                raise _fail(here, f"byte count must be an integer >= 0, got {item!r}")
            _byte_counts(item, here)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _byte_counts(item, f"{path}[{i}]")


def message_types() -> dict[str, Any]:
    """``type`` literal -> TypedDict, from the ``KernelMessage`` union."""
    out = {}
    for cls in get_args(KernelMessage):
        (literal,) = get_args(get_type_hints(cls)["type"])
        out[literal] = cls
    return out


def validate_kernel_message(data: Any) -> None:
    """What the front end must accept: raise Invalid for anything else."""
    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
        raise _fail("$", "not an object with a string 'type'")
    cls = message_types().get(data["type"])
    if cls is None:
        raise _fail("$.type", f"unknown kernel message type {data['type']!r}")
    check(data, cls)
    _byte_counts(data, "$")
    if data["type"] == "insight":
        insight = data["insight"]
        check(insight["layers"], list[LayerInfo], "$.insight.layers")
        check(insight["breakdown"], dict[str, Breakdown], "$.insight.breakdown")
        check(insight["holders"], list[Holder], "$.insight.holders")
        for i, model in enumerate(insight["models"]):
            if not is_model_info(model):
                raise _fail(f"$.insight.models[{i}]", "not a ModelInfo")
        names = [m["name"] for m in insight["models"]]
        if insight["model"] is not None and names and insight["model"] not in names:
            raise _fail("$.insight.model", "not among models")
    if data["type"] == "reply" and "devices" in data["result"]:
        check(data["result"]["devices"], list[DeviceInfo], "$.result.devices")
    if data["type"] == "samples":
        times = [s["t"] for s in data["samples"]]
        if times != sorted(times):
            raise _fail("$.samples", "not in time order")


@pytest.fixture(scope="module")
def fixture_text() -> str:
    return FIXTURE.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def messages(fixture_text: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(fixture_text)
    return loaded


def test_union_covers_every_kernel_message_type() -> None:
    assert sorted(message_types()) == sorted(KERNEL_MESSAGE_TYPES)


def test_fixture_has_every_kernel_message_type(messages: dict[str, Any]) -> None:
    assert sorted(messages) == sorted(KERNEL_MESSAGE_TYPES)
    for msg_type, data in messages.items():
        assert data["type"] == msg_type


def test_fixture_is_pretty_printed_with_sorted_keys(
    fixture_text: str, messages: dict[str, Any]
) -> None:
    expected = json.dumps(messages, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    assert fixture_text == expected
    assert len(fixture_text) < 20_000


@pytest.mark.parametrize("msg_type", KERNEL_MESSAGE_TYPES)
def test_fixture_message_is_valid(messages: dict[str, Any], msg_type: str) -> None:
    validate_kernel_message(messages[msg_type])


def test_fixture_messages_carry_content(messages: dict[str, Any]) -> None:
    """The captured instances are not degenerate (empty lists would validate trivially)."""
    assert messages["hello"]["cells"] and messages["hello"]["devices"]
    assert len(messages["samples"]["samples"]) >= 2
    assert messages["cell"]["record"]["devices"]
    insight = messages["insight"]["insight"]
    assert insight["layers"] and insight["models"] and insight["breakdown"]
    assert messages["error"]["in_reply_to"] is not None


def test_messages_built_in_process_are_valid() -> None:
    """The bridge's current builders agree with the validator (not only the stored file)."""
    rt = Runtime()
    try:
        validate_kernel_message(rt.hello())
        validate_kernel_message(rt.devices_message())
        validate_kernel_message({"type": "samples", "samples": [rt.read_all()], "dropped": 0})
        validate_kernel_message(protocol.error_message("internal", "boom"))
        validate_kernel_message(protocol.notice_message("warning", "careful"))
        validate_kernel_message(protocol.reply_message("r1", {"devices": rt.device_infos()}))
        validate_kernel_message({"type": "insight", "insight": empty_insight("none")})
    finally:
        rt.shutdown()
        rt.cpu.close()


def _set(path: tuple[Any, ...], value: Any) -> Any:
    def mutate(msg: dict[str, Any]) -> None:
        target: Any = msg
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return mutate


def _drop(path: tuple[Any, ...]) -> Any:
    def mutate(msg: dict[str, Any]) -> None:
        target: Any = msg
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return mutate


BROKEN = [
    ("hello", _drop(("session_id",))),
    ("hello", _set(("kernel", "pid"), "1234")),
    ("hello", _set(("settings", "cuda_peak_policy"), "sometimes")),
    ("hello", _set(("cells", 0, "ok"), 1)),
    ("cell", _set(("record", "devices", "cpu", "delta_bytes"), "5")),
    ("cell", _set(("record", "devices", "cpu", "after_bytes"), -1)),
    ("cell", _set(("record", "duration"), float("nan"))),
    ("cell", _set(("devices", 0, "kind"), "tpu")),
    ("cells", _set(("records", 1, "devices", "cpu", "delta_bytes"), "5")),  # since 1.1
    ("cells", _set(("records",), {"cell_id": "x"})),
    ("cells", _drop(("devices",))),
    ("samples", _set(("samples", 0, "d", "cpu", "used"), 1.5)),
    ("samples", _drop(("samples", 0, "d", "cpu", "used"))),
    ("samples", _set(("samples", 0, "t"), 2e9)),
    ("samples", _drop(("dropped",))),
    ("devices", _set(("warnings",), "no list")),
    ("devices", _set(("devices", 0, "initialized"), "yes")),
    ("insight", _set(("insight", "layers", 0, "saved_bytes"), -8)),
    ("insight", _set(("insight", "layers", 0, "output_shape"), "16x8")),
    ("insight", _drop(("insight", "breakdown", "cpu", "other"))),
    ("insight", _set(("insight", "holders"), [{"name": "x"}])),
    ("insight", _set(("insight", "models", 0, "param_bytes"), True)),
    ("insight", _set(("insight", "model"), "not-a-listed-model")),
    ("insight", _drop(("insight", "skipped"))),
    ("notice", _set(("level",), "debug")),
    ("error", _set(("code",), "oops")),
    ("error", _drop(("in_reply_to",))),
    ("reply", _set(("ok",), False)),
    ("reply", _set(("result", "devices", 0, "used_bytes"), None)),
    ("reply", _set(("type",), "answer")),
    ("processes", _set(("stats",), "none")),  # since 1.1
    ("processes", _drop(("findings",))),
    ("advice", _set(("advice", "suggestions", 0, "kind"), "magic")),  # since 1.1
    ("advice", _set(("advice", "suggestions", 0, "why"), "because")),
    ("advice", _drop(("advice", "outcomes"))),
    ("batch_search", _set(("search", "state"), "paused")),
    ("batch_search", _set(("search", "tried", 0, "batch_size"), 1.5)),
]


@pytest.mark.parametrize(("msg_type", "mutate"), BROKEN)
def test_validator_rejects_broken_copies(
    messages: dict[str, Any], msg_type: str, mutate: Any
) -> None:
    broken = copy.deepcopy(messages[msg_type])
    mutate(broken)
    with pytest.raises(Invalid):
        validate_kernel_message(broken)


def test_every_message_type_has_a_rejected_mutation() -> None:
    assert {t for t, _ in BROKEN} == set(KERNEL_MESSAGE_TYPES)

"""Bounded inputs (issue 21, item 5): every error reply carries the request's id, whatever
was sent as the id or in the params; a huge exception class name is stored cut; the kernel's
history cannot be set past its bound. In a real kernel, over its comms."""

from __future__ import annotations

import json
from typing import Any

import pytest

from vramscope.messages.records import MAX_ERROR_TYPE_CHARS, error_type_of
from vramscope.protocol import validate_request
from vramscope.settings import MAX_HISTORY_LIMIT, apply_settings, default_settings

pytestmark = pytest.mark.kernel

HUGE = 10**400  # past a float's range: float() raises OverflowError


def error_for(k: Any, control: str, data: dict[str, Any]) -> dict[str, Any]:
    """Send ``data`` on ``control``; the next error on it (the request's own answer)."""
    k.comm_send(control, data)
    msg = k.wait_iopub(
        lambda m: (
            m["msg_type"] == "comm_msg"
            and m["content"].get("comm_id") == control
            and m["content"]["data"].get("type") in ("error", "reply")
        )
    )
    reply: dict[str, Any] = msg["content"]["data"]
    assert reply["type"] == "error", reply
    return reply


def test_error_replies_carry_the_id_and_bounds_hold(fresh_stream_kernel: Any) -> None:
    k, stream = fresh_stream_kernel
    control = k.comm_open("control")
    request = {"type": "request", "method": "get_samples", "params": {}}
    assert "since" in json.dumps({"since": HUGE}) and len(json.dumps(HUGE)) == 401

    # a number past a float in the params: invalid_params, answered to its id (was internal,
    # with no id: the caller never heard back)
    err = error_for(k, control, {**request, "id": "r-overflow", "params": {"since": HUGE}})
    assert (err["code"], err["in_reply_to"]) == ("invalid_params", "r-overflow")
    # an id that is no string is echoed, safely: a caller that sent it can match it
    err = error_for(k, control, {**request, "id": HUGE})
    assert (err["code"], err["in_reply_to"]) == ("invalid_message", "int:1329 bits")
    err = error_for(k, control, {**request, "id": 7})
    assert err["in_reply_to"] == "7"
    err = error_for(k, control, {**request, "id": "x" * 10_000})
    assert err["in_reply_to"] == "x" * 256 and "1..256 chars" in err["message"]
    # settings: the history cannot be set past its bound (10 M samples were ~6.5 GB)
    err = error_for(
        k,
        control,
        {
            "type": "request",
            "id": "s1",
            "method": "set_settings",
            "params": {"history_limit": 10**7},
        },
    )
    assert (err["code"], err["in_reply_to"]) == ("invalid_params", "s1")
    assert "1..1000000" in err["message"]

    # a 100,000-character exception class name: the cell record (what the front end stores
    # in the cell's metadata) carries 200 characters, the last one an ellipsis
    name = "E" * 100_000
    k.execute(f"raise type({name!r}, (Exception,), {{}})()", cell_id="huge-error")
    record = k.comm_data(stream, "cell")["record"]
    while record["cell_id"] != "huge-error":
        record = k.comm_data(stream, "cell")["record"]
    assert record["ok"] is False
    assert record["error_type"] == "E" * (MAX_ERROR_TYPE_CHARS - 1) + "…"
    assert len(record["error_type"]) == 200


def test_bounds_in_process() -> None:
    assert MAX_HISTORY_LIMIT == 1_000_000
    assert apply_settings(default_settings(), {"history_limit": 1_000_000})["history_limit"] == (
        1_000_000
    )
    assert error_type_of(ValueError()) == "ValueError"
    assert error_type_of(None) is None
    exact = type("F" * 200, (Exception,), {})()
    assert error_type_of(exact) == "F" * 200  # at the bound: kept whole
    with pytest.raises(Exception) as info:
        validate_request({"type": "request", "id": 1.5, "method": "get_devices", "params": {}})
    assert getattr(info.value, "in_reply_to", None) == "1.5"

"""Requests beyond the basics. ``report_error``: the front end's answer to a kernel message it
rejected, validated by the kernel and kept (bounded) in ``session_report()["client_errors"]``.
``get_samples``: the kept samples, for a reloaded page to backfill its timeline."""

from __future__ import annotations

from typing import Any

import pytest

from vramscope.protocol import MAX_CLIENT_ERROR_CHARS, ProtocolError, validate_request


def _req(params: Any) -> dict[str, Any]:
    return {"type": "request", "id": "r1", "method": "report_error", "params": params}


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"code": "x"},
        {"message": "m"},
        {"code": "", "message": "m"},
        {"code": 3, "message": "m"},
        {"code": "x", "message": None},
        {"code": "x" * 300, "message": "m"},
    ],
)
def test_report_error_params_are_validated(params: dict[str, Any]) -> None:
    with pytest.raises(ProtocolError) as info:
        validate_request(_req(params))
    assert info.value.code == "invalid_params"
    assert info.value.in_reply_to == "r1"


@pytest.mark.kernel
def test_report_error_is_kept_in_the_report(kernel: Any) -> None:
    control = kernel.comm_open("control")
    long = "y" * (MAX_CLIENT_ERROR_CHARS + 100)
    for i in range(25):
        message = long if i == 24 else f"cell.duration must be a number ({i})"
        reply = kernel.request(
            control, "report_error", {"code": "invalid_message", "message": message}
        )
        assert reply["type"] == "reply", reply
    assert reply["result"] == {"kept": 20}  # bounded: the last 20
    bad = kernel.request(control, "report_error", {"code": "invalid_message"})
    assert bad["type"] == "error" and bad["code"] == "invalid_params"
    errors = kernel.eval("__import__('vramscope').session_report()['client_errors']")
    assert len(errors) == 20
    assert errors[0]["message"] == "cell.duration must be a number (5)"
    assert errors[-1]["message"] == "y" * MAX_CLIENT_ERROR_CHARS
    assert {e["code"] for e in errors} == {"invalid_message"}


@pytest.mark.kernel
def test_get_samples_backfills_what_the_kernel_kept(kernel: Any) -> None:
    """``get_samples``: every kept sample, or only those newer than ``since``."""
    kernel.run_ok("import time; time.sleep(0.6)")  # a few samples at 10 Hz
    control = kernel.comm_open("control")
    reply = kernel.request(control, "get_samples", {})
    assert reply["type"] == "reply", reply
    samples = reply["result"]["samples"]
    kept = kernel.eval("len(__import__('vramscope').session_report()['samples'])")
    assert 3 <= len(samples) <= kept
    times = [s["t"] for s in samples]
    assert times == sorted(times)
    # every sample has the CPU: read, or listed as not read at that tick (a slow heap)
    assert all("cpu" in s["d"] or "cpu" in s.get("unread", []) for s in samples)
    assert any("cpu" in s["d"] for s in samples)
    middle = times[len(times) // 2]
    newer = kernel.request(control, "get_samples", {"since": middle})["result"]["samples"]
    assert [s["t"] for s in newer][: len(times) - len(times) // 2 - 1] == [
        t for t in times if t > middle
    ]
    for bad in ("soon", True, [1], {}):
        out = kernel.request(control, "get_samples", {"since": bad})
        assert out["type"] == "error" and out["code"] == "invalid_params", out

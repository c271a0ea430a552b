"""Bridge dispatch with an in-memory comm (the real-kernel path is in test_kernel.py)."""

from __future__ import annotations

import sys
from typing import Any, Callable, cast

import pytest

from vramscope.messages.records import CellRecord
from vramscope.runtime import Runtime


class FakeComm:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.closed = False
        self.msg_cb: Callable[[dict[str, Any]], Any] | None = None
        self.close_cb: Callable[[dict[str, Any]], Any] | None = None

    def send(self, data: Any = None, metadata: Any = None, buffers: Any = None) -> None:
        self.sent.append(data)

    def close(self, data: Any = None, metadata: Any = None, buffers: Any = None) -> None:
        self.closed = True

    def on_msg(self, callback: Callable[[dict[str, Any]], Any]) -> None:
        self.msg_cb = callback

    def on_close(self, callback: Callable[[dict[str, Any]], Any]) -> None:
        self.close_cb = callback

    def deliver(self, data: Any) -> dict[str, Any]:
        assert self.msg_cb is not None
        self.msg_cb({"content": {"data": data}})
        return self.sent[-1]


def _open(rt: Runtime, channel: object, version: object = "1.0.0") -> FakeComm:
    comm = FakeComm()
    rt.bridge.on_open(
        comm, {"content": {"data": {"channel": channel}}, "metadata": {"protocol_version": version}}
    )
    return comm


def test_stream_open_sends_hello() -> None:
    rt = Runtime()
    comm = _open(rt, "stream", "1.3.0")
    (hello,) = comm.sent
    assert hello["type"] == "hello" and hello["protocol_version"] == "1.1.0"
    assert set(hello) == {
        "type",
        "protocol_version",
        "bridge_version",
        "session_id",
        "kernel",
        "devices",
        "settings",
        "cells",
        "warnings",
        "self_bytes",  # since 1.1
    }
    assert rt.bridge.wants_samples()
    assert comm.close_cb is not None
    comm.close_cb({})
    assert not rt.bridge.wants_samples()


def test_mismatch_and_bad_channel_close() -> None:
    rt = Runtime()
    comm = _open(rt, "stream", "2.0.0")
    assert comm.closed and comm.sent[0]["code"] == "protocol_mismatch"
    comm = _open(rt, "nonsense")
    assert comm.closed and comm.sent[0]["code"] == "invalid_message"


def test_control_requests() -> None:
    rt = Runtime()
    comm = _open(rt, "control")
    assert comm.sent == []
    out = comm.deliver(
        {"type": "request", "id": "a", "method": "set_settings", "params": {"sample_hz": 2}}
    )
    assert (
        out["type"] == "reply" and out["id"] == "a" and out["result"]["settings"]["sample_hz"] == 2
    )
    out = comm.deliver(
        {"type": "request", "id": "b", "method": "set_settings", "params": {"sample_hz": 99}}
    )
    assert out == {
        "type": "error",
        "code": "invalid_params",
        "message": out["message"],
        "in_reply_to": "b",
    }
    assert rt.settings["sample_hz"] == 2
    out = comm.deliver({"type": "request", "id": "c", "method": "nope", "params": {}})
    assert out["code"] == "unknown_method" and out["in_reply_to"] == "c"
    out = comm.deliver("garbage")
    assert out["code"] == "invalid_message" and out["in_reply_to"] is None
    out = comm.deliver({"type": "request", "id": "d", "method": "get_insight", "params": {}})
    assert out["type"] == "reply" and set(out["result"]["insight"]) >= {
        "layers",
        "breakdown",
        "holders",
    }
    out = comm.deliver({"type": "request", "id": "e", "method": "clear_history", "params": {}})
    assert out["result"] == {"cleared": 0}


def test_requests_on_stream_are_refused() -> None:
    rt = Runtime()
    comm = _open(rt, "stream")
    assert comm.sent[0]["type"] == "hello"
    out = comm.deliver({"type": "request", "id": "s", "method": "get_devices", "params": {}})
    assert out["type"] == "error" and out["code"] == "invalid_message"
    assert out["in_reply_to"] == "s" and "control" in out["message"]
    out = comm.deliver([1, 2])
    assert out["code"] == "invalid_message" and out["in_reply_to"] is None


def test_get_insight_model_sticks() -> None:
    import pytest

    torch = pytest.importorskip("torch")

    class Shell:
        user_ns: dict[str, Any] = {
            "big": torch.nn.Linear(64, 64),
            "small": torch.nn.Linear(2, 2),
        }
        user_ns_hidden: dict[str, Any] = {}

    rt = Runtime(Shell())
    comm = _open(rt, "control")
    out = comm.deliver({"type": "request", "id": "i", "method": "get_insight", "params": {}})
    insight = out["result"]["insight"]
    assert insight["model"] == "big"
    assert [m["name"] for m in insight["models"]] == ["big", "small"]
    params = {"model": "small"}
    out = comm.deliver({"type": "request", "id": "j", "method": "get_insight", "params": params})
    assert out["result"]["insight"]["model"] == "small"
    engine = rt.insight.engine()
    assert engine.watched == "small" and engine.after_cell(20)["model"] == "small"
    rt.shutdown()


def test_devices_message_once_torch_is_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.delitem(sys.modules, "torch")
    rt = Runtime()
    rt.update_settings({"insight": False})
    stream = _open(rt, "stream")
    (hello,) = stream.sent
    assert any("torch is not imported yet" in w for w in hello["warnings"])
    record = cast(CellRecord, {"cell_id": "c1"})
    rt._after_cell(record, {})  # torch still not imported: no devices message
    assert [m["type"] for m in stream.sent[1:]] == ["cell"]

    monkeypatch.setitem(sys.modules, "torch", torch)
    del stream.sent[:]
    rt._after_cell(record, {})
    devices, _cell = stream.sent
    assert devices["type"] == "devices" and devices["devices"][0]["id"] == "cpu"
    assert isinstance(devices["warnings"], list)
    assert not any("not imported yet" in w for w in devices["warnings"])
    assert devices["warnings"] == rt.hello()["warnings"]
    del stream.sent[:]
    rt._after_cell(record, {})  # only once, even though the device list is unchanged
    assert [m["type"] for m in stream.sent] == ["cell"]
    rt.shutdown()


def test_handler_failure_becomes_internal_error() -> None:
    rt = Runtime()
    comm = _open(rt, "control")

    def boom() -> dict[str, Any]:
        raise RuntimeError("kaput")

    rt.report = boom  # type: ignore[method-assign]
    out = comm.deliver({"type": "request", "id": "x", "method": "get_report", "params": {}})
    assert out["type"] == "error" and out["code"] == "internal" and out["in_reply_to"] == "x"
    assert "kaput" in out["message"]


def test_send_failure_is_swallowed() -> None:
    rt = Runtime()

    class Broken(FakeComm):
        def send(self, data: Any = None, metadata: Any = None, buffers: Any = None) -> None:
            raise OSError("socket closed")

    comm = Broken()
    rt.bridge.on_open(
        comm,
        {"content": {"data": {"channel": "stream"}}, "metadata": {"protocol_version": "1.0.0"}},
    )
    rt.bridge.broadcast({"type": "notice", "level": "info", "message": "x"})


def test_public_settings_and_watch() -> None:
    import warnings

    import pytest

    import vramscope

    with pytest.raises(ValueError, match="unknown"):
        vramscope.settings(bogus=1)
    with pytest.raises(ValueError, match="sample_hz"):
        vramscope.settings(sample_hz=1000)
    applied = vramscope.settings(history_limit=123)
    assert applied["history_limit"] == 123
    assert vramscope.settings()["history_limit"] == 123
    vramscope.settings(history_limit=36000)
    runtime = vramscope.runtime.get_runtime()
    if runtime.insight.engine() is None:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            vramscope.watch("model")
        assert caught and "vramscope.watch" in str(caught[0].message)

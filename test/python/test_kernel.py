"""The bridge in a real kernel: cells carrying a cellId, comms, samples while a cell is busy."""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any

import pytest

from kernel_harness import KernelHarness
from vramscope.report import REPORT_KEYS

pytestmark = pytest.mark.kernel
MIB = 1 << 20


@pytest.fixture(scope="module")
def streams(kernel: KernelHarness) -> dict[str, Any]:
    stream = kernel.comm_open("stream")
    hello = kernel.comm_data(stream, "hello")
    control = kernel.comm_open("control")
    kernel.run_ok("import torch, time")
    return {"stream": stream, "control": control, "hello": hello}


def _cell(kernel: KernelHarness, stream: str, cell_id: str, code: str) -> dict[str, Any]:
    """Run ``code`` as cell ``cell_id``; return the ``cell`` message recorded for it."""
    kernel.execute(code, cell_id)
    for _ in range(20):
        data = kernel.comm_data(stream, "cell")
        if data["record"]["cell_id"] == cell_id:
            return data
    raise AssertionError(f"no cell record for {cell_id}")


def test_hello(streams: dict[str, Any]) -> None:
    hello = streams["hello"]
    assert hello["protocol_version"] == "1.1.0"
    assert hello["kernel"]["torch_version"]
    assert hello["devices"][0]["id"] == "cpu"
    assert hello["settings"]["sample_hz"] == 10
    assert isinstance(hello["session_id"], str) and isinstance(hello["warnings"], list)


def test_64_mib_cell_delta(kernel: KernelHarness, streams: dict[str, Any]) -> None:
    data = _cell(kernel, streams["stream"], "cell-64", "x64 = torch.ones(16 * 1024 * 1024)")
    record = data["record"]
    assert record["ok"] is True and record["code_head"].startswith("x64 = torch.ones")
    assert isinstance(record["execution_count"], int)
    cpu = record["devices"]["cpu"]
    assert abs(cpu["delta_bytes"] - 64 * MIB) <= 0.01 * 64 * MIB, cpu
    assert cpu["peak_delta_bytes"] >= cpu["delta_bytes"]
    assert data["devices"][0]["used_bytes"] == cpu["after_bytes"]
    insight = kernel.comm_data(streams["stream"], "insight", timeout=10)["insight"]
    assert {"layers", "breakdown", "holders", "scan_ms", "skipped"} <= set(insight)


def test_queued_cells_are_measured_alone(kernel: KernelHarness, streams: dict[str, Any]) -> None:
    """ "Run All": cells queued back to back, with a model in the namespace so that the
    follow-up work of each cell (its message, model insight) is real. That work runs before the
    next cell's starting readings, never inside them: each delta is its own tensor's bytes."""
    kernel.run_ok(
        "burst_model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(8)])\n"
        "burst_model(torch.ones(64, 256)).sum().backward()"
    )
    cells = [
        ("burst-1", "b1 = torch.ones(4 * 1024 * 1024)", 16 * MIB),
        ("burst-2", "b2 = torch.ones(8 * 1024 * 1024)", 32 * MIB),
        ("burst-3", "del b1", -16 * MIB),
        ("burst-4", "b3 = torch.ones(2 * 1024 * 1024)", 8 * MIB),
    ]
    ids = [kernel.send_execute(code, cell_id) for cell_id, code, _ in cells]
    for msg_id in ids:
        assert kernel.reply(msg_id)["content"]["status"] == "ok"
    records = {}
    while len(records) < len(cells):
        record = kernel.comm_data(streams["stream"], "cell")["record"]
        if str(record["cell_id"]).startswith("burst-"):
            records[record["cell_id"]] = record
    assert list(records) == [cell_id for cell_id, _, _ in cells]  # in order, once each
    for cell_id, _, expected in cells:
        delta = records[cell_id]["devices"]["cpu"]["delta_bytes"]
        assert abs(delta - expected) <= 48 * 1024, (cell_id, delta - expected)
    kernel.run_ok("del b2, b3, burst_model")


def test_alloc_free_cell_peak(kernel: KernelHarness, streams: dict[str, Any]) -> None:
    code = "tmp = torch.ones(32 * 1024 * 1024)\ndel tmp"
    cpu = _cell(kernel, streams["stream"], "cell-128", code)["record"]["devices"]["cpu"]
    assert abs(cpu["delta_bytes"]) < 2 * MIB, cpu
    assert cpu["peak_delta_bytes"] >= 120 * MIB, cpu


def test_failing_and_oom_cells(kernel: KernelHarness, streams: dict[str, Any]) -> None:
    record = _cell(kernel, streams["stream"], "cell-err", "1 / 0")["record"]
    assert record["ok"] is False and record["error_type"] == "ZeroDivisionError"
    assert record["oom"] is False
    record = _cell(kernel, streams["stream"], "cell-oom", "torch.empty(2**50, dtype=torch.uint8)")[
        "record"
    ]
    assert record["ok"] is False and record["error_type"] == "RuntimeError"
    assert record["oom"] is True
    kernel.run_ok("ok_after_errors = 1")


def test_invalid_messages_get_errors(kernel: KernelHarness, streams: dict[str, Any]) -> None:
    control = streams["control"]
    bad: list[tuple[Any, str]] = [
        ("not an object", "invalid_message"),
        ({"type": "hello"}, "unknown_type"),
        ({"type": "request", "id": "m1", "method": "fly", "params": {}}, "unknown_method"),
        (
            {"type": "request", "id": "m2", "method": "set_settings", "params": {"sample_hz": -3}},
            "invalid_params",
        ),
    ]
    for payload, code in bad:
        kernel.comm_send(control, payload)
        msg = kernel.wait_iopub(
            lambda m: (
                m["msg_type"] == "comm_msg"
                and m["content"]["comm_id"] == control
                and m["content"]["data"].get("type") == "error"
            )
        )
        data = msg["content"]["data"]
        assert data["code"] == code, data
        if isinstance(payload, dict) and "id" in payload:
            assert data["in_reply_to"] == payload["id"]
    devices = kernel.request(control, "get_devices")
    assert devices["type"] == "reply" and devices["result"]["devices"][0]["id"] == "cpu"
    kernel.run_ok("still_alive = 1")


def test_protocol_mismatch_closes(kernel: KernelHarness, streams: dict[str, Any]) -> None:
    comm = kernel.comm_open("stream", version="2.0.0")
    data = kernel.comm_data(comm, "error")
    assert data["code"] == "protocol_mismatch" and "2.0.0" in data["message"]
    kernel.wait_iopub(lambda m: m["msg_type"] == "comm_close" and m["content"]["comm_id"] == comm)


def test_samples_stream_while_cell_busy(kernel: KernelHarness, streams: dict[str, Any]) -> None:
    stream = streams["stream"]
    start = len(kernel.iopub)
    code = (
        "grow = []\n"
        "for _ in range(12):\n"
        "    grow.append(torch.ones(4 * 1024 * 1024))\n"
        "    time.sleep(0.15)\n"
        "del grow"
    )
    msg_id = kernel.send_execute(code, "cell-grow")
    kernel.wait_iopub(
        lambda m: (
            m["msg_type"] == "status"
            and m["parent_header"].get("msg_id") == msg_id
            and m["content"]["execution_state"] == "idle"
        ),
        timeout=60,
    )
    kernel.reply(msg_id)
    busy = next(
        i
        for i, m in enumerate(kernel.iopub[start:], start)
        if m["msg_type"] == "execute_input" and m["parent_header"].get("msg_id") == msg_id
    )
    idle = len(kernel.iopub) - 1
    live = [m for m in kernel.messages_between(busy, stream, "samples")]
    # ~1.8 s at 2 messages a second while a cell runs (vramscope.sampler)
    assert len(live) >= 3, "samples must arrive while the cell is running"

    # the cell message goes out right after the execute reply (off the reply's path)
    def is_record(m: dict[str, Any]) -> bool:
        return bool(
            m["msg_type"] == "comm_msg"
            and m["content"].get("comm_id") == stream
            and m["content"]["data"].get("type") == "cell"
            and m["content"]["data"]["record"]["cell_id"] == "cell-grow"
        )

    if not any(is_record(m) for m in kernel.iopub[start:]):
        kernel.wait_iopub(is_record, timeout=10)
    record = next(
        m["content"]["data"]["record"]
        for m in kernel.messages_between(start, stream, "cell")
        if m["content"]["data"]["record"]["cell_id"] == "cell-grow"
    )
    with contextlib.suppress(TimeoutError):  # let batches queued under load arrive
        kernel.wait_iopub(lambda m: False, timeout=0.6)
    assert idle < len(kernel.iopub)
    # The series during the cell (by kernel timestamp: arrival order under load is not
    # the point here) rises with the allocation: 12 x 16 MiB appended over ~1.8 s.
    begin, end = record["start_time"], record["start_time"] + record["duration"]
    during = [
        s
        for m in kernel.messages_between(busy, stream, "samples")
        for s in m["content"]["data"]["samples"]
        if begin <= s["t"] <= end
    ]
    times = [s["t"] for s in during]
    assert all("cpu" in s["d"] or s.get("unread") == ["cpu"] for s in during)
    used = [s["d"]["cpu"]["used"] for s in during if "cpu" in s["d"]]  # (a slow heap: fewer)
    assert len(during) >= 5 and len(used) >= 3
    assert times == sorted(times)
    assert max(used) - used[0] >= 48 * MIB
    assert sum(1 for a, b in zip(used, used[1:]) if b < a - MIB) <= 2


def test_samples_stream_while_cell_computes(kernel: KernelHarness, streams: dict[str, Any]) -> None:
    """A cell holding the GIL in pure Python (no sleep, no I/O) still gets live samples: the
    batches are sent, by the kernel, before it sends that cell's execute_reply."""
    stream = streams["stream"]
    start = len(kernel.iopub)
    code = "x = 0\nend = time.time() + 2.0\nwhile time.time() < end:\n    x += 1"
    msg_id = kernel.send_execute(code, "cell-compute")
    reply = kernel.reply(msg_id)
    assert reply["content"]["status"] == "ok"
    idle = kernel.wait_iopub(
        lambda m: (
            m["msg_type"] == "status"
            and m["parent_header"].get("msg_id") == msg_id
            and m["content"]["execution_state"] == "idle"
        ),
        timeout=30,
    )
    began = next(
        m
        for m in kernel.iopub[start:]
        if m["msg_type"] == "execute_input" and m["parent_header"].get("msg_id") == msg_id
    )
    busy, done = kernel.iopub.index(began), kernel.iopub.index(idle)
    # arrival order on iopub: after the cell's execute_input, before its idle status
    live = list(kernel.messages_between(busy, stream, "samples"))
    live = [m for m in live if kernel.iopub.index(m) < done]
    # and by the kernel's own clock: sent before the execute_reply
    sent_before_reply = [m for m in live if m["header"]["date"] < reply["header"]["date"]]
    assert len(sent_before_reply) >= 3, f"{len(sent_before_reply)} batches while computing"
    # their samples were taken while the loop ran (not queued up and read afterwards)
    x = kernel.eval("x")
    assert x > 1000
    loop_end = kernel.eval("end")
    taken = [s["t"] for m in sent_before_reply for s in m["content"]["data"]["samples"]]
    assert sum(1 for t in taken if loop_end - 1.5 <= t <= loop_end) >= 3, taken


def test_report_and_settings(kernel: KernelHarness, streams: dict[str, Any]) -> None:
    control = streams["control"]
    out = kernel.request(control, "set_settings", {"history_limit": 5})
    assert out["result"]["settings"]["history_limit"] == 5
    time.sleep(0.8)
    report = kernel.request(control, "get_report")["result"]
    assert tuple(report) == REPORT_KEYS
    assert report["schema"] == "vramscope.report/1"
    assert 1 <= len(report["samples"]) <= 5
    assert any(c["cell_id"] == "cell-64" for c in report["cells"])
    json.dumps(report)
    text = kernel.eval("__import__('json').dumps(__import__('vramscope').session_report())[:1]")
    assert text == "{"
    kernel.request(control, "set_settings", {"history_limit": 36000})


def test_rate_zero_stops_sampler(kernel: KernelHarness, streams: dict[str, Any]) -> None:
    control = streams["control"]
    alive = "any(t.name == 'vramscope-sampler' for t in __import__('threading').enumerate())"
    assert kernel.request(control, "set_settings", {"sample_hz": 0})["type"] == "reply"
    assert kernel.eval(alive) is False
    assert kernel.request(control, "set_settings", {"sample_hz": 10})["type"] == "reply"
    assert kernel.eval(alive) is True


def test_bootstrap_idempotent(kernel: KernelHarness, streams: dict[str, Any]) -> None:
    kernel.run_ok("import vramscope\nvramscope._bootstrap()\n%load_ext vramscope")
    n = kernel.eval("len(get_ipython().events.callbacks['post_run_cell'])")
    kernel.execute("import vramscope as _v; _v._bootstrap()", silent=True)
    assert kernel.eval("len(get_ipython().events.callbacks['post_run_cell'])") == n
    threads = "sum(t.name == 'vramscope-sampler' for t in __import__('threading').enumerate())"
    assert kernel.eval(threads) == 1


def test_clear_history(kernel: KernelHarness, streams: dict[str, Any]) -> None:
    out = kernel.request(streams["control"], "clear_history")
    assert out["result"]["cleared"] >= 1
    report = kernel.request(streams["control"], "get_report")["result"]
    assert report["cells"] == []

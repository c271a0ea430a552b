"""Model insight and robustness in fresh real kernels (torch not imported at start):
insight hook timing around ``import torch``, the model picker (``models``, ``get_insight``
with a model), and garbage on both comm channels never reaching user code."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kernel_harness import BOOTSTRAP, KernelHarness

pytestmark = pytest.mark.kernel
KIB = 1024
INPUT_BYTES = 64 * 256 * 4  # a (64, 256) float32 input: what a Linear(256, n) saves


class Session:
    def __init__(self, cold: bool = True) -> None:
        """``cold``: a kernel without torch imported (the cells here import it themselves);
        False for a warm one, forked with torch imported, where that does not matter."""
        self.k = KernelHarness(cold=cold)
        reply = self.k.execute(BOOTSTRAP, silent=True)
        assert reply["content"]["status"] == "ok", reply["content"]
        self.stream = self.k.comm_open("stream")
        self.k.comm_data(self.stream, "hello")
        self.control = self.k.comm_open("control")

    def cell(self, code: str, cell_id: str) -> dict[str, Any]:
        """Run a cell; return its ``cell`` record (after the execute reply)."""
        reply = self.k.execute(code, cell_id)
        assert reply["content"]["status"] == "ok", reply["content"]
        for _ in range(50):
            data = self.k.comm_data(self.stream, "cell")
            if data["record"]["cell_id"] == cell_id:
                record: dict[str, Any] = data["record"]
                return record
        raise AssertionError(f"no cell record for {cell_id}")

    def cell_insight(self, code: str, cell_id: str) -> dict[str, Any]:
        """Run a cell; return the ``insight`` sent after it."""
        self.cell(code, cell_id)
        insight: dict[str, Any] = self.k.comm_data(self.stream, "insight", timeout=20)["insight"]
        return insight

    def answer(self, comm: str) -> dict[str, Any]:
        """The next reply or error on ``comm``."""
        msg = self.k.wait_iopub(
            lambda m: (
                m["msg_type"] == "comm_msg"
                and m["content"].get("comm_id") == comm
                and m["content"]["data"].get("type") in ("reply", "error")
            ),
            timeout=20,
        )
        data: dict[str, Any] = msg["content"]["data"]
        return data


@pytest.fixture(scope="module")
def fresh() -> Iterator[Session]:
    session = Session()
    yield session
    session.k.close()


def _saved(insight: dict[str, Any]) -> int:
    return sum(layer["saved_bytes"] for layer in insight["layers"])


def test_model_built_and_run_in_the_import_cell(fresh: Session) -> None:
    """Tracking starts the moment torch finishes importing: a forward in the same cell as
    ``import torch`` is counted (Linear saves its input: exactly INPUT_BYTES)."""
    assert fresh.k.eval("'torch' in __import__('sys').modules") is False
    code = (
        "import torch\n"
        "m1 = torch.nn.Linear(256, 256)\n"
        "y1 = m1(torch.randn(64, 256))  # tracked: the hooks came in with torch\n"
    )
    first = fresh.cell_insight(code, "import-cell")
    assert first["model"] == "m1"
    assert first["models"] == [{"name": "m1", "type": "Linear", "param_bytes": 257 * 256 * 4}]
    assert _saved(first) == INPUT_BYTES, first["layers"]
    assert first["breakdown"]["cpu"]["activations"] == INPUT_BYTES
    assert first["activations_measured"]["cell_id"] == "import-cell"
    assert first["activations_measured"]["reason"] == "first"
    # the next cell's forward is tracked exactly too, on top of the first graph
    second = fresh.cell_insight("y1b = m1(torch.randn(64, 256))", "after-import")
    assert second["model"] == "m1" and second["layers"][0]["path"] == ""
    assert _saved(second) == 2 * INPUT_BYTES, second["layers"]
    third = fresh.cell_insight("del y1b", "del-y1b")
    assert _saved(third) == INPUT_BYTES
    assert _saved(fresh.cell_insight("del y1", "del-y1")) == 0


def test_picker_models_and_get_insight_switch(fresh: Session) -> None:
    code = "big = torch.nn.Linear(512, 512)\nsmall = torch.nn.Linear(8, 8)\nalias = big"
    insight = fresh.cell_insight(code, "models")
    assert insight["model"] == "big"
    assert [(m["name"], m["type"]) for m in insight["models"]] == [
        ("big", "Linear"),
        ("m1", "Linear"),
        ("small", "Linear"),
    ]
    sizes = [m["param_bytes"] for m in insight["models"]]
    assert sizes == [513 * 512 * 4, 257 * 256 * 4, 9 * 8 * 4]

    reply = fresh.k.request(fresh.control, "get_insight", {"model": "small"})
    assert reply["type"] == "reply" and reply["result"]["insight"]["model"] == "small"
    # the choice sticks: the next after-cell insight reports "small", with its forward
    after = fresh.cell_insight("ys = small(torch.randn(4, 8))", "small-forward")
    assert after["model"] == "small" and _saved(after) == 4 * 8 * 4
    report = fresh.k.request(fresh.control, "get_report")["result"]
    assert report["model"] == "small" and report["models"] == after["models"]
    # vramscope.watch in a cell switches back
    back = fresh.cell_insight("import vramscope\nvramscope.watch(big)", "watch-big")
    assert back["model"] == "big"


def test_session_report_is_current_within_the_cell(fresh: Session) -> None:
    """session_report() called in the same cell as a forward pass shows that forward's
    saved activations (not the state at the previous cell's end)."""
    code = (
        "import vramscope\n"
        "globals().pop('ys', None)  # an earlier test's graph\n"
        "yr = big(torch.randn(64, 512))\n"
        "rep = vramscope.session_report()\n"
        "rep_layers = sum(layer['saved_bytes'] for layer in rep['layers'])\n"
        "rep_acts = rep['breakdown']['cpu']['activations']\n"
    )
    fresh.cell(code, "report-now")
    assert fresh.k.eval("rep['model']") == "big"
    assert fresh.k.eval("rep_layers") == 64 * 512 * 4  # the input Linear(512, 512) saves
    assert fresh.k.eval("rep_acts") == 64 * 512 * 4
    assert fresh.k.eval("rep['holders'][0]['name']") in ("big", "yr", "alias")
    fresh.cell("del yr, rep", "report-cleanup")


def test_garbage_on_both_channels(fresh: Session) -> None:
    huge = "x" * (2 << 20)
    payloads: list[Any] = [None, 42, 1.5, True, "text", huge, [1, 2], [], {}]
    payloads += [
        {"type": huge},
        {"type": 7},
        {"type": "hello", "id": "t1"},
        {"type": "request"},
        {"type": "request", "id": 5, "method": "get_devices", "params": {}},
        {"type": "request", "id": "", "method": "get_devices", "params": {}},
        {"type": "request", "id": None, "method": "get_devices", "params": {}},
        {"type": "request", "id": "p1", "method": "get_devices"},
        {"type": "request", "id": "p2", "method": "get_devices", "params": []},
        {"type": "request", "id": "p3", "method": "get_devices", "params": "x"},
        {"type": "request", "id": "p4", "method": 3, "params": {}},
        {"type": "request", "id": "p5", "method": huge, "params": {}},
        {"type": "request", "id": "p6", "method": "fly", "params": {}},
        {"type": "request", "id": "p7", "method": ["get_report"], "params": {}},
    ]
    bad_values: list[Any] = ["10", None, [], {}, True, -1, huge]
    settings = ("sample_hz", "cuda_peak_policy", "insight", "insight_budget_ms", "history_limit")
    for key in settings:
        for i, value in enumerate(bad_values):
            if key == "insight" and value is True:
                continue
            params = {key: value}
            payloads.append(
                {
                    "type": "request",
                    "id": f"s-{key}-{i}",
                    "method": "set_settings",
                    "params": params,
                }
            )
    for i, value in enumerate([5, [], {}, True, "", huge]):
        params = {"model": value}
        payloads.append(
            {"type": "request", "id": f"g{i}", "method": "get_insight", "params": params}
        )

    for channel in (fresh.control, fresh.stream):
        for payload in payloads:
            fresh.k.comm_send(channel, payload)
            out = fresh.answer(channel)
            assert out["type"] == "error", (str(payload)[:200], out)
            assert out["code"] in (
                "invalid_message",
                "unknown_type",
                "unknown_method",
                "invalid_params",
            )
            assert len(out["message"]) < 500
            has_id = isinstance(payload, dict) and isinstance(payload.get("id"), str)
            if has_id and payload["id"]:
                assert out["in_reply_to"] == payload["id"], out
    # every real method on the stream channel is refused; on control they still work
    for method in ("get_report", "get_devices", "set_settings", "get_insight", "clear_history"):
        fresh.k.comm_send(
            fresh.stream, {"type": "request", "id": f"st-{method}", "method": method, "params": {}}
        )
        out = fresh.answer(fresh.stream)
        assert out["type"] == "error" and out["code"] == "invalid_message"
        assert out["in_reply_to"] == f"st-{method}"
    extra = {"unknown_param": huge[:1000]}
    assert fresh.k.request(fresh.control, "get_devices", extra)["type"] == "reply"
    settings_now = fresh.k.request(fresh.control, "set_settings", {})["result"]["settings"]
    assert settings_now["sample_hz"] == 10 and settings_now["insight"] is True
    assert fresh.k.request(fresh.control, "get_insight")["result"]["insight"]["model"] == "big"

    # the user's next cell runs and is recorded, with insight
    record = fresh.cell("after_garbage = torch.ones(1024)", "after-garbage")
    assert record["ok"] is True and record["code_head"].startswith("after_garbage")
    assert fresh.k.comm_data(fresh.stream, "insight")["insight"]["model"] == "big"
    assert fresh.k.eval("after_garbage.numel()") == 1024


def test_insight_hooks_when_torch_came_in_silently() -> None:
    """torch imported by a silent execute (no post_run_cell): the next cell is tracked."""
    session = Session()
    try:
        reply = session.k.execute("import torch", silent=True)
        assert reply["content"]["status"] == "ok"
        code = "m = torch.nn.Linear(256, 16)\ny = m(torch.randn(64, 256))"
        insight = session.cell_insight(code, "first-visible-cell")
        assert insight["model"] == "m" and _saved(insight) == INPUT_BYTES, insight["layers"]
    finally:
        session.k.close()


def test_back_to_back_cells_reset_the_tracker_per_cell(fresh: Session) -> None:
    """Cells queued back to back ("Run All") get one coalesced insight, but each cell still
    starts with fresh per-cell exclusions: parameters swapped in by the second cell (as
    `model.cuda()` does) are never counted as saved activations."""
    fresh.cell("import torch", "b2b-import")
    first = (
        "fm = torch.nn.Linear(256, 256).requires_grad_(False)\n"
        "fx = torch.randn(64, 256, requires_grad=True)\n"
        "fy = fm(fx * 2)  # frozen weight: addmm keeps weight.t() for the input's gradient"
    )
    second = (
        "fm.weight = torch.nn.Parameter(fm.weight.detach().clone(), requires_grad=False)\n"
        "del fy\n"
        "fy = fm(fx * 2)"
    )
    # the first cell's insight runs at once, the next one is throttled (pending when the
    # third cell starts, so it is coalesced away): only the per-cell reset separates them
    again = "fy = fm(fx * 2)"
    ids = [
        fresh.k.send_execute(first, "b2b-1"),
        fresh.k.send_execute(again, "b2b-2"),
        fresh.k.send_execute(second, "b2b-3"),
    ]
    for msg_id in ids:
        assert fresh.k.reply(msg_id)["content"]["status"] == "ok"
    report = fresh.k.request(fresh.control, "get_insight", {})["result"]["insight"]
    # the per-layer figures count what the tracker saw at pack time
    assert _saved(report) == 0, report["layers"]
    assert report["breakdown"]["cpu"]["activations"] == 0
    fresh.cell("del fy, fx, fm", "b2b-cleanup")

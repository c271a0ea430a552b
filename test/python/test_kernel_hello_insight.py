"""A reloaded page gets the kernel's last model insight with the greeting (hello.insight, since
1.1), and the cell records it needs to bring the footers back (matched by cell id), in a real
kernel: a second pair of comms (what a page reload opens) receives them without asking."""

from __future__ import annotations

from typing import Any

import pytest

from kernel_harness import BOOTSTRAP, KernelHarness

pytestmark = pytest.mark.kernel

MODEL = """
import torch
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 8))
opt = torch.optim.Adam(model.parameters())
model(torch.randn(64, 256)).sum().backward()
opt.step()
"""


def _hello(k: KernelHarness) -> dict[str, Any]:
    stream = k.comm_open("stream")
    hello: dict[str, Any] = k.comm_data(stream, "hello")
    k.comm_open("control")
    return hello


def test_hello_carries_the_last_insight_and_the_records() -> None:
    k = KernelHarness()
    try:
        assert k.execute(BOOTSTRAP, silent=True)["content"]["status"] == "ok"
        first = _hello(k)
        assert "insight" not in first  # nothing computed yet: a 1.0-shaped greeting
        k.run_ok(MODEL, "cell-model")
        stream_insight = None
        for _ in range(20):  # the insight that follows the cell, on the first stream
            msg = k.wait_iopub(
                lambda m: (
                    m["msg_type"] == "comm_msg" and m["content"]["data"].get("type") == "insight"
                ),
                timeout=30,
            )
            stream_insight = msg["content"]["data"]["insight"]
            if stream_insight["models"]:
                break
        assert stream_insight is not None and stream_insight["models"]

        # the page reloads: new comms, a new hello
        again = _hello(k)
        insight = again["insight"]
        assert insight == stream_insight
        model = insight["models"][0]
        assert model["name"] == "model"
        params = k.eval("sum(p.numel() * p.element_size() for p in model.parameters())")
        assert model["param_bytes"] == params
        # optimizer state (Adam: exp_avg and exp_avg_sq, one of each per parameter)
        cpu = insight["breakdown"]["cpu"]
        assert cpu["parameters"] == params
        assert cpu["optimizer_state"] >= 2 * params
        # the records for the footers, by cell id
        assert [c["cell_id"] for c in again["cells"]][-1] == "cell-model"
    finally:
        k.close()


def test_other_names_the_tensors_that_belong_to_no_model() -> None:
    """Breakdown.other_tensors (since 1.1): the namespace's tensors no category claims, to the
    byte (a 64 MiB variable and a list of two 8 MiB tensors), inside ``other``."""
    k = KernelHarness()
    try:
        assert k.execute(BOOTSTRAP, silent=True)["content"]["status"] == "ok"
        stream = k.comm_open("stream")
        k.comm_data(stream, "hello")
        control = k.comm_open("control")
        k.run_ok(MODEL, "cell-model")
        k.run_ok(
            "x = torch.empty(64 * 2**20, dtype=torch.uint8)\n"
            "pair = [torch.zeros(2 * 2**20), torch.zeros(2 * 2**20)]\n"
            "view = x[:10]  # the same storage as x: counted once",
            "cell-tensors",
        )
        reply = k.request(control, "get_insight", {})
        cpu = reply["result"]["insight"]["breakdown"]["cpu"]
        truth = 64 * 2**20 + 2 * (8 * 2**20)
        assert cpu["other_tensors"] == truth
        assert cpu["other"] >= cpu["other_tensors"]
        k.run_ok("del x, pair, view", "cell-del")
        reply = k.request(control, "get_insight", {})
        assert reply["result"]["insight"]["breakdown"]["cpu"]["other_tensors"] == 0
    finally:
        k.close()

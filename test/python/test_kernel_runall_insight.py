"""Run All with models: a cell that ran a model gets its own insight before the next cell
starts (its saved activations are that cell's, not the whole run's), and the measured call
is named with the cell's own execution count (IPython 9 counts a cell before pre_run_cell)."""

from __future__ import annotations

from typing import Any

import pytest

from kernel_harness import KernelHarness

pytestmark = pytest.mark.kernel

SETUP = """
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
"""
# one step's forward saves: Linear 0's input (16x32) and the Tanh output (16x64); float32
# (square() keeps the 16x8 output too, outside the model's forward: not counted)
STEP_BYTES = (16 * 32 + 16 * 64) * 4
TRAIN = """
for _ in range(3):
    loss = model(torch.randn(16, 32)).square().mean()
    loss.backward(); opt.step(); opt.zero_grad()
"""
# keeps 8 graphs alive: 8 times one step's saved bytes
LEAK = "kept = [model(torch.randn(16, 32)).square().mean() for _ in range(8)]"


def _insights(k: KernelHarness, stream: str, start: int) -> list[dict[str, Any]]:
    return [m["content"]["data"]["insight"] for m in k.messages_between(start, stream, "insight")]


def test_each_model_cell_of_a_run_all_has_its_own_insight_and_count(
    fresh_stream_kernel: tuple[KernelHarness, str],
) -> None:
    k, stream = fresh_stream_kernel
    k.run_ok(SETUP, "setup")
    k.comm_data(stream, "cell")
    start = len(k.iopub)
    cells = [("train", TRAIN), ("leak", LEAK), ("after", "pass")]
    ids = [k.send_execute(code, cell_id) for cell_id, code in cells]
    counts = {}
    for (cell_id, _), msg_id in zip(cells, ids):
        reply = k.reply(msg_id)
        assert reply["content"]["status"] == "ok"
        counts[cell_id] = reply["content"]["execution_count"]
    records = {}
    while len(records) < 3:
        record = k.comm_data(stream, "cell")["record"]
        records[record["cell_id"]] = record
    assert {c: r["execution_count"] for c, r in records.items()} == counts
    k.comm_data(stream, "insight")  # the last one, after "after"
    insights = _insights(k, stream, start)
    by_cell = {
        i["activations_measured"]["cell_id"]: i for i in insights if "activations_measured" in i
    }
    assert set(by_cell) >= {"train", "leak"}, [i.get("activations_measured") for i in insights]
    train, leak = by_cell["train"], by_cell["leak"]
    # the training cell's insight: one step's saved bytes at its peak, nothing left live
    assert sum(layer["peak_saved_bytes"] for layer in train["layers"]) == STEP_BYTES
    assert train["activations_measured"]["execution_count"] == counts["train"]
    # the leak cell's: eight graphs, every call measured (each one's graph stays alive)
    assert sum(layer["saved_bytes"] for layer in leak["layers"]) == 8 * STEP_BYTES
    assert leak["activations_measured"]["execution_count"] == counts["leak"]

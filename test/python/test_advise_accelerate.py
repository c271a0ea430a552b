"""Advice for a hand-written ``accelerate`` loop in accelerate's own terms (issue 20, item 2),
in a real kernel with vramscope loaded.

The loop is accelerate's documented one: ``accelerator.prepare(model, optimizer, loader)``,
``accelerator.backward(loss)``, ``optimizer.step()`` (an ``AcceleratedOptimizer`` around the
user's AdamW). After advice, the cards are ``Accelerator(mixed_precision=...)`` and
``Accelerator(gradient_accumulation_steps=k)`` cells over the user's own names, plus the
model's own checkpointing; run as generated, the next training run's measured step and
saved activations give the outcome, and the undo cells put the very objects back."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from advise_helpers import advise, start_kernel, value
from framework_models import BLOCK, DATA, SAVED_TRUTH, net_class
from kernel_harness import KernelHarness
from requires import requires

pytestmark = requires("accelerate")

SETUP = (
    BLOCK
    + """
from accelerate import Accelerator
"""
    + net_class("nn.Module")
    + """

net = Net()
"""
    + DATA
    + """
adam = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=0.05)
"""
)
ACCELERATOR = """accelerator = Accelerator(
    cpu=True,  # the user's own settings, kept by the cards
)
net, adam, loader = accelerator.prepare(net, adam, loader)
"""
TRAIN = """
for step, (x, y) in enumerate(loader):
    adam.zero_grad()
    loss = nn.functional.cross_entropy(net(x).flatten(0, 1), y.flatten())
    accelerator.backward(loss)
    adam.step()
    if step == 3:
        break
"""
# ground truth of the test's own: the bytes one forward of `n` samples leaves for backward
# (distinct storages other than the model's own tensors), by saved-tensor hooks of its own
PROBES = (
    SAVED_TRUTH
    + """
def _gt_saved(n):  # a batch of its own, as the loader gives
    return _gt_saved_by(net, lambda: net(ds.tensors[0][:n].clone()))


def _gt_adam_steps():
    inner = getattr(adam, "optimizer", adam)
    return int(inner.state[inner.param_groups[0]["params"][0]]["step"])
"""
)


@pytest.fixture
def k() -> Iterator[KernelHarness]:
    kernel = start_kernel()
    cells = [
        (SETUP, "setup"),
        (ACCELERATOR, "accelerator"),
        (TRAIN, "train"),
        (None, ""),
        (TRAIN, "train"),
    ]
    for code, cell in cells:
        if code is None:
            advise(kernel)  # advice asked for: the next run's step is measured
        else:
            kernel.run_ok(code, f"{cell}-cell")
    assert kernel.execute(PROBES, silent=True)["content"]["status"] == "ok"
    try:
        yield kernel
    finally:
        kernel.close()


def cards(k: KernelHarness) -> dict[str, Any]:
    return {s["id"]: s for s in advise(k)["suggestions"]}


def test_cards_are_in_accelerates_terms_over_the_users_names(k: KernelHarness) -> None:
    advice = advise(k)
    by_id = {s["id"]: s for s in advice["suggestions"]}
    assert {"accelerate:bf16", "accelerate:accumulate:2", "checkpoint:blocks"} <= set(by_id)
    # no torch.autocast rewrite, no manual micro-batch loop
    assert not [s for s in by_id if s.startswith(("autocast:", "accumulate:"))], list(by_id)
    assert advice["training_cell"]["cell_id"] == "train-cell"
    bf16, acc = by_id["accelerate:bf16"], by_id["accelerate:accumulate:2"]
    assert bf16["kind"] == "enable" and bf16["target_cell"]["cell_id"] == "accelerator-cell"
    assert "accelerator = Accelerator(cpu=True, mixed_precision='bf16')" in bf16["code"]
    assert acc["kind"] == "rewrite" and acc["target_cell"]["cell_id"] == "train-cell"
    assert "Accelerator(cpu=True, gradient_accumulation_steps=2)" in acc["code"]
    assert "    with accelerator.accumulate(net):\n        adam.zero_grad()\n" in acc["code"]
    assert "batch_size=16," in acc["code"]
    assert "torch.autocast" not in bf16["code"] + acc["code"]
    # the predictions rest on the measured run: what one forward of 32 samples saves
    truth = value(k, "_gt_saved(32)")
    assert acc["predicted"]["activation_bytes_before"] == pytest.approx(truth, rel=0.02)
    assert acc["predicted"]["activation_bytes_after"] == pytest.approx(truth / 2, rel=0.02)


def test_accumulation_cell_runs_meets_its_prediction_and_undo_restores(
    k: KernelHarness,
) -> None:
    s = cards(k)["accelerate:accumulate:2"]
    ids = value(k, "[id(accelerator), id(adam), id(loader), id(adam.optimizer)]")
    steps = value(k, "_gt_adam_steps()")
    k.run_ok(s["code"], "train-cell")  # the training cell, rewritten
    # 4 micro-batches of 16 a run: 2 optimizer steps of the inner AdamW
    assert value(k, "_gt_adam_steps()") == steps + 2
    k.run_ok(s["code"], "train-cell")  # run again: the set-up does not run twice
    got = value(
        k,
        "[accelerator.gradient_accumulation_steps, loader.total_batch_size, "
        "adam.optimizer.param_groups[0]['weight_decay'], id(adam.optimizer)]",
    )
    assert got == [2, 16, 0.05, ids[3]]  # the user's AdamW, its settings and state kept
    assert value(k, "_gt_adam_steps()") == steps + 4
    (outcome,) = advise(k)["outcomes"]
    assert outcome["suggestion_id"] == s["id"] and outcome["verdict"] == "met", outcome
    before, after = outcome["before"], outcome["after"]
    assert before["activation_bytes"] == pytest.approx(value(k, "_gt_saved(32)"), rel=0.02)
    assert after["activation_bytes"] == pytest.approx(value(k, "_gt_saved(16)"), rel=0.02)
    assert after["execution_count"] > before["execution_count"]
    assert outcome["step_peak_miss_fraction"] is not None
    assert outcome["step_peak_miss_fraction"] < 0.2
    # undo: the very accelerator, optimizer and loader back, accelerate's state with them
    k.run_ok(s["undo_code"])
    assert value(k, "[id(accelerator), id(adam), id(loader), id(adam.optimizer)]") == ids
    assert value(k, "[accelerator.gradient_accumulation_steps, loader.total_batch_size]") == [
        1,
        32,
    ]
    k.run_ok(TRAIN, "train-cell")  # the loop as it was runs: one step per batch
    assert value(k, "_gt_adam_steps()") == steps + 8


def test_bf16_cell_runs_meets_its_prediction_and_undo_restores_the_forward(
    k: KernelHarness,
) -> None:
    s = cards(k)["accelerate:bf16"]
    ids = value(k, "[id(accelerator), id(adam), id(net)]")
    k.run_ok(s["code"])
    k.run_ok(s["code"])  # re-running it is harmless
    got = value(k, "[accelerator.mixed_precision, id(net), str(net(ds.tensors[0][:2]).dtype)]")
    assert got == ["bf16", ids[2], "torch.float32"]  # autocast inside, fp32 outputs
    assert value(k, "'forward' in vars(net)")  # prepare's autocast wrapper
    k.run_ok(TRAIN, "train-cell")
    (outcome,) = advise(k)["outcomes"]
    assert outcome["suggestion_id"] == s["id"], outcome
    before, after = outcome["before"], outcome["after"]
    assert after["step_peak_bytes"] is not None  # the step under prepare's forward measured
    assert after["activation_bytes"] < 0.8 * before["activation_bytes"]  # 16-bit activations
    assert outcome["verdict"] == "met" and outcome["miss_fraction"] < 0.2, outcome
    k.run_ok(s["undo_code"])
    assert value(k, "[id(accelerator), id(adam), id(net)]") == ids
    assert value(k, "[accelerator.mixed_precision, 'forward' in vars(net)]") == ["no", False]
    k.run_ok(TRAIN, "train-cell")
    assert value(k, "_gt_saved(32)") == pytest.approx(before["activation_bytes"], rel=0.02)

"""Advice for PyTorch Lightning in its own terms (issue 20, item 2), in process.

A tiny LightningModule (three repeated MLP blocks over 32 tokens) trains through
``trainer.fit()`` (CPU, ``max_steps=2``). The step inside ``fit`` (where the optimizer's
step runs the forward and backward in its closure) is measured like a manual loop's; the
cards rewrite the cell that built the ``Trainer``."""

from __future__ import annotations

import ast
from typing import Any

import pytest

from advise_cells import Cells
from framework_models import BLOCK, DATA, LIGHTNING_TRAINER, net_class
from requires import requires

pytestmark = requires("lightning")

METHODS = """
    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.cross_entropy(self(x).flatten(0, 1), y.flatten())

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)
"""
SETUP = (
    BLOCK
    + """
import lightning as L
"""
    + net_class("L.LightningModule", METHODS)
    + """


torch.manual_seed(0)
net = Net()
"""
    + DATA
)
TRAINER = LIGHTNING_TRAINER
FIT = "trainer.fit(net, loader)"
MANUAL = """
opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
x, y = next(iter(loader))
opt.zero_grad()
loss = net.training_step((x, y), 0)
loss.backward()
opt.step()
"""


@pytest.fixture
def cells() -> Any:
    c = Cells()
    c.run(SETUP)
    c.run(TRAINER, "trainer-cell")
    c.run(FIT, "fit-cell")
    c.advisor.advise()
    c.run(TRAINER, "trainer-cell")  # a Lightning Trainer past max_steps trains no more
    c.run(FIT, "fit-cell")
    yield c
    c.close()


def test_the_step_inside_fit_is_measured_as_a_manual_loop_measures_it(cells: Cells) -> None:
    fit_step = cells.advisor.log.recent[-1].step
    assert fit_step is not None  # the step ran inside optimizer.step(closure)
    cells.run(MANUAL)
    manual_step = cells.advisor.log.recent[-1].step
    assert manual_step is not None
    # the same forward and backward: the closure's end is the step's end, before the update
    # (AdamW's first update would add its two moments: 2 x the parameters)
    params = sum(p.numel() * p.element_size() for p in cells.ns["net"].parameters())
    assert fit_step.grads == manual_step.grads == params
    assert fit_step.peak == pytest.approx(manual_step.peak, rel=0.02)


def test_advice_after_fit_rewrites_the_trainer_cell(cells: Cells) -> None:
    advice = cells.advisor.advise()
    by_id = {s["id"]: s for s in advice["suggestions"]}
    assert {"lightning:bf16-mixed", "lightning:accumulate:2", "checkpoint:blocks"} <= set(by_id)
    # no loop to rewrite in `trainer.fit(net, loader)`
    assert not [s for s in advice["suggestions"] if s["kind"] == "template"]
    for sid in ("lightning:bf16-mixed", "lightning:accumulate:2"):
        s = by_id[sid]
        assert s["kind"] == "rewrite" and s["target_cell"]["cell_id"] == "trainer-cell"
        tree = ast.parse(s["code"])
        (call,) = [
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "Trainer"
        ]
        kept = {k.arg: ast.unparse(k.value) for k in call.keywords}
        # the user's keywords kept as written, one keyword added
        assert kept["max_steps"] == "2" and kept["enable_model_summary"] == "False"
    assert "precision='bf16-mixed'" in ast.unparse(ast.parse(by_id["lightning:bf16-mixed"]["code"]))
    # checkpointing stays the module's own (its repeated blocks)
    assert "net.blocks" in by_id["checkpoint:blocks"]["code"]


def test_accumulation_rewrite_meets_its_prediction_and_undo_restores_the_loader(
    cells: Cells,
) -> None:
    s = {x["id"]: x for x in cells.advisor.advise()["suggestions"]}["lightning:accumulate:2"]
    original = cells.ns["loader"]
    cells.run(s["code"], "trainer-cell")
    cells.run(s["code"], "trainer-cell")  # run again: still micro-batches of 16, not 8
    assert cells.ns["loader"].batch_size == 16 and cells.ns["loader"].dataset is original.dataset
    assert cells.ns["trainer"].accumulate_grad_batches == 2
    cells.run(FIT, "fit-cell")
    (outcome,) = cells.advisor.advise()["outcomes"]
    assert outcome["verdict"] == "met", outcome
    before, after = outcome["before"], outcome["after"]
    assert after["activation_bytes"] * 2 == pytest.approx(before["activation_bytes"], rel=0.02)
    assert outcome["step_peak_miss_fraction"] is not None
    assert outcome["step_peak_miss_fraction"] < 0.2
    cells.run(s["undo_code"])
    assert cells.ns["loader"] is original

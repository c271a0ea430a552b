"""A LightningModule whose ``training_step`` never calls ``self(...)`` (issue 20): it calls
its submodule ``self.net(x)`` directly. In a real kernel with vramscope loaded, the step
inside ``trainer.fit()`` is measured all the same (the child that ran is the measured root,
step_roots), model insight reports the LightningModule with that child's rows, and the cards
are Lightning's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from advise_helpers import advise, start_kernel, value
from framework_models import BLOCK, DATA, LIGHTNING_TRAINER, SAVED_TRUTH, net_class
from kernel_harness import KernelHarness
from requires import requires

pytestmark = requires("lightning")

SETUP = (
    BLOCK
    + "import lightning as L\n"
    + net_class("nn.Module")
    + """

class Lit(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = Net()

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.cross_entropy(self.net(x).flatten(0, 1), y.flatten())

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


lit = Lit()
"""
    + DATA
)
TRAINER = LIGHTNING_TRAINER
FIT = "trainer.fit(lit, loader)"
# the test's own figures for a batch of 32: the bytes the forward saves for backward
# (saved-tensor hooks of its own) and the forward + backward peak (GROUND_TRUTH's op-by-op
# count), with the gradients made anew as Lightning's zero_grad leaves them (None)
PROBES = (
    SAVED_TRUTH
    + """
def _gt_batch():
    return ds.tensors[0][:32].clone(), ds.tensors[1][:32].clone()


def _gt_saved():
    return _gt_saved_by(lit, lambda: lit.training_step(_gt_batch(), 0))


def _gt_step_peak():
    lit.zero_grad(set_to_none=True)
    batch = _gt_batch()
    _kept, peak, _ = _gt_measure(lambda: lit.training_step(batch, 0).backward())
    lit.zero_grad(set_to_none=True)
    return peak


def _gt_step():
    step = vramscope.runtime.get_runtime().optimize.advisor.log.recent[-1].step
    return None if step is None else [step.peak, step.grads]
"""
)


@pytest.fixture(scope="module")
def k() -> Iterator[KernelHarness]:
    kernel = start_kernel()
    kernel.run_ok(SETUP, "setup-cell")
    for _ in range(2):  # advice asked for after the first fit: the second's step is measured
        kernel.run_ok(TRAINER, "trainer-cell")  # past max_steps a Trainer trains no more
        kernel.run_ok(FIT, "fit-cell")
        if _ == 0:
            advise(kernel)
    assert kernel.execute(PROBES, silent=True)["content"]["status"] == "ok"
    try:
        yield kernel
    finally:
        kernel.close()


def test_the_step_inside_fit_is_measured_through_the_child_that_ran(k: KernelHarness) -> None:
    step = value(k, "_gt_step()")
    assert step is not None, "the step inside fit was not measured"
    peak, grads = step
    params = value(k, "sum(p.numel() * p.element_size() for p in lit.parameters())")
    assert grads == params  # every .grad the step made, exactly
    assert peak == pytest.approx(value(k, "_gt_step_peak()"), rel=0.05)


def test_insight_and_cards_are_the_lightning_modules(k: KernelHarness) -> None:
    advice = advise(k)
    assert advice["model"] == "lit" and advice["training_cell"]["cell_id"] == "fit-cell"
    by_id = {s["id"]: s for s in advice["suggestions"]}
    assert {"lightning:bf16-mixed", "lightning:accumulate:2", "checkpoint:net.blocks"} <= set(
        by_id
    ), (list(by_id), advice["notes"])
    assert not [n for n in advice["notes"] if "not measured" in n], advice["notes"]
    # the predictions rest on the child's measured rows: what one forward of 32 saves
    acc = by_id["lightning:accumulate:2"]["predicted"]
    assert acc["activation_bytes_before"] == pytest.approx(value(k, "_gt_saved()"), rel=0.02)


def test_a_child_called_inside_the_modules_own_forward_is_not_measured_apart(
    k: KernelHarness,
) -> None:
    """Inside the LightningModule's own forward its children are nested calls: only the
    module is measured (a second call, its graph freed, is not measured again, nor its child
    apart); the child called on its own is."""
    k.run_ok(
        "class Whole(Lit):\n"
        "    def forward(self, x):\n"
        "        return self.net(x)\n"
        "whole = Whole()\nx8 = torch.randn(8, 32, 64)",
        "whole-setup",
    )
    roots = "[type(m).__name__ for m in vramscope.runtime.get_runtime().insight._engine"
    roots += ".tracker.measured_roots()]"
    k.run_ok("for _ in range(2):\n    whole(x8).sum().backward()", "whole-steps")
    assert value(k, roots) == ["Whole"]
    k.run_ok("c = whole.net(x8)", "child-forward")
    assert value(k, roots) == ["Net"]

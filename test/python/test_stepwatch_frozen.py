"""The step watch finds the training step by what ran: an optimizer step over any of the
model's parameters, whichever are frozen (in process, a real model and optimizer)."""

from __future__ import annotations

import pytest
import torch

from advise_cells import Cells

SETUP = """
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Sequential(nn.Sequential(nn.Linear(32, 64), nn.ReLU()), nn.Linear(64, 8))
{freeze}
opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
x = torch.randn(16, 32)
"""
TRAIN = "opt.zero_grad()\nloss = model(x).square().mean()\nloss.backward()\nopt.step()\n"


@pytest.mark.parametrize(
    "freeze",
    [
        "",  # nothing frozen
        "model[0][0].weight.requires_grad_(False)",  # the first parameter frozen
        "model[0].requires_grad_(False)",  # a frozen base, only the head trains
    ],
    ids=["none", "first-parameter", "base"],
)
def test_a_step_over_any_trainable_parameter_is_measured(freeze: str) -> None:
    cells = Cells()
    try:
        cells.run(SETUP.format(freeze=freeze))
        cells.run(TRAIN)
        cells.advisor.advise("model")  # arms the step watch
        cells.run(TRAIN)
        steps = cells.advisor.steps
        assert steps is not None and steps.watching
        measured = [run.step for run in cells.advisor.log.recent if run.step is not None]
        assert measured, "the training step was not measured"
        trainable = sum(p.numel() * 4 for p in cells.ns["model"].parameters() if p.requires_grad)
        assert measured[-1].grads == trainable  # the .grad tensors the step made, exactly
    finally:
        cells.close()
    assert torch._C._autograd._top_saved_tensors_default_hooks(False) is None

"""Accumulation's step-peak prediction from one measured step (stepwatch.figures_of and
StepFigures.accumulated_peak), against the peak of the same model really run in k
micro-batches, both counted op by op by the same tracker (vramscope.optimize.peak), in
process: no kernel needed, the figures are pure functions of the recorded events."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from vramscope.optimize.peak import tracker
from vramscope.optimize.stepwatch import figures_of

KIB = 1024


def test_a_gradient_made_where_an_activation_was_freed_is_not_counted_before_it() -> None:
    # key 1: an activation (8 KiB) freed in backward; the same address then holds a gradient
    events = [(1, 8 * KIB), (2, 8 * KIB), (1, -8 * KIB), (1, 4 * KIB), (2, -8 * KIB)]
    figures = figures_of(events, {1: 4 * KIB}, 1)
    assert figures.grads == 4 * KIB
    # at backward's start: no gradient yet, 16 KiB of the rest
    assert (0, 16 * KIB) in figures.frontier
    assert max(g for g, _ in figures.frontier) == 4 * KIB
    # a later micro-batch of two: gradients in place (4) + half the rest (8), and where the
    # gradient was made, a 4 KiB temporary beside half of the 8 KiB then alive
    assert figures.accumulated_peak(2) == 4 * KIB + 8 * KIB


def _mlp() -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 512),
        torch.nn.ReLU(),
        torch.nn.Linear(512, 512),
        torch.nn.ReLU(),
        torch.nn.Linear(512, 10),
    )
    return model, torch.randn(1024, 256), torch.randint(0, 10, (1024,))


def _deep() -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    blocks = [
        torch.nn.Sequential(torch.nn.Linear(384, 384), torch.nn.GELU(), torch.nn.LayerNorm(384))
        for _ in range(6)
    ]
    model = torch.nn.Sequential(*blocks, torch.nn.Linear(384, 10))
    return model, torch.randn(512, 384), torch.randint(0, 10, (512,))


def _conv() -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    def block(i: int, o: int) -> torch.nn.Module:
        return torch.nn.Sequential(
            torch.nn.Conv2d(i, o, 3, padding=1), torch.nn.BatchNorm2d(o), torch.nn.ReLU()
        )

    model = torch.nn.Sequential(
        block(3, 32),
        block(32, 64),
        torch.nn.MaxPool2d(2),
        block(64, 64),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(64, 10),
    )
    return model, torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))


@pytest.mark.parametrize("build", [_mlp, _deep, _conv], ids=["mlp", "deep", "conv"])
@pytest.mark.parametrize("k", [2, 4])
def test_the_predicted_peak_is_the_peak_of_k_micro_batches(build: Any, k: int) -> None:
    torch.manual_seed(0)
    model, x, y = build()
    loss_fn = torch.nn.CrossEntropyLoss()
    model.zero_grad(set_to_none=True)
    step = tracker(torch, record=True)
    with step:
        loss_fn(model(x), y).backward()
    grads = {
        p.grad.untyped_storage().data_ptr(): p.grad.untyped_storage().nbytes()
        for p in model.parameters()
        if p.grad is not None
    }
    figures = figures_of(step.events or [], grads, 1)
    assert figures.grads == sum(p.numel() * 4 for p in model.parameters())

    model.zero_grad(set_to_none=True)
    truth = tracker(torch)
    with truth:
        for xm, ym in zip(x.chunk(k), y.chunk(k)):
            (loss_fn(model(xm), ym) / k).backward()
    assert figures.accumulated_peak(k) == pytest.approx(truth.peak, rel=0.005)
    assert figures.accumulated_peak(k) < figures.peak

"""Accumulation's step-peak prediction from one measured step (stepwatch.figures_of and
StepFigures.accumulated_peak), against the peak of the same model really run in k
micro-batches, both counted op by op by the same tracker (vramscope.optimize.peak), in
process: no kernel needed, the figures are pure functions of the recorded events (with the
moments gradients were accumulated, stepwatch.mark_accumulations, as the step watch records
them). Models: plain, deep with LayerNorm, conv with BatchNorm, a tied embedding (a weight
used twice: its gradient comes in two parts), a step of two forwards, and old gradients
zeroed in place (zero_grad(set_to_none=False))."""

from __future__ import annotations

import pytest
import torch

from vramscope.optimize.peak import tracker
from vramscope.optimize.stepwatch import figures_of, mark_accumulations

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


V = 4000


class _Tied(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(V, 128)
        self.body = torch.nn.Sequential(
            torch.nn.Linear(128, 512), torch.nn.GELU(), torch.nn.Linear(512, 128)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(self.emb(x)) @ self.emb.weight.t()


def _tied() -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    return _Tied(), torch.randint(0, V, (256,)), torch.randint(0, V, (256,))


def _head() -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    model = torch.nn.Sequential(
        torch.nn.Linear(128, 1024), torch.nn.GELU(), torch.nn.Linear(1024, V)
    )
    return model, torch.randn(128, 128), torch.randint(0, V, (128,))


def _loss(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(model(x), y)


def _twice(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return _loss(model, x, y) + _loss(model, x.flip(0), y)


CASES = {
    "mlp": (_mlp, _loss, True),
    "deep": (_deep, _loss, True),
    "conv": (_conv, _loss, True),
    "tied": (_tied, _loss, True),
    "two-forwards": (_head, _twice, True),
    "old-grads": (_head, _loss, False),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("k", [2, 4])
def test_the_predicted_peak_is_the_peak_of_k_micro_batches(case: str, k: int) -> None:
    build, loss_of, set_to_none = CASES[case]
    torch.manual_seed(0)
    model, x, y = build()
    if not set_to_none:
        loss_of(model, x, y).backward()  # gradients from an earlier step
    model.zero_grad(set_to_none=set_to_none)
    step = tracker(torch, record=True)
    hooks = mark_accumulations(model, step)
    with step:
        loss_of(model, x, y).backward()
    for hook in hooks:
        hook.remove()
    made: dict[int, int] = {}
    old: dict[int, int] = {}
    for p in model.parameters():
        storage = p.grad.untyped_storage()
        (made if storage.data_ptr() in step.live else old)[storage.data_ptr()] = storage.nbytes()
    assert (not old) == set_to_none
    figures = figures_of(step.events or [], made, 1, old)

    model.zero_grad(set_to_none=set_to_none)
    truth = tracker(torch)
    with truth:
        for xm, ym in zip(x.chunk(k), y.chunk(k)):
            (loss_of(model, xm, ym) / k).backward()
    assert figures.accumulated_peak(k) == pytest.approx(truth.peak, rel=0.005)


def test_a_parameter_that_refuses_the_hook_is_left_out_without_raising() -> None:
    model = torch.nn.Linear(4, 4)

    def refuse(hook: object) -> None:
        raise RuntimeError("no hooks here")

    model.weight.register_post_accumulate_grad_hook = refuse  # type: ignore[method-assign]
    step = tracker(torch, record=True)
    hooks = mark_accumulations(model, step)
    assert len(hooks) == 1  # the bias's
    with step:
        model(torch.randn(2, 4)).sum().backward()
    for hook in hooks:
        hook.remove()
    bias = model.bias.grad.untyped_storage().data_ptr()  # type: ignore[union-attr]
    assert [key for key, delta in step.events or [] if delta == 0] == [bias]

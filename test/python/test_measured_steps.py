"""Activation tracking measures a forward only when it tells something new: the first call
of each model in a cell, then again on a change of input shapes, dtype/autocast or grad/train
mode; in between every hook is removed (a training loop runs on torch's fast path)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402
from torch.nn.modules import module as nn_module  # noqa: E402

from vramscope.insight import InsightEngine  # noqa: E402

top_hooks = torch._C._autograd._top_saved_tensors_default_hooks


def hooks_in() -> bool:
    """Our global module hooks are registered and our saved-tensor hooks pushed."""
    return bool(nn_module._global_forward_pre_hooks) and top_hooks(False) is not None


class HooksSeen:
    """Records, from inside each forward of ``module``, whether our hooks were in."""

    def __init__(self, module: nn.Module) -> None:
        self.seen: list[bool] = []
        module.register_forward_hook(lambda *_: self.seen.append(hooks_in()))


def mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 8))


def saved_by_step(batch: int) -> int:
    """What this MLP saves for backward, by hand: Linear 0's input x (addmm keeps it for the
    weight's gradient) and the Tanh output (saved by Tanh, and by Linear 2 as its input: one
    storage, counted once)."""
    return batch * 32 * 4 + batch * 64 * 4


@pytest.fixture
def engine() -> Iterator[InsightEngine]:
    ns: dict[str, Any] = {}
    eng = InsightEngine(namespace=ns, min_holder_bytes=1)
    eng.install()
    eng.ns = ns  # type: ignore[attr-defined]
    yield eng
    eng.uninstall()
    assert top_hooks(False) is None and not nn_module._global_forward_pre_hooks


def test_training_loop_measures_the_first_step_then_runs_without_hooks(
    engine: InsightEngine,
) -> None:
    model = mlp()
    engine.ns["model"] = model  # type: ignore[attr-defined]
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    inner = HooksSeen(model[1])
    engine.begin_cell("train", 7)
    assert not hooks_in()  # nothing is in between forwards, not even at a cell's start
    peaks = []
    for step in range(4):
        loss = model(torch.randn(16, 32)).square().mean()
        assert not hooks_in()  # out as soon as the model's forward returned
        if step == 0:
            peaks.append(engine.tracker.total_bytes())
        else:
            assert engine.tracker.total_bytes() == 0  # not measured
        loss.backward()
        opt.step()
        opt.zero_grad()
    assert inner.seen == [True, False, False, False]  # in during the first forward only
    # square() saves its input (the model output) outside the model's forward: not counted
    assert peaks[0] == saved_by_step(16)
    insight = engine.after_cell(1000)
    assert insight["activations_measured"] == {
        "cell_id": "train",
        "execution_count": 7,
        "forward_index": 1,
        "reason": "first",
    }
    assert sum(layer["peak_saved_bytes"] for layer in insight["layers"]) == peaks[0]
    # the next cell measures its first forward again
    engine.begin_cell("again", 8)
    out = model(torch.randn(4, 32))
    assert inner.seen[-1]
    assert engine.tracker.total_bytes() == saved_by_step(4)
    assert engine.after_cell(1000)["activations_measured"]["cell_id"] == "again"
    del out


@pytest.mark.parametrize(
    ("change", "reason"),
    [("shapes", "shapes"), ("dtype", "dtype"), ("autocast", "dtype"), ("eval", "mode")],
)
def test_a_change_is_measured_again_exactly(
    engine: InsightEngine, change: str, reason: str
) -> None:
    model = mlp()
    engine.ns["model"] = model  # type: ignore[attr-defined]
    engine.begin_cell("c", 1)
    model(torch.randn(16, 32)).sum().backward()
    model(torch.randn(16, 32)).sum().backward()  # unchanged: not measured, hooks out
    assert not hooks_in()
    x = torch.randn(16, 32)
    if change == "shapes":
        x = torch.randn(24, 32)
        out = model(x)
        expected = saved_by_step(24)
    elif change == "dtype":
        model.double()
        x = x.double()
        out = model(x)
        expected = 2 * saved_by_step(16)  # float64: twice the bytes
    elif change == "autocast":
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(x)
        # autocast saves bf16 copies (2 bytes) of x, of the weights and of Linear 2's input
        expected = engine.tracker.total_bytes()
        assert expected > 0
    else:
        model.eval()
        out = model(x)
        expected = saved_by_step(16)
    assert engine.tracker.total_bytes() == expected
    measured = engine.after_cell(1000)["activations_measured"]
    assert measured["reason"] == reason and measured["forward_index"] == 3
    del out


def test_no_grad_forward_then_training_forward(engine: InsightEngine) -> None:
    model = mlp()
    engine.begin_cell("c", 1)
    with torch.no_grad():
        model(torch.randn(16, 32))
    out = model(torch.randn(16, 32))  # grad mode changed: measured
    assert engine.tracker.total_bytes() == saved_by_step(16)
    assert engine.after_cell(1000)["activations_measured"]["reason"] == "mode"
    del out


def test_two_models_in_one_cell_each_measured_first(engine: InsightEngine) -> None:
    gen, disc = mlp(), nn.Sequential(nn.Linear(8, 16), nn.Tanh())
    engine.begin_cell("gan", 3)
    for _ in range(3):
        fake = gen(torch.randn(16, 32))
        score = disc(fake)
        score.sum().backward()
    assert not hooks_in()
    fake = gen(torch.randn(16, 32))
    assert engine.tracker.total_bytes() == 0
    info = engine.after_cell(1000)["activations_measured"]
    assert info["forward_index"] == 2  # disc's first call, the last measured
    del fake, score


def test_the_users_saved_tensor_hooks_are_never_overridden(engine: InsightEngine) -> None:
    """Re-arming for a changed forward inside the user's ``save_on_cpu`` (any
    saved_tensors_hooks) must not push ours above theirs."""
    model = mlp()
    engine.begin_cell("c", 1)
    model(torch.randn(16, 32)).sum().backward()
    model(torch.randn(16, 32)).sum().backward()
    assert top_hooks(False) is None
    packed: list[int] = []

    def pack(t: Any) -> Any:
        packed.append(t.numel())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(torch.randn(24, 32))  # shapes changed: would be measured
    assert packed, "the user's pack hook did not run"
    out.sum().backward()
    assert top_hooks(False) is None


def test_kept_graphs_are_all_measured(engine: InsightEngine) -> None:
    """``losses.append(loss)``: no backward frees the previous call's graph, so every call is
    measured (``graph_kept``) and the live count equals a graph walk's, to the byte."""
    model = mlp()
    engine.begin_cell("leak", 4)
    inner = HooksSeen(model[1])
    losses = [model(torch.randn(16, 32)).square().mean() for _ in range(6)]
    assert inner.seen == [True] * 6
    per_step = saved_by_step(16)  # square() keeps the 16x8 output too: outside, not counted
    assert engine.tracker.total_bytes() == 6 * per_step
    measured = engine.after_cell(1000)["activations_measured"]
    assert measured["reason"] == "graph_kept" and measured["forward_index"] == 6
    # after a backward the next call is not measured again
    engine.begin_cell("fixed", 5)
    del losses
    for _ in range(3):
        model(torch.randn(16, 32)).square().mean().backward()
    assert inner.seen[6:] == [True, False, False]
    assert engine.after_cell(1000)["activations_measured"]["forward_index"] == 1

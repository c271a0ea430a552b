"""transforms.py: which module classes call a torch.func transform that refuses saved-tensor
hooks (their forward is not measured, so that it runs as in a plain kernel)."""

from __future__ import annotations

from typing import Any

import torch
import torch.func as tfunc
from torch import nn
from torch.func import hessian, jacfwd, vmap

from vramscope.insight.transforms import calls_refusing_transform


def _refuses(*modules: nn.Module) -> bool:
    return calls_refusing_transform(modules)


class ByAttribute(nn.Module):
    def forward(self, x: torch.Tensor) -> Any:
        return torch.func.grad(lambda p: p.square().sum())(x)


class ByImportedName(nn.Module):
    def forward(self, x: torch.Tensor) -> Any:
        return hessian(lambda p: p.pow(3).sum())(x)


class ByModuleAlias(nn.Module):
    def forward(self, x: torch.Tensor) -> Any:
        return tfunc.vjp(torch.sin, x)[0]


class ByMethod(nn.Module):
    def _jacobian(self, x: torch.Tensor) -> Any:
        return torch.func.jacrev(torch.sin)(x)

    def forward(self, x: torch.Tensor) -> Any:
        return self._jacobian(x)


def _physics_loss(x: torch.Tensor) -> Any:
    return _inner_derivative(x)


def _inner_derivative(x: torch.Tensor) -> Any:
    return torch.func.grad_and_value(lambda p: p.sum())(x)


class ByHelperTwoCallsDeep(nn.Module):
    def forward(self, x: torch.Tensor) -> Any:
        return _physics_loss(x)


def _closure_class() -> type[nn.Module]:
    derivative = torch.func.grad

    class ByClosure(nn.Module):
        def forward(self, x: torch.Tensor) -> Any:
            return derivative(lambda p: p.sum())(x)

    return ByClosure


class ForwardModeOnly(nn.Module):
    """vmap and jacfwd run under saved-tensor hooks."""

    def forward(self, x: torch.Tensor) -> Any:
        return vmap(torch.sin)(x) + jacfwd(torch.sin)(x).sum()


class NamesAlikeNoTransform(nn.Module):
    """``self.func`` and ``.grad``: the names, not torch.func."""

    def __init__(self) -> None:
        super().__init__()
        self.func = nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> Any:
        y = self.func(x)
        return y if x.grad is None else y + x.grad


class ComputedName(nn.Module):
    """A transform reached through a name computed at run time is not seen (documented)."""

    def forward(self, x: torch.Tensor) -> Any:
        return getattr(torch.func, "gr" + "ad")(lambda p: p.sum())(x)


def test_each_way_of_calling_a_refusing_transform_is_seen() -> None:
    for cls in (
        ByAttribute,
        ByImportedName,
        ByModuleAlias,
        ByMethod,
        ByHelperTwoCallsDeep,
        _closure_class(),
    ):
        assert _refuses(cls()), cls.__name__


def test_models_that_call_none_are_measured() -> None:
    plain = nn.Sequential(nn.Linear(2, 4), nn.GELU(), nn.LayerNorm(4), nn.Linear(4, 1))
    assert not _refuses(*plain.modules())
    assert not _refuses(ForwardModeOnly())
    assert not _refuses(NamesAlikeNoTransform())
    assert not _refuses(ComputedName())


def test_a_refusing_submodule_anywhere_in_the_tree_is_enough() -> None:
    model = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Tanh(), ByMethod()))
    assert _refuses(*model.modules())
    assert not _refuses(*model[0].modules())


def test_the_answer_is_the_same_the_second_time_and_never_raises() -> None:
    assert _refuses(ByAttribute()) and _refuses(ByAttribute())

    class Hostile(nn.Module):
        def __getattribute__(self, name: str) -> Any:
            raise RuntimeError("no attribute reads")

    assert calls_refusing_transform([Hostile.__new__(Hostile)]) is False
    assert calls_refusing_transform(iter([None])) is False  # type: ignore[list-item]


def test_the_scanned_transforms_are_the_ones_torch_makes_refuse() -> None:
    """If torch ever lets one of them run under saved-tensor hooks, or adds another that does
    not, this says so: each listed transform raises under hooks, vmap and jacfwd do not."""
    x = torch.randn(3, requires_grad=True)
    calls = {
        "grad": lambda: torch.func.grad(lambda p: p.sin().sum())(x),
        "grad_and_value": lambda: torch.func.grad_and_value(lambda p: p.sin().sum())(x),
        "vjp": lambda: torch.func.vjp(torch.sin, x),
        "jacrev": lambda: torch.func.jacrev(torch.sin)(x),
        "hessian": lambda: torch.func.hessian(lambda p: p.sin().sum())(x),
        "vmap": lambda: torch.func.vmap(torch.sin)(x),
        "jacfwd": lambda: torch.func.jacfwd(torch.sin)(x),
    }
    refused = set()
    for name, call in calls.items():
        with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
            try:
                call()
            except RuntimeError as exc:
                assert "saved tensor hooks" in str(exc)
                refused.add(name)
    from vramscope.insight.transforms import REFUSING

    assert refused == set(REFUSING)

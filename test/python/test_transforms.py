"""transforms.py: which module classes call a torch.func transform that refuses saved-tensor
hooks (their forward is not measured, so that it runs as in a plain kernel)."""

from __future__ import annotations

import functools
import warnings
from typing import Any

import pytest
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


@torch.func.grad
def _decorated(p: torch.Tensor) -> Any:
    return p.square().sum()


_jacobian_of_sin = torch.func.hessian(lambda p: p.sin().sum())


class ByTransformedFunction(nn.Module):
    """A function a transform made at module level (a decorator, or ``f = grad(g)``)."""

    def forward(self, x: torch.Tensor) -> Any:
        return _decorated(x) + _jacobian_of_sin(x).sum()


class _JacobianMixin:
    def jacobian(self, x: torch.Tensor) -> Any:
        return torch.func.jacrev(torch.sin)(x)


class ByMixinAfterModule(nn.Module, _JacobianMixin):
    def forward(self, x: torch.Tensor) -> Any:
        return self.jacobian(x)


class ByDescriptors(nn.Module):
    vjp_of_sin = functools.partial(torch.func.vjp, torch.sin)

    @staticmethod
    def by_static(x: torch.Tensor) -> Any:
        return torch.func.grad(torch.sum)(x)

    def forward(self, x: torch.Tensor) -> Any:
        return self.by_static(x)


class ByProperty(nn.Module):
    @property
    def derivative(self) -> Any:
        return torch.func.jacrev(torch.sin)

    def forward(self, x: torch.Tensor) -> Any:
        return self.derivative(x)


class ByCachedProperty(nn.Module):
    @functools.cached_property
    def derivative(self) -> Any:
        return torch.func.jacrev(torch.sin)

    def forward(self, x: torch.Tensor) -> Any:
        return self.derivative(x)


def _far(x: torch.Tensor) -> Any:
    return _farther(x)


def _farther(x: torch.Tensor) -> Any:
    return torch.func.grad(torch.sum)(x)


def _a(x: torch.Tensor) -> Any:
    return _b(x)


def _b(x: torch.Tensor) -> Any:
    return _c(x)


def _c(x: torch.Tensor) -> Any:
    return _far(x)


class ByHelperReachedTwice(nn.Module):
    """``_far`` is first reached with no depth left (through ``first``), then from forward."""

    def first(self, x: torch.Tensor) -> Any:
        return _a(x)

    def forward(self, x: torch.Tensor) -> Any:
        return _far(x)


def test_each_way_of_calling_a_refusing_transform_is_seen() -> None:
    for cls in (
        ByAttribute,
        ByImportedName,
        ByModuleAlias,
        ByMethod,
        ByHelperTwoCallsDeep,
        _closure_class(),
        ByTransformedFunction,
        ByMixinAfterModule,
        ByDescriptors,
        ByProperty,
        ByCachedProperty,
        ByHelperReachedTwice,
    ):
        assert _refuses(cls()), cls.__name__


def test_functorchs_own_names_are_seen_and_reading_them_warns_nothing() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        functorch = pytest.importorskip("functorch")

    class ByFunctorch(nn.Module):
        def forward(self, x: torch.Tensor) -> Any:
            return functorch.vjp(torch.sin, x)[0]

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert _refuses(ByFunctorch())
    assert seen == []


grad = torch.func.grad  # a global named like a local below


def jacobian(f: Any, x: torch.Tensor) -> Any:  # a helper named like an attribute below
    return torch.func.jacrev(f)(x)


class LocalsAndAttributesNamedLikeTransforms(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.func = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> Any:
        grad = self.func(x)  # a local, captured by the lambda: not the global
        (dx,) = torch.autograd.grad(grad.sum(), x, create_graph=True)
        return (lambda: grad + dx)() + torch.autograd.functional.jacobian(torch.sin, x).sum()


def test_models_that_call_none_are_measured() -> None:
    plain = nn.Sequential(nn.Linear(2, 4), nn.GELU(), nn.LayerNorm(4), nn.Linear(4, 1))
    assert not _refuses(*plain.modules())
    assert not _refuses(ForwardModeOnly())
    assert not _refuses(NamesAlikeNoTransform())
    assert not _refuses(ComputedName())
    assert not _refuses(LocalsAndAttributesNamedLikeTransforms())


def test_a_helper_rebound_or_a_forward_replaced_is_read_again() -> None:
    """As in a notebook: a later cell redefines the helper a model calls, or its forward."""
    namespace: dict[str, Any] = {"torch": torch, "nn": nn, "__name__": "cells"}
    exec(
        "def helper(x):\n    return x * 2\n"
        "class Net(nn.Module):\n"
        "    def forward(self, x):\n        return helper(x)\n",
        namespace,
    )
    net = namespace["Net"]()
    assert not _refuses(net) and not _refuses(net)  # the second answer from the cache
    exec("def helper(x):\n    return torch.func.grad(torch.sum)(x)\n", namespace)
    assert _refuses(net)
    exec("def helper(x):\n    return x\n", namespace)
    assert not _refuses(net)
    exec("def _forward(self, x):\n    return torch.func.jacrev(torch.sin)(x)\n", namespace)
    namespace["Net"].forward = namespace["_forward"]
    assert _refuses(net)


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

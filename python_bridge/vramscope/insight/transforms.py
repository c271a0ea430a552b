"""Which models call a ``torch.func`` transform that refuses saved-tensor hooks.

``torch.func.grad``, ``grad_and_value``, ``vjp``, ``jacrev`` and ``hessian`` raise ("don't yet
support saved tensor hooks") when they start while any saved-tensor hooks are pushed, and a
measured forward pushes ours. A model whose own forward calls one of them (a physics-informed
network's derivative, a meta-learning inner step) would fail with vramscope loaded and work
without it, so such a forward is not measured.

Whether a forward calls a transform is read from its code before it runs: the names the code
refers to (``co_names``, ``co_freevars``' cells, nested code objects such as lambdas), resolved
in the function's globals and closure. Read per module class, on the class's own methods (a
forward that calls ``self._jacobian(x)``) and on the plain functions of the class's module
that those call (a ``physics_loss(model, x)`` helper), a few calls deep; cached by class. A
transform reached only through another module's code, or through a name computed at run time,
is not seen: that forward fails as it would have before this check.
"""

from __future__ import annotations

import builtins
import sys
import types
import weakref
from collections.abc import Iterable
from typing import Any

import torch

#: The transforms that refuse saved-tensor hooks (``torch._functorch``'s
#: ``doesnt_support_saved_tensors_hooks``), by name.
REFUSING = ("grad", "grad_and_value", "vjp", "jacrev", "hessian")

_REFUSING = frozenset(REFUSING)
_MODULES = frozenset({"torch.func", "functorch"})

#: How many calls deep into plain functions of the class's module the scan follows.
_DEPTH = 3

_CACHE: weakref.WeakKeyDictionary[type, bool] = weakref.WeakKeyDictionary()
_OBJECTS: set[int] = set()


def _transform_ids() -> set[int]:
    """The ids of the refusing transforms as torch exports them (once)."""
    if not _OBJECTS:
        for module in (
            getattr(torch, "func", None),
            sys.modules.get("torch._functorch.apis"),
            sys.modules.get("torch._functorch.eager_transforms"),
        ):
            for name in REFUSING:
                obj = getattr(module, name, None)
                if callable(obj):
                    _OBJECTS.add(id(obj))
    return _OBJECTS


def calls_refusing_transform(tree: Iterable[torch.nn.Module]) -> bool:
    """Whether the code of a module class in ``tree`` calls a refusing ``torch.func`` transform."""
    try:
        return any(map(_class_calls, set(map(type, tree))))
    except Exception:
        return False


def _class_calls(cls: type) -> bool:
    hit = _CACHE.get(cls)
    if hit is None:
        hit = _scan_class(cls)
        _CACHE[cls] = hit
    return hit


def _scan_class(cls: type) -> bool:
    targets = _transform_ids()
    seen: set[int] = set()
    home = cls.__module__
    for klass in cls.__mro__:
        if klass is torch.nn.Module or klass is object:
            break
        if klass.__module__.startswith("torch.nn."):
            continue  # torch's own layers call no transform
        for attr in vars(klass).values():
            fn = attr.__func__ if isinstance(attr, (staticmethod, classmethod)) else attr
            if isinstance(fn, types.FunctionType) and _function_calls(
                fn, targets, seen, home, _DEPTH
            ):
                return True
    return False


def _function_calls(
    fn: types.FunctionType, targets: set[int], seen: set[int], home: str, depth: int
) -> bool:
    if id(fn) in seen:
        return False
    seen.add(id(fn))
    closure: dict[str, Any] = {}
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            closure[name] = cell.cell_contents
        except ValueError:  # an empty cell
            continue
    return _code_calls(fn.__code__, (closure, fn.__globals__), targets, seen, home, depth)


def _code_calls(
    code: types.CodeType,
    scopes: tuple[dict[str, Any], dict[str, Any]],
    targets: set[int],
    seen: set[int],
    home: str,
    depth: int,
) -> bool:
    names = code.co_names + code.co_freevars
    by_attribute = not _REFUSING.isdisjoint(names)
    if by_attribute and ({"torch", "func"}.issubset(names) or "functorch" in names):
        return True  # torch.func.grad(...), functorch.vjp(...)
    for name in names:
        obj = _lookup(name, scopes)
        if obj is None:
            continue
        if id(obj) in targets:
            return True  # from torch.func import jacrev; jacrev(...)
        if by_attribute and isinstance(obj, types.ModuleType) and obj.__name__ in _MODULES:
            return True  # import torch.func as tf; tf.hessian(...)
        if (
            depth > 0
            and isinstance(obj, types.FunctionType)
            and getattr(obj, "__module__", None) == home
            and _function_calls(obj, targets, seen, home, depth - 1)
        ):
            return True  # a helper of the model's own module
    for const in code.co_consts:
        if isinstance(const, types.CodeType) and _code_calls(
            const, scopes, targets, seen, home, depth
        ):
            return True  # a lambda or a nested function
    return False


def _lookup(name: str, scopes: tuple[dict[str, Any], dict[str, Any]]) -> Any:
    """What ``name`` is bound to for a function: its closure, its globals, then builtins."""
    closure, globals_ = scopes
    if name in closure:
        return closure[name]
    if name in globals_:
        return globals_[name]
    return getattr(builtins, name, None)

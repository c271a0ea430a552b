"""What a batch-size finder's step can change: the models, optimizers and LR schedulers it
reaches.

From the step function's names (the globals and closure variables its code uses, its
defaults, a bound method's object, a ``functools.partial``'s arguments, the functions it
calls, walked the same way) and the objects passed to the finder, attributes and container
items are followed a few levels deep, so ``trainer.model``, ``trainer.optimizer`` and
``state["sched"]`` are found. Each object comes with the path it was found by. LR schedulers
bound to a found optimizer that nothing above reaches are found through the garbage
collector's referrers of that optimizer (one scan, ~0.1 s in a kernel with torch loaded).

A model inside another found model is dropped (the outer one covers it).
"""

from __future__ import annotations

import collections
import functools
import gc
import inspect
import types
from dataclasses import dataclass, field
from typing import Any, Callable

MAX_DEPTH = 4
MAX_OBJECTS = 4000
MAX_ITEMS = 256
_ATOMS = (str, bytes, int, float, complex, bool, type(None), range, slice)


@dataclass
class Reached:
    models: list[tuple[str, Any]] = field(default_factory=list)
    optimizers: list[tuple[str, Any]] = field(default_factory=list)
    schedulers: list[tuple[str, Any]] = field(default_factory=list)


def is_scheduler(torch: Any, value: Any) -> bool:
    sched = getattr(torch.optim.lr_scheduler, "LRScheduler", None)
    if sched is not None and isinstance(value, sched):
        return True
    plateau = getattr(torch.optim.lr_scheduler, "ReduceLROnPlateau", None)
    return plateau is not None and isinstance(value, plateau)


class _Walk:
    """Breadth first: the shallow paths (``trainer.model``) are found before the cap."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.found = Reached()
        self.seen: set[int] = set()
        self.queue: collections.deque[tuple[str, Any, int]] = collections.deque()

    def run(self) -> None:
        while self.queue and len(self.seen) < MAX_OBJECTS:
            self.value(*self.queue.popleft())

    def value(self, path: str, value: Any, depth: int) -> None:
        if isinstance(value, _ATOMS) or id(value) in self.seen:
            return
        self.seen.add(id(value))
        torch = self.torch
        if isinstance(value, torch.Tensor):
            return
        if isinstance(value, torch.nn.Module):
            self.found.models.append((path, value))
            return
        if isinstance(value, torch.optim.Optimizer):
            self.found.optimizers.append((path, value))
            return
        if is_scheduler(torch, value):
            self.found.schedulers.append((path, value))
            self.queue.append((f"{path}.optimizer", _attrs(value).get("optimizer"), depth + 1))
            return
        if depth >= MAX_DEPTH or isinstance(value, (types.ModuleType, type)):
            return
        if isinstance(value, (types.FunctionType, types.MethodType, functools.partial)):
            items = _function_refs(value)
        elif isinstance(value, dict):
            items = [(f"{path}[{k!r}]", v) for k, v in list(value.items())[:MAX_ITEMS]]
        elif isinstance(value, (list, tuple, set, frozenset)):
            items = [(f"{path}[{i}]", v) for i, v in enumerate(list(value)[:MAX_ITEMS])]
        else:
            items = [(f"{path}.{k}", v) for k, v in list(_attrs(value).items())[:MAX_ITEMS]]
        self.queue.extend((p, v, depth + 1) for p, v in items)


def _attrs(value: Any) -> dict[str, Any]:
    """An object's instance attributes (no properties run)."""
    try:
        found = object.__getattribute__(value, "__dict__")
    except Exception:
        return {}
    return found if isinstance(found, dict) else {}


def _function_refs(fn: Any) -> list[tuple[str, Any]]:
    refs: list[tuple[str, Any]] = []
    if isinstance(fn, functools.partial):
        refs += [(f"<partial arg {i}>", a) for i, a in enumerate(fn.args)]
        refs += list(fn.keywords.items())
        refs += _function_refs(fn.func)
        return refs
    owner = getattr(fn, "__self__", None)
    if owner is not None and not isinstance(owner, types.ModuleType):
        refs.append(("self", owner))
    func = getattr(fn, "__func__", fn)
    if not isinstance(func, types.FunctionType):
        if not isinstance(fn, types.BuiltinFunctionType):
            refs.append((type(fn).__name__, fn))  # a callable object: its attributes
        return refs
    try:
        names = inspect.getclosurevars(func)
        refs += list(names.nonlocals.items()) + list(names.globals.items())
    except Exception:
        pass
    refs += [(f"<default {i}>", d) for i, d in enumerate(func.__defaults__ or ())]
    refs += list((func.__kwdefaults__ or {}).items())
    return refs


def reach(torch: Any, step_fn: Callable[..., Any], given: dict[str, Any]) -> Reached:
    """The models, optimizers and schedulers ``step_fn`` (and ``given``: name -> object)
    reaches."""
    walk = _Walk(torch)
    walk.queue.extend((name, value, 0) for name, value in given.items())
    walk.queue.extend((name, value, 0) for name, value in _function_refs(step_fn))
    walk.run()
    found = walk.found
    found.models = _outermost(found.models)
    bound = {id(_attrs(s).get("optimizer")) for _, s in found.schedulers}
    unbound = [o for _, o in found.optimizers if id(o) not in bound]
    if unbound:
        found.schedulers += schedulers_of(torch, unbound, walk.seen)
    return found


def _outermost(models: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    inner: set[int] = set()
    for _, model in models:
        inner.update(id(m) for m in model.modules() if m is not model)
    return [(path, m) for path, m in models if id(m) not in inner]


def schedulers_of(torch: Any, optimizers: list[Any], seen: set[int]) -> list[tuple[str, Any]]:
    """LR schedulers bound to these optimizers that no name reaches (the gc's referrers)."""
    found: list[tuple[str, Any]] = []
    wanted = {id(o) for o in optimizers}
    for ref in gc.get_referrers(*optimizers):
        owners = [ref] if not isinstance(ref, dict) else gc.get_referrers(ref)
        for owner in owners:
            if id(owner) in seen or not is_scheduler(torch, owner):
                continue
            if id(_attrs(owner).get("optimizer")) in wanted:
                seen.add(id(owner))
                found.append((f"<{type(owner).__name__} of the optimizer>", owner))
    return found

"""Which modules are models: the roots whose forwards the activation tracker may measure.

No global module forward hook is ever left in (those put every module call on torch's slow
path, and ``torch.compile`` warns about them and traces them). Instead the global module and
parameter *registration* hooks (called when a module or a parameter is assigned to a module,
which is how models are built) keep one forward pre-hook and one forward hook on each module
that has children or parameters and is no other's child: the outermost module of every model
built since the bridge was loaded. A module assigned as a child loses its hooks, except the
direct children of a LightningModule, whose ``training_step`` may call them without calling
``self(...)`` (step_roots: inside the module's own forward they are nested, not measured
apart). Models built before the bridge, and modules with neither children nor parameters, are
adopted from the namespace at a cell's start (only until Dynamo first compiles something: a
hook added to a module already traced would make Dynamo compile it again).

A compiled model carries none of them: Dynamo traces a module's hooks into its graph (a
``torch.nn.Sequential`` compiled with a hook gives a graph where it gives none without) and
compiles again when they change. ``torch.compile(model)`` assigns the model as the child of the
``OptimizedModule`` it makes, so the registration hook takes the model's hooks off before
anything is compiled, and puts none on the wrapper; ``model.compile()`` is seen at the next
cell's start (a model compiled and first run in one cell is traced with its hooks). Compiled
models are not measured (:attr:`RootWatch.compiled` counts them for the panel's note).

Both hooks begin with ``torch.compiler.is_compiling()``: traced by Dynamo they are nothing.
They live in the model's hook dicts, so they travel with it: ``copy.deepcopy(model)`` keeps
them (the copy is a model too), and pickling a whole model (``torch.save(model)``) writes each
as ``functools.partial(sys.audit, "vramscope.hook")``, a no-op that loads without vramscope.
Only weakrefs to modules are kept.
"""

from __future__ import annotations

import functools
import sys
import weakref
from collections.abc import Iterable
from typing import Any, Callable, Optional

import torch

from ..compiled import dynamo_ran, is_compile_wrapper, is_compiled
from ..step_roots import forward_roots, trains_by_step

#: Containers without a forward. One outside every model that takes in a module already part
#: of one is a regrouping, not a model being built: a forward that slices its ModuleList (the
#: Llama family's ``self.layers[: n]``, at every step) makes one and registers every layer in
#: it. No model's tree changes (``registrations`` stays: no walk after the cell), and the
#: container gets no hooks (it cannot be called); it cost ~6 us a layer at every forward.
#: So, as for any model, a change that fires no registration hook made after the cell's
#: measured forward (``del model.layers[i]``, ``pop``) shows in the rows once a later cell's
#: forward is measured (engine._refill); the count moved at every forward before, which hid
#: that gap for these models only.
_CONTAINERS = (torch.nn.ModuleList, torch.nn.ModuleDict)

PreHook = Callable[[torch.nn.Module, Any, Any], None]
PostHook = Callable[[torch.nn.Module, Any, Any], None]
FollowPre = Callable[[torch.nn.Module, Any], None]


class RootWatch:
    def __init__(self, pre: PreHook, post: PostHook) -> None:
        self._pre = pre
        self._post = post
        self._registration: list[Any] = []
        self._children: weakref.WeakSet[Any] = weakref.WeakSet()  # modules assigned as children
        self._parts_known: weakref.WeakSet[Any] = weakref.WeakSet()  # models _adopt_parts walked
        #: id(module) -> (weakref, pre-hook handle, post-hook handle)
        self._hooks: dict[int, tuple[Any, Any, Any]] = {}
        #: compiled models seen (their hooks taken off; not measured)
        self.compiled: weakref.WeakSet[Any] = weakref.WeakSet()
        #: id(module) -> (pre, post) called from its hooks after the tracker's (step watch)
        self._followers: dict[int, tuple[FollowPre, PostHook]] = {}
        #: id(child of a LightningModule) -> id(that module); forwards running, by id
        self._nested_in: dict[int, int] = {}
        self._running: dict[int, int] = {}
        #: calls of the registration hooks so far (a module or parameter assigned anywhere)
        self.registrations = 0

    def install(self) -> None:
        if not self._registration:
            from torch.nn.modules import module as nn_module

            self._registration = [
                nn_module.register_module_module_registration_hook(self._registered),
                nn_module.register_module_parameter_registration_hook(self._parameter),
            ]

    def uninstall(self) -> None:
        for handle in self._registration:
            handle.remove()
        self._registration = []
        for _ref, pre, post in self._hooks.values():
            pre.remove()
            post.remove()
        self._hooks.clear()
        self._followers.clear()
        self._nested_in.clear()
        self._running.clear()

    def follow(self, module: torch.nn.Module, pre: FollowPre, post: PostHook) -> Callable[[], None]:
        """Call ``pre(module, args)`` and ``post(module, args, output)`` from ``module``'s
        forward hooks (watching it if it is not a root) until the returned function is
        called or the module is compiled. Raises ValueError for a compiled model."""
        if is_compiled(module):
            raise ValueError("a torch.compile'd model is not measured op by op")
        if not self.watched(module):
            self._add(module)
        mid = id(module)
        self._followers[mid] = (pre, post)
        return lambda: self._followers.pop(mid, None) and None

    def watched(self, module: torch.nn.Module) -> bool:
        entry = self._hooks.get(id(module))
        return entry is not None and entry[0]() is module

    def module(self, mid: int) -> Optional[torch.nn.Module]:
        """The watched module of this id, while it lives."""
        entry = self._hooks.get(mid)
        return entry[0]() if entry is not None else None

    def adopt(self, values: Iterable[Any]) -> None:
        """At a cell's start: stop watching models compiled since (``model.compile()``), and
        watch the modules among ``values`` (the namespace's) not watched yet."""
        for ref, _pre, _post in list(self._hooks.values()):
            module = ref()
            if module is not None and is_compiled(module):
                self._remove(module, compiled=True)
                self.compiled.add(module)
        if dynamo_ran():
            return
        for value in values:
            if not isinstance(value, torch.nn.Module):
                continue
            for module in forward_roots(value):
                if not self.watched(module) and not is_compiled(module):
                    if module is value:
                        self._add(module)
                        self._adopt_parts(module)
                    else:
                        self._add_nested(value, module)

    def _adopt_parts(self, model: torch.nn.Module) -> None:
        """The parts of a model built before the bridge are children, as those of a model
        built since are (the registration hook saw them assigned): regrouping them
        (``_CONTAINERS``) or giving one a parameter does not make it a model. One walk per
        model, the first time it is adopted (a model wrapped anew in every cell is adopted
        again at each); parts it gets later come through the registration hook."""
        try:
            if model in self._parts_known:
                return
            self._parts_known.add(model)
            parts = iter(model.modules())
            next(parts, None)  # the model itself
            self._children.update(parts)
        except Exception:
            pass

    def prune(self) -> set[int]:
        """Forget dead modules; returns the ids still watched."""
        for mid in [m for m, entry in self._hooks.items() if entry[0]() is None]:
            del self._hooks[mid]
            self._nested_in.pop(mid, None)
        return set(self._hooks)

    # -- the registration hook (inside the user's model construction: never raise) ------

    def _registered(self, module: Any, _name: str, submodule: Any) -> None:
        try:
            if (
                type(module) in _CONTAINERS
                and submodule in self._children
                and module not in self._children
                and not self.watched(module)
            ):
                return None  # a part regrouped outside every model: see _CONTAINERS
        except Exception:  # an unhashable module: counted as any registration
            pass
        self.registrations += 1
        try:
            if isinstance(submodule, torch.nn.Module):
                if is_compile_wrapper(module):
                    self._remove(submodule, compiled=True)
                    self.compiled.add(submodule)
                    return None
                if id(submodule) not in self._followers:  # followed: it keeps its hooks
                    self._remove(submodule)
                self._children.add(submodule)
                if trains_by_step(module):  # its training_step may call the child itself
                    self._add_nested(module, submodule)
                if not self.watched(module) and module not in self._children:
                    self._add(module)
        except Exception:
            pass
        return None

    def _parameter(self, module: Any, _name: str, param: Any) -> None:
        self.registrations += 1
        try:
            if param is not None and not self.watched(module) and module not in self._children:
                self._add(module)
        except Exception:
            pass
        return None

    def _add_nested(self, parent: torch.nn.Module, child: torch.nn.Module) -> None:
        """Hooks on ``child`` of a LightningModule: measured when called on its own, a nested
        call (neither measured apart nor counted) while ``parent``'s forward runs."""
        self._add(child)
        self._nested_in[id(child)] = id(parent)

    def _nested(self, module: torch.nn.Module) -> bool:
        parent = self._nested_in.get(id(module))
        return parent is not None and self._running.get(parent, 0) > 0

    def _add(self, module: torch.nn.Module) -> None:
        self._remove(module)
        pre = module.register_forward_pre_hook(_Hook(self._on_pre), with_kwargs=True)
        post = module.register_forward_hook(_Hook(self._on_post), always_call=True)
        self._hooks[id(module)] = (weakref.ref(module), pre, post)

    def _remove(self, module: torch.nn.Module, compiled: bool = False) -> None:
        entry = self._hooks.pop(id(module), None)
        if entry is not None:
            entry[1].remove()
            entry[2].remove()
        if compiled or entry is None or entry[0]() is not module:
            self._followers.pop(id(module), None)

    # -- the hooks on each model (inside the user's forward) -------------------------------

    def _on_pre(self, module: torch.nn.Module, args: Any, kwargs: Any) -> None:
        if torch.compiler.is_compiling():
            return  # traced by Dynamo: nothing in the graph
        if _tracing_state() is not None:
            return  # torch.jit.trace: its tracer would warn about our reads
        mid = id(module)
        self._running[mid] = self._running.get(mid, 0) + 1
        if not self._nested(module):
            self._pre(module, args, kwargs)
        follower = self._followers.get(mid)
        if follower is not None:
            follower[0](module, args)

    def _on_post(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        if torch.compiler.is_compiling() or _tracing_state() is not None:
            return
        mid = id(module)
        follower = self._followers.get(mid)
        if follower is not None:
            follower[1](module, args, output)
        if not self._nested(module):
            self._post(module, args, output)
        left = self._running.get(mid, 1) - 1
        if left > 0:
            self._running[mid] = left
        else:
            self._running.pop(mid, None)


_tracing_state = torch._C._get_tracing_state


class _Hook:
    """A hook in a model's hook dict: deep-copied as itself, pickled as a no-op that needs
    nothing but the standard library (a model saved whole must load without vramscope)."""

    __slots__ = ("_fn",)

    def __init__(self, fn: Callable[..., None]) -> None:
        self._fn = fn

    def __call__(self, *args: Any) -> None:
        self._fn(*args)

    def __deepcopy__(self, memo: Any) -> _Hook:
        return self

    def __reduce__(self) -> Any:
        return (functools.partial, (sys.audit, "vramscope.hook"))

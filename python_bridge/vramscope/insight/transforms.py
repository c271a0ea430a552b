"""Which models call a ``torch.func`` transform that refuses saved-tensor hooks.

``torch.func.grad``, ``grad_and_value``, ``vjp``, ``jacrev`` and ``hessian`` (and functorch's
older ``grad``/``vjp``...) raise ("don't yet support saved tensor hooks") when they start
while any saved-tensor hooks are pushed, and a measured forward pushes ours. A model whose own
code calls one of them (a physics-informed network's derivatives, a meta-learning inner step)
would fail with vramscope loaded and work without it, so such a forward is not measured.

Whether it does is read from the code of its module classes before the forward runs, as
Python would resolve it, instruction by instruction: a global or closure name bound to a
transform (``from torch.func import jacrev``), an attribute chain from torch's modules
(``torch.func.grad``, ``tf.hessian``, ``functorch.vjp``), a function a transform made
(``dfdx = torch.func.grad(f)`` at module level, or as a decorator), a ``functools.partial`` of
one. Reading starts at the class's ``forward`` and follows what it reaches: ``self.<name>``
methods, properties, cached properties and partial methods of the class and its bases (a
mixin included; torch's own left out), the lambdas and nested functions in them, and the plain
functions of the class's own module that they call, three calls deep. Attribute names
(``self.loss``) are never looked up as globals. The answer is cached by class and read again
when a method of the class is added, removed or its ``forward`` replaced, or a helper it calls
(or a name it looked for and did not find) is bound to something else.

Not seen (that forward fails as it would have before this check): a transform reached only
through another package's code, a name computed at run time (``getattr(torch.func, name)``),
a transform kept on the instance (``self.g = torch.func.grad(f)`` in ``__init__``) or in
another object of the user's, a ``forward`` assigned to one instance.
"""

from __future__ import annotations

import dis
import functools
import os
import sys
import types
import weakref
from collections.abc import Iterable, Iterator
from typing import Any, Optional

import torch

#: The transforms that refuse saved-tensor hooks (``torch._functorch``'s
#: ``doesnt_support_saved_tensors_hooks``), by name.
REFUSING = ("grad", "grad_and_value", "vjp", "jacrev", "hessian")

#: Modules that export them: ``torch.func``'s own, and functorch's deprecated copies.
_EXPORTERS = (
    "torch.func",
    "torch._functorch.apis",
    "torch._functorch.eager_transforms",
    "torch._functorch.deprecated",
    "functorch",
)

#: How many calls deep into plain functions of the class's module the scan follows.
_DEPTH = 3

_MISSING = object()
_FUNCTORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep + "_functorch"


class _Known:
    """The transforms' ids and the code of the functions they return, read from torch once
    (again when functorch is imported later)."""

    def __init__(self) -> None:
        self.ids: set[int] = set()
        self.codes: set[types.CodeType] = set()
        self.exporters: tuple[str, ...] = ()

    def refresh(self) -> None:
        present = tuple(name for name in _EXPORTERS if name in sys.modules)
        if present == self.exporters:
            return
        self.exporters = present
        for module_name in present:
            module = sys.modules[module_name]
            for name in REFUSING:
                fn = getattr(module, name, None)
                if not callable(fn):
                    continue
                self.ids.add(id(fn))  # kept alive by torch's modules: ids are not reused
                # torch.func's (functorch's deprecated copies warn, and return the same)
                if module_name == "torch.func" and name in ("grad", "grad_and_value", "jacrev"):
                    try:
                        made = fn(_identity)  # a wrapper only: nothing is computed
                    except Exception:
                        continue
                    if type(made) is types.FunctionType:
                        self.codes.add(made.__code__)


def _identity(x: Any) -> Any:
    return x


_KNOWN = _Known()


_SELF = object()  # the loaded name is the method's ``self``


class _Scan:
    """One class's scan: where helpers are followed, what was looked at, what was bound."""

    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.home = cls.__module__
        self.depths: dict[int, int] = {}  # id(function) -> the most depth it was read with
        #: (a function of the scan, a global name it looked up, id of what it found or 0)
        self.bindings: list[tuple[weakref.ref[Any], str, int]] = []


class _Entry:
    __slots__ = ("bindings", "refuses", "stamp")

    def __init__(self, refuses: bool, stamp: tuple[Any, ...], bindings: list[Any]) -> None:
        self.refuses = refuses
        self.stamp = stamp
        self.bindings = bindings


_CACHE: weakref.WeakKeyDictionary[type, _Entry] = weakref.WeakKeyDictionary()


def calls_refusing_transform(tree: Iterable[torch.nn.Module]) -> bool:
    """Whether the code of a module class in ``tree`` calls a refusing ``torch.func``
    transform. Never raises (False)."""
    try:
        _KNOWN.refresh()
        return any(map(_class_calls, set(map(type, tree))))
    except Exception:
        return False


def _class_calls(cls: type) -> bool:
    entry = _CACHE.get(cls)
    if entry is None or entry.stamp != _stamp(cls) or not _still_bound(entry.bindings):
        scan = _Scan(cls)
        refuses = _scan_class(scan)
        entry = _CACHE[cls] = _Entry(refuses, _stamp(cls), scan.bindings)
    return entry.refuses


def _not_users(klass: type) -> bool:
    """``object`` or a class of torch's own: its code is not read."""
    module = getattr(klass, "__module__", "") or ""
    return klass is object or module == "torch" or module.startswith("torch.")


def _own_classes(cls: type) -> Iterator[type]:
    """The classes of ``cls``'s MRO whose code is the user's (torch's own left out; a mixin
    after ``nn.Module`` included)."""
    return (klass for klass in cls.__mro__ if not _not_users(klass))


def _stamp(cls: type) -> tuple[Any, ...]:
    """Changes when a method is added to or removed from the class or its bases, or its
    ``forward`` is replaced."""
    return tuple(
        (len(klass.__dict__), id(klass.__dict__.get("forward"))) for klass in _own_classes(cls)
    )


def _still_bound(bindings: list[tuple[weakref.ref[Any], str, int]]) -> bool:
    for ref, name, found in bindings:
        fn = ref()
        if fn is None:
            return False
        value = fn.__globals__.get(name, _MISSING)
        if (0 if value is _MISSING else id(value)) != found:
            return False
    return True


def _scan_class(scan: _Scan) -> bool:
    """Read the class's ``forward`` (as Python resolves it; none of the user's: nothing to
    read), and what it reaches."""
    return _method_calls(scan, "forward", _DEPTH)


def _method_calls(scan: _Scan, name: str, depth: int) -> bool:
    """The class attribute ``name`` (a method, a property... reached as ``self.name``) is or
    calls a refusing transform; torch's own attributes are not read."""
    for klass in scan.cls.__mro__:
        attr = klass.__dict__.get(name, _MISSING)
        if attr is _MISSING:
            continue
        if _not_users(klass):
            return False
        return any(_refuses(obj, scan, depth, method=True) for obj in _unwrapped(attr))
    return False


def _unwrapped(attr: Any) -> Iterator[Any]:
    """The callables a class attribute holds: a method's function, a property's getter, a
    cached property's or partial method's function, the attribute itself."""
    kind = type(attr)
    if kind is staticmethod or kind is classmethod:
        yield attr.__func__
    elif kind is property:
        yield attr.fget
    elif kind is functools.cached_property or kind is functools.partialmethod:
        yield attr.func
    else:
        yield attr


def _refuses(obj: Any, scan: _Scan, depth: int, method: bool = False) -> bool:
    """``obj`` is a refusing transform, a function one made, a partial of one, or a function
    (a method of the class, or a helper of its module with ``depth`` left) that calls one."""
    if id(obj) in _KNOWN.ids:
        return True
    kind = type(obj)
    if kind is functools.partial:
        return _refuses(obj.func, scan, depth)
    if kind is not types.FunctionType:
        return False
    if _made_by_transform(obj, 3):
        return True
    if method:
        return _function_calls(obj, scan, depth, method=True)
    if depth > 0 and obj.__module__ == scan.home:
        return _function_calls(obj, scan, depth - 1)
    return False


def _made_by_transform(fn: types.FunctionType, depth: int) -> bool:
    """``fn`` is what ``grad``/``grad_and_value``/``jacrev`` returned, or a wrapper of torch's
    functorch around one (``hessian`` is ``jacfwd(jacrev(f))``)."""
    code = fn.__code__
    if code in _KNOWN.codes:
        return True
    if depth <= 0 or not code.co_filename.startswith(_FUNCTORCH_DIR):
        return False
    for cell in fn.__closure__ or ():
        try:
            inner = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if type(inner) is types.FunctionType and _made_by_transform(inner, depth - 1):
            return True
    return False


def _function_calls(fn: types.FunctionType, scan: _Scan, depth: int, method: bool = False) -> bool:
    if scan.depths.get(id(fn), -1) >= depth:
        return False  # read already, with as much depth left
    scan.depths[id(fn)] = depth
    closure: dict[str, Any] = {}
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            closure[name] = cell.cell_contents
        except ValueError:  # an empty cell
            continue
    code = fn.__code__
    self_name = code.co_varnames[0] if method and code.co_argcount else None
    return _code_calls(code, fn, closure, self_name, scan, depth)


def _code_calls(
    code: types.CodeType,
    fn: types.FunctionType,
    closure: Optional[dict[str, Any]],
    self_name: Optional[str],
    scan: _Scan,
    depth: int,
) -> bool:
    """Walk ``code``'s instructions: each name load and the attribute chain after it.
    ``closure`` is None in nested code (its free names are the enclosing function's locals,
    ``self_name`` among them: a lambda's ``self.net``)."""
    current: Any = _MISSING
    for ins in dis.get_instructions(code):
        op = ins.opname
        if op == "LOAD_GLOBAL" or op == "LOAD_NAME":
            current = _global(fn, str(ins.argval), scan)
        elif op.startswith("LOAD_FAST") or op == "LOAD_DEREF":
            name = ins.argval
            if name == self_name and (
                # the method's own self (a cell when a lambda captures it), a lambda's capture
                (closure is not None and (op != "LOAD_DEREF" or name in code.co_cellvars))
                or (closure is None and op == "LOAD_DEREF" and name in code.co_freevars)
            ):
                current = _SELF
            elif op == "LOAD_DEREF" and closure is not None:
                current = closure.get(name, _MISSING)
            else:
                current = _MISSING
        elif op == "LOAD_ATTR" or op == "LOAD_METHOD":
            if current is _SELF:
                if _method_calls(scan, str(ins.argval), depth):
                    return True  # self._jacobian(x), self.derivative
                current = _MISSING
                continue
            current = _attribute(current, str(ins.argval))
        else:
            current = _MISSING
            continue
        if current is not _MISSING and current is not _SELF and _refuses(current, scan, depth):
            return True
    for const in code.co_consts:
        if type(const) is types.CodeType and _code_calls(const, fn, None, self_name, scan, depth):
            return True  # a lambda or a nested function
    return False


def _global(fn: types.FunctionType, name: str, scan: _Scan) -> Any:
    """What a global name of ``fn`` is bound to (its globals, then builtins); a name bound to
    a function, or to nothing, is remembered for the cache's check."""
    value = fn.__globals__.get(name, _MISSING)
    if value is _MISSING:
        builtins = getattr(fn, "__builtins__", None)
        if type(builtins) is types.ModuleType:
            builtins = builtins.__dict__
        if type(builtins) is dict and name in builtins:
            return builtins[name]
        scan.bindings.append((weakref.ref(fn), name, 0))
        return _MISSING
    if type(value) is types.FunctionType or type(value) is functools.partial:
        scan.bindings.append((weakref.ref(fn), name, id(value)))
    return value


def _attribute(owner: Any, name: str) -> Any:
    """``owner.name`` when ``owner`` is one of torch's or functorch's modules (read from its
    dict: no module ``__getattr__`` runs); anything else is not followed."""
    if not issubclass(type(owner), types.ModuleType):
        return _MISSING
    module_name = owner.__dict__.get("__name__", "")
    if type(module_name) is not str or not (
        module_name == "torch"
        or module_name.startswith("torch.")
        or module_name == "functorch"
        or module_name.startswith("functorch.")
    ):
        return _MISSING
    return owner.__dict__.get(name, _MISSING)

"""Cell roles from what ran: which recorded cell trained the model.

A cell trained the model when its training step was measured (the step watch saw a backward
through the watched model followed by an optimizer step over its parameters, wherever the
code that did it was defined). Before a step can be measured (advice never asked for, the
step watch off after ``torch.compile``), the cell's code decides: a ``.backward()`` call the
cell itself makes (not one inside a function or class it only defines), or a framework's
training call on a trainer in the namespace (``transformers.Trainer.train``, Lightning's
``Trainer.fit``, an ``accelerate.Accelerator``'s ``backward``).

Works on source text, the namespace and integers; keeps no reference to user objects.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from typing import Any

from .names import parse

_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
#: (top-level package of the receiver's class, method): a framework's training call
FRAMEWORK_TRAINING = {
    ("transformers", "train"),
    ("lightning", "fit"),
    ("pytorch_lightning", "fit"),
    ("trl", "train"),
    ("accelerate", "backward"),
}
#: the methods of FRAMEWORK_TRAINING
TRAINING_METHODS = frozenset(method for _, method in FRAMEWORK_TRAINING)


def _run_calls(tree: ast.AST) -> list[ast.Call]:
    """The calls a cell makes when it runs: every call but those inside a function, class or
    lambda it defines (decorators and default values do run)."""
    calls: list[ast.Call] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Call):
            calls.append(node)
        if isinstance(node, _DEFINITIONS):
            run_now: list[ast.AST] = []
            if not isinstance(node, ast.Lambda):
                run_now += node.decorator_list
            if isinstance(node, ast.ClassDef):
                run_now += node.bases + [k.value for k in node.keywords]
            else:
                args = node.args
                run_now += [d for d in args.defaults + args.kw_defaults if d is not None]
            stack.extend(run_now)
            continue
        stack.extend(ast.iter_child_nodes(node))
    return calls


@lru_cache(maxsize=128)
def _called_attrs(source: str) -> tuple[frozenset[str], tuple[tuple[str, str], ...]] | None:
    """(attribute names the cell calls, (receiver text, method) of each call), or None when
    the source does not parse."""
    tree = parse(source)
    if tree is None:
        return None
    attrs: set[str] = set()
    receivers: list[tuple[str, str]] = []
    for call in _run_calls(tree):
        if isinstance(call.func, ast.Attribute):
            attrs.add(call.func.attr)
            text = ast.get_source_segment(source, call.func.value)
            if text is not None and len(text) <= 200:
                receivers.append((text, call.func.attr))
    return frozenset(attrs), tuple(receivers)


def training_text(source: str, ns: dict[str, Any] | None = None) -> bool:
    """The cell's code trains: it calls ``.backward()`` itself, or a framework's training
    method on a trainer found in ``ns``. Unparsable code: the old text test."""
    if not source:
        return False
    found = _called_attrs(source)
    if found is None:
        return ".backward(" in source and ".step(" in source
    attrs, receivers = found
    if "backward" in attrs:
        return True
    if ns is None:
        return False
    for text, method in receivers:
        if method in TRAINING_METHODS and _framework_trainer(text, method, ns):
            return True
    return False


def _framework_trainer(text: str, method: str, ns: dict[str, Any]) -> bool:
    from .names import resolve

    tree = parse(text)
    if tree is None or len(tree.body) != 1 or not isinstance(tree.body[0], ast.Expr):
        return False
    obj = resolve(tree.body[0].value, ns)
    if obj is None:
        return False
    for klass in type(obj).__mro__:
        package = (getattr(klass, "__module__", "") or "").split(".", 1)[0]
        if (package, method) in FRAMEWORK_TRAINING:
            return True
    return False


def framework_of(source: str, ns: dict[str, Any]) -> str | None:
    """``"transformers"`` / ``"lightning"`` / ``"accelerate"`` when the cell trains through
    that framework's trainer (an ``Accelerator``'s ``backward``), else None."""
    found = _called_attrs(source) if source else None
    if not found:
        return None
    for text, method in found[1]:
        if method not in TRAINING_METHODS or not _framework_trainer(text, method, ns):
            continue
        tree = parse(text)
        obj = resolve_text(tree, ns)
        package = type(obj).__module__.split(".", 1)[0]
        return "lightning" if package in ("lightning", "pytorch_lightning") else package
    return None


def resolve_text(tree: ast.Module | None, ns: dict[str, Any]) -> Any:
    from .names import resolve

    if tree is None or len(tree.body) != 1 or not isinstance(tree.body[0], ast.Expr):
        return None
    return resolve(tree.body[0].value, ns)


def is_training(source: str, step: Any, ns: dict[str, Any] | None = None) -> bool:
    """A recorded cell trained the model: its step was measured, or its code trains."""
    return step is not None or training_text(source, ns)


def rebinds(source: str) -> set[str]:
    """Names the cell assigns when it runs (``name = ...``, ``for name in``, ``with ... as
    name``), outside the functions and classes it defines."""
    tree = parse(source) if source else None
    if tree is None:
        return set()
    found: set[str] = set()
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, _DEFINITIONS):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.add(node.id)
        stack.extend(ast.iter_child_nodes(node))
    return found


def unchanged_template(suggestion: dict[str, Any], source: str) -> bool:
    """A template cell run as generated (it only says what to change): nothing was applied."""
    if suggestion.get("kind") != "template":
        return False
    code = suggestion.get("code") or ""
    return _normal(code) == _normal(source)


def _normal(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip().splitlines() if line.strip())


def undo_ids(source: str) -> list[str]:
    """Suggestion ids whose undo cell this is (``# vramscope: undo <id>``)."""
    ids = []
    for line in source.splitlines():
        text = line.strip()
        if text.startswith("# vramscope:"):
            rest = text[len("# vramscope:") :].split()
            if len(rest) >= 2 and rest[0] == "undo":
                ids.append(rest[1])
    return ids

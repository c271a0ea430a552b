"""The user's names: the training cell and, in its code, the model, optimizer, loss function,
data and batch variables the generated cells are written with.

Everything here works on source text and the namespace; it keeps no reference to a user
object past the call.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

MARKER = "# vramscope:"


@dataclass
class CellSource:
    """One recorded cell: its ids and its source."""

    execution_count: int | None
    cell_id: str | None
    source: str

    @property
    def ref(self) -> dict[str, Any]:
        return {"cell_id": self.cell_id, "execution_count": self.execution_count}


def is_training_source(source: str) -> bool:
    """Cheap text test: the cell calls ``.backward(`` and ``.step(``."""
    return ".backward(" in source and ".step(" in source


def marker_ids(source: str) -> list[str]:
    """Suggestion ids named by ``# vramscope: <id>`` marker lines (``undo`` markers excluded)."""
    ids = []
    for line in source.splitlines():
        text = line.strip()
        if text.startswith(MARKER):
            rest = text[len(MARKER) :].strip().split()
            if rest and rest[0] != "undo":
                ids.append(rest[0])
    return ids


def parse(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


@dataclass
class StepRegion:
    """Where the training step lives in the training cell's AST.

    ``body``: the statement list holding the ``.backward()`` statement (a loop body or the
    cell); ``forward``: the statements from after the last ``zero_grad`` before it up to it;
    ``backward``: that statement; ``loop``: the enclosing ``for`` loop, if any; ``outer``:
    the outermost loop (``for`` or ``while``) around the step, where set-up lines go.
    """

    body: list[ast.stmt]
    forward: list[ast.stmt]
    backward: ast.stmt
    loop: ast.For | None
    zero_grad: ast.stmt | None
    step: ast.stmt | None
    outer: ast.stmt | None = None


@dataclass
class Names:
    model: str | None = None
    optimizer: str | None = None
    loss_fn: str | None = None
    data: str | None = None
    batch: str | None = None
    batch_vars: list[str] = field(default_factory=list)  # all names the loop target binds

    def as_dict(self) -> dict[str, str | None]:
        return {
            "model": self.model,
            "optimizer": self.optimizer,
            "loss_fn": self.loss_fn,
            "data": self.data,
            "batch": self.batch,
        }


def _calls_attr(node: ast.AST, attr: str) -> ast.Call | None:
    for sub in ast.walk(node):
        if (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Attribute)
            and sub.func.attr == attr
        ):
            return sub
    return None


_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_Found = tuple[list[ast.stmt], ast.For | None, ast.stmt | None]


def _bodies(tree: ast.AST) -> list[_Found]:
    """Every statement list: (the list, its innermost ``for`` loop, its outermost loop)."""
    found: list[_Found] = []

    def visit(body: list[ast.stmt], loop: ast.For | None, outer: ast.stmt | None) -> None:
        found.append((body, loop, outer))
        for stmt in body:
            for name in ("body", "orelse", "finalbody"):
                inner = getattr(stmt, name, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    own = isinstance(stmt, ast.For) and name == "body"
                    around = outer or (stmt if isinstance(stmt, _LOOPS) else None)
                    visit(inner, stmt if own else loop, around)  # type: ignore[arg-type]
            for handler in getattr(stmt, "handlers", ()):
                visit(handler.body, loop, outer)
            for case in getattr(stmt, "cases", ()):
                visit(case.body, loop, outer)

    if isinstance(tree, ast.Module):
        visit(tree.body, None, None)
    return found


_COMPOUND = (
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.With,
    ast.AsyncWith,
    ast.If,
    ast.Try,
    ast.Match,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
)


def step_region(tree: ast.Module) -> StepRegion | None:
    """The statement list whose statement calls ``.backward()`` (innermost, first found)."""
    for body, loop, outer in reversed(_bodies(tree)):
        for i, stmt in enumerate(body):
            if isinstance(stmt, _COMPOUND) or _calls_attr(stmt, "backward") is None:
                continue  # a compound statement's own bodies are visited on their own
            start = 0
            zero = None
            for j in range(i):
                if _calls_attr(body[j], "zero_grad") is not None:
                    start, zero = j + 1, body[j]
            step = next(
                (s for s in body[i + 1 :] if _calls_attr(s, "step") is not None),
                None,
            )
            if zero is None:
                zero = next((s for s in body[i + 1 :] if _calls_attr(s, "zero_grad")), None)
            return StepRegion(body, body[start:i], stmt, loop, zero, step, outer)
    return None


def _text(source: str, node: ast.AST) -> str | None:
    """The expression's text as written; on one line (unparsed) when it spans several, so
    that it can stand in a comment or any line of a generated cell."""
    seg = ast.get_source_segment(source, node)
    if seg and ("\n" in seg or "\r" in seg):
        return ast.unparse(node)
    return seg if seg else None


def resolve(node: ast.AST, ns: dict[str, Any]) -> Any:
    """The object an expression of names, attributes and constant subscripts denotes."""
    if isinstance(node, ast.Name):
        return ns.get(node.id)
    if isinstance(node, ast.Attribute):
        base = resolve(node.value, ns)
        return getattr(base, node.attr, None) if base is not None else None
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        base = resolve(node.value, ns)
        try:
            return base[node.slice.value] if base is not None else None
        except Exception:
            return None
    return None


def find_names(source: str, tree: ast.Module, ns: dict[str, Any], torch: Any) -> Names:
    """The variables the training cell uses, each as the expression text it uses."""
    names = Names()
    module_t, optim_t = torch.nn.Module, torch.optim.Optimizer
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ("step", "zero_grad"):
            if names.optimizer is None and isinstance(resolve(func.value, ns), optim_t):
                names.optimizer = _text(source, func.value)
            continue
        obj = resolve(func, ns)
        if isinstance(obj, module_t):
            text = _text(source, func)
            if type(obj).__name__.endswith("Loss") or "loss" in (text or "").lower():
                names.loss_fn = names.loss_fn or text
            elif names.model is None:
                names.model = text
                arg = node.args[0] if node.args else None
                if arg is None:  # model(**batch) or model(input_ids=ids, ...)
                    arg = next(
                        (
                            kw.value
                            for kw in node.keywords
                            if isinstance(kw.value, ast.Name)
                            and (kw.arg is None or isinstance(ns.get(kw.value.id), torch.Tensor))
                        ),
                        None,
                    )
                if arg is not None and names.batch is None:
                    names.batch = _text(source, arg)
    for node in ast.walk(tree):
        if isinstance(node, ast.For):
            targets = [n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)]
            iter_text = _text(source, node.iter)
            if targets and iter_text and "range(" not in iter_text:
                names.data = names.data or iter_text
                names.batch_vars = names.batch_vars or targets
    if names.batch is not None and not names.batch.isidentifier():
        names.batch = None  # e.g. model(x.to(device)): the batch is the variable inside
    if names.batch is None and names.batch_vars:
        names.batch = names.batch_vars[0]
    return names


def tensor_mapping(value: Any, torch: Any) -> bool:
    """A dict-like batch (a dict, a Hugging Face BatchEncoding) of tensors that share their
    first dimension, as ``model(**batch)`` takes it: split key by key into micro-batches."""
    if not isinstance(value, Mapping) or not value:
        return False
    sizes = {
        int(v.shape[0]) if isinstance(v, torch.Tensor) and v.dim() > 0 else -1
        for v in value.values()
    }
    return len(sizes) == 1 and -1 not in sizes


def batch_size_of(names: Names, ns: dict[str, Any], torch: Any) -> int | None:
    """The batch size the training cell ran with: the batch tensor's first dimension."""
    for name in [names.batch, *names.batch_vars]:
        value: Any = ns.get(name) if name else None
        if isinstance(value, (tuple, list)) and value:
            value = value[0]
        if tensor_mapping(value, torch):
            value = next(iter(value.values()))
        if isinstance(value, torch.Tensor) and value.dim() > 0:
            return int(value.shape[0])
    loader = ns.get(names.data) if names.data else None
    size = getattr(loader, "batch_size", None)
    return size if isinstance(size, int) and size > 0 else None

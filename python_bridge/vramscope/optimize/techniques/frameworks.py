"""Advice in a training framework's own terms, for a training cell that trains through
``transformers.Trainer.train()`` or Lightning's ``Trainer.fit()`` (roles.framework_of).

Such a cell has no loop to rewrite: the manual-loop cards (autocast and accumulation
rewrites or templates, the model's own checkpointing switch under the HF Trainer) give way
to cards that change the framework's settings (frameworks_hf, frameworks_lightning). Their
predictions are the manual techniques' own figures (the same measured rows and step), taken
from the cards those techniques made or worked out by them for the trainer's batch size.

Works on source text, the namespace and the suggestions; keeps no reference to user objects.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace
from typing import Any

from ...messages.optimize import Suggestion, SuggestionKind
from ..context import Context
from ..names import CellSource, parse
from ..roles import TRAINING_METHODS, _called_attrs, _framework_trainer, framework_of
from . import accumulation
from .base import suggestion

#: cards whose cell rewrites the training cell's loop (there is none in a framework cell)
LOOP_TECHNIQUES = ("autocast", "accumulation")
#: the model's own switch (kept under Lightning, where the module is the user's; the HF
#: Trainer has its own argument for it)
HF_MODEL_SWITCH = "checkpoint:hf"
LOOP_NOTES = ("gradient accumulation: not offered, the batch size of training cell",)


@dataclass(frozen=True)
class Run:
    """The framework call of the training cell."""

    framework: str  # "transformers" | "lightning" | "accelerate"
    trainer: str  # the trainer's expression, canonical (names, attributes, constant keys)
    built: CellSource | None  # the newest recorded cell that assigned it


def split(
    suggestions: list[Suggestion], framework: str
) -> tuple[list[Suggestion], dict[str, Suggestion]]:
    """(cards kept as they are, the manual cards the framework's replace by technique)."""
    kept: list[Suggestion] = []
    manual: dict[str, Suggestion] = {}
    for s in suggestions:
        if s["technique"] in LOOP_TECHNIQUES and s["kind"] in ("rewrite", "template"):
            manual[s["technique"]] = s
        elif framework == "transformers" and s["id"] == HF_MODEL_SWITCH:
            manual["checkpointing"] = s
        else:
            kept.append(s)
    return kept, manual


def framework_run(ctx: Context) -> Run | None:
    """The training cell's framework call, with its trainer's expression and the cell that
    built the trainer; None for any other cell, or a trainer reached by an expression that
    is not names, attributes and constant keys."""
    if ctx.training is None:
        return None
    source = ctx.training.source
    framework = framework_of(source, ctx.ns)
    found = _called_attrs(source) if framework else None
    if not found:
        return None
    for text, method in found[1]:
        if method in TRAINING_METHODS and _framework_trainer(text, method, ctx.ns):
            expr = plain_expr(text)
            if expr is None:
                ctx.notes.append(
                    f"{framework}: the trainer is reached by an expression vramscope does not "
                    "write into cells (names, attributes and constant keys only)"
                )
                return None
            return Run(str(framework), expr, assigned_in(ctx.cells, expr))
    return None


def plain_expr(text: str) -> str | None:
    """``text`` as canonical code when it is names, attributes and constant subscripts
    (``trainer``, ``runs["a"].trainer``), else None: nothing else reaches a cell."""
    tree = parse(text)
    if tree is None or len(tree.body) != 1 or not isinstance(tree.body[0], ast.Expr):
        return None
    node: ast.AST = tree.body[0].value
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Subscript):
            key = node.slice
            if not isinstance(key, ast.Constant) or not isinstance(key.value, (str, int)):
                return None
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ast.unparse(tree.body[0].value)


def assigned_in(cells: list[CellSource], expr: str) -> CellSource | None:
    """The newest recorded cell whose code assigns a call to ``expr`` (``trainer =
    Trainer(...)``)."""
    for cell in reversed(cells):
        if assigning_call(cell.source, expr) is not None:
            return cell
    return None


def assigning_call(source: str, expr: str) -> ast.Call | None:
    """The call assigned to ``expr`` in ``source`` (the last one), else None."""
    tree = parse(source) if source and expr.split(".")[0].split("[")[0] in source else None
    found = None
    for node in ast.walk(tree) if tree is not None else ():
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        if any(_same(t, expr) for t in node.targets):
            found = node.value
    return found


def _same(target: ast.expr, expr: str) -> bool:
    try:
        return ast.unparse(target) == expr
    except Exception:
        return False


def call_named(source: str, name: str) -> ast.Call | None:
    """The last call in ``source`` to something named ``name`` (``name(...)``,
    ``x.name(...)``)."""
    tree = parse(source) if source and name in source else None
    found = None
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if called == name:
                found = node
    return found


def cell_calling(cells: list[CellSource], name: str) -> CellSource | None:
    """The newest recorded cell that calls ``name(...)``."""
    return next((c for c in reversed(cells) if call_named(c.source, name) is not None), None)


def accumulation_card(ctx: Context, batch: int) -> tuple[Suggestion, int] | None:
    """The accumulation technique's card for ``batch`` samples a micro-batch (its
    prediction and reasons; its cell, a loop template, is not used) and its factor k (the
    micro-batch is ``batch // k``)."""
    notes: list[str] = []
    found = accumulation.suggest(replace(ctx, batch_size=batch, notes=notes))
    ctx.notes.extend(n for n in notes if not n.startswith(LOOP_NOTES))
    if not found:
        return None
    return found[0], int(found[0]["id"].split(":")[1])  # "accumulate:<k>"


def cell_label(cell: CellSource | None) -> str:
    if cell is None:
        return "the cell that built it"
    return f"cell [{cell.execution_count}]" if cell.execution_count is not None else "its cell"


def user_of(ctx: Context, obj: Any) -> str | None:
    """A namespace name holding ``obj`` (identity), if any."""
    for name, value in list(ctx.ns.items()):
        if value is obj and name.isidentifier() and not name.startswith("_"):
            return name
    return None


def from_card(
    card: Suggestion,
    sid: str,
    title: str,
    why: str,
    kind: SuggestionKind,
    cells: tuple[str, str | None],
    target: CellSource | None,
) -> Suggestion:
    """A framework's card for the manual ``card``'s change: its technique, prediction, cost
    and reasons (plus ``why``), with the framework's cell (``cells``: code, undo)."""
    cost = (card["cost"]["text"], card["cost"]["factor"])
    reasons = [*card["why"], why]
    ref = target.ref if target is not None else None
    technique, pred = card["technique"], card["predicted"]
    return suggestion(sid, technique, title, reasons, pred, cost, kind, cells[0], cells[1], ref)

"""A lighter optimizer where its state dominates: Adam/AdamW keep two full-size moments per
parameter; ``torch.optim.Adafactor`` keeps a row and a column of second moments per weight
matrix (a full one for vectors) and no first moment.

Predicted from the optimizer's state as it is held now (measured: the bytes of every tensor
in ``optimizer.state``) and the parameters' shapes. Offered when that state is larger than
the training step's saved activations.
"""

from __future__ import annotations

import ast
import math
from typing import Any

from ...messages.optimize import Suggestion
from ..codegen import checked, safe_word
from ..context import Context
from .base import mib, predicted, suggestion
from .carry import STASH, carried, enable_helpers, undo_cell, wrap_comment

MOMENTS = ("exp_avg", "exp_avg_sq")


def state_bytes(optimizer: Any, torch: Any) -> int:
    total = 0
    for per_param in list(optimizer.state.values()):
        for value in per_param.values() if isinstance(per_param, dict) else ():
            if isinstance(value, torch.Tensor):
                total += value.numel() * value.element_size()
    return total


def adafactor_bytes(optimizer: Any) -> int:
    """Adafactor's state for the same parameters: factored second moments and a step."""
    total = 0
    for group in optimizer.param_groups:
        for p in group["params"]:
            if not p.requires_grad:
                continue
            elem = p.element_size()
            if p.dim() >= 2:
                outer = math.prod(p.shape[:-2])
                total += outer * (p.shape[-2] + p.shape[-1]) * elem
            else:
                total += p.numel() * elem
            total += 4  # the step count
    return total


def assignable(text: str) -> bool:
    try:
        tree = ast.parse(f"{text} = None")
    except SyntaxError:
        return False
    target = tree.body[0].targets[0]  # type: ignore[attr-defined]
    return isinstance(target, (ast.Name, ast.Attribute, ast.Subscript))


def find_optimizer(ctx: Context) -> tuple[str | None, Any]:
    """The training cell's optimizer: (its expression, the object), or (name, None)."""
    name = ctx.names.optimizer
    optimizer = ctx.ns.get(name) if name and name.isidentifier() else None
    if optimizer is None and name and ctx.tree is not None:
        from ..names import resolve

        optimizer = resolve(ast.parse(name, mode="eval").body, ctx.ns)
    if not isinstance(optimizer, ctx.torch.optim.Optimizer):
        return name, None
    return name, optimizer


def suggest(ctx: Context) -> list[Suggestion]:
    name, optimizer = find_optimizer(ctx)
    torch = ctx.torch
    if optimizer is None or name is None or not assignable(name):
        return []
    if type(optimizer).__name__ not in ("Adam", "AdamW") or len(optimizer.param_groups) != 1:
        return []
    now = state_bytes(optimizer, torch)
    activations = ctx.activation_bytes
    if now == 0 or now <= activations:
        return []
    after = adafactor_bytes(optimizer)
    if after >= now:
        return []
    cls = type(optimizer).__name__
    sid = "optimizer:adafactor"
    why = [
        f"{cls} `{name}` holds {mib(now)} of state (two moments per parameter), more than the "
        f"{mib(activations)} of activations the training step saves",
        f"Adafactor keeps a row and a column of second moments per weight matrix: {mib(after)}",
    ]
    code, undo = adafactor_cells(sid, name, optimizer, torch)
    # the state is held between steps, not made in one: no step-peak figure
    pred = predicted(None, None, now - after, None)
    cost = ("different updates (no momentum); the learning rate may need tuning", None)
    return [
        suggestion(
            sid, "optimizer", f"Adafactor instead of {cls}", why, pred, cost, "enable", code, undo
        )
    ]


def adafactor_cells(sid: str, name: str, optimizer: Any, torch: Any) -> tuple[str, str]:
    """The enable cell (Adafactor built from ``name``'s groups and settings, schedulers
    re-bound, the old optimizer kept) and the undo cell (that very optimizer back)."""
    cls = safe_word(type(optimizer).__name__)
    try:
        kept, left = carried(torch.optim.Adafactor, optimizer, torch)
    except Exception:  # the cell decides for itself; only the comment is left general
        kept, left = ["the settings Adafactor takes"], []
    about = (
        f"A lighter optimizer: Adafactor instead of {cls} (no first moment, factored second "
        "moments). Its updates differ: watch the loss, the learning rate may need tuning. "
        f"Carried over from {name}, group by group: {', '.join(kept) or 'nothing'}"
        + (f"; not carried (Adafactor has no such setting): {', '.join(left)}" if left else "")
        + f". LR schedulers bound to {name} follow the new one. The old optimizer (its state "
        f"moved to the CPU) is kept in {STASH} for the undo cell; {STASH}.clear() frees it. "
        "Re-running this cell is harmless."
    )
    code = (
        f"# vramscope: {sid}\n"
        + wrap_comment(about)
        + "import inspect\n\nimport torch\n\n"
        + enable_helpers()
        + "\n"
        + f'{STASH} = globals().setdefault("{STASH}", {{}})\n'
        f'if "{sid}" not in {STASH}:\n'
        f"    _old = {name}\n"
        "    _groups, _defaults = _carried_groups(torch.optim.Adafactor, _old)\n"
        f"    {name} = torch.optim.Adafactor(_groups, **_defaults)\n"
        f"    _rebind_schedulers(_old, {name})\n"
        f'    {STASH}["{sid}"] = {{"optimizer": _old, "moved": _offload(_old)}}\n'
        "    del _old, _groups, _defaults\n"
    )
    undo = undo_cell(
        sid,
        f"Back to the {cls} that {name} was, with its state; LR schedulers follow it back.",
        [
            '_reload(_kept["moved"])',
            f'_rebind_schedulers({name}, _kept["optimizer"])',
            f'{name} = _kept["optimizer"]',
        ],
    )
    return checked(code), checked(undo)

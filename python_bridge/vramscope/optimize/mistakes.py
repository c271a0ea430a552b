"""Mistakes seen in real training code, found in the recorded cells and the holders scan."""

from __future__ import annotations

import ast
import re

from ..messages.optimize import Mistake
from .codegen import CannotRewrite, wrap_all
from .context import Context
from .names import CellSource, parse
from .techniques.base import mib


def _mistake(mid: str, title: str, why: str, fix: str | None, cell: CellSource | None) -> Mistake:
    return {
        "id": mid,
        "title": title,
        "why": why,
        "fix_code": fix,
        "cell_id": cell.cell_id if cell else None,
        "execution_count": cell.execution_count if cell else None,
    }


def reentrant_checkpoint(cell: CellSource, tree: ast.Module) -> Mistake | None:
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name not in ("checkpoint", "checkpoint_sequential"):
            continue
        reentrant = next((kw.value for kw in node.keywords if kw.arg == "use_reentrant"), None)
        if isinstance(reentrant, ast.Constant) and reentrant.value is False:
            continue
        call = ast.get_source_segment(cell.source, node) or f"{name}(...)"
        fixed = call[:-1].rstrip().rstrip(",") + ", use_reentrant=False)"
        fixed = fixed.replace("use_reentrant=True, ", "").replace(", use_reentrant=True", "")
        return _mistake(
            f"reentrant_checkpoint:{cell.execution_count}",
            f"Reentrant {name}() in cell [{cell.execution_count}]",
            "the reentrant checkpoint gives the checkpointed layers no gradients when its "
            "input does not require grad (e.g. the first layers' input): they silently stop "
            "learning. The non-reentrant form has no such limit.",
            fixed,
            cell,
        )
    return None


#: torch.cuda.amp.autocast's positional parameters, which torch.autocast takes by keyword
_AUTOCAST_PARAMS = ("enabled", "dtype", "cache_enabled")
_AMP_CALLS = ("autocast", "GradScaler")
_AMP_MODULE = "torch.cuda.amp"


def amp_aliases(cells: list[CellSource]) -> dict[str, str]:
    """Names the recorded cells bound to ``torch.cuda.amp`` or its callables (``from
    torch.cuda.amp import autocast as ac``: ``{"ac": "torch.cuda.amp.autocast"}``; ``from
    torch.cuda import amp``: ``{"amp": "torch.cuda.amp"}``); the imports may be in an
    earlier cell than the calls; a later import of the same name rebinds it. Only cells that
    mention ``cuda`` (or import something once a name is bound) are parsed."""
    found: dict[str, str] = {}
    for cell in cells:
        wanted = "cuda" in cell.source or (found and "import" in cell.source)
        tree = parse(cell.source) if wanted else None
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    name = alias.asname or alias.name
                    if full == _AMP_MODULE or full.startswith(_AMP_MODULE + "."):
                        found[name] = full
                    else:  # rebound by a later import (from torch import autocast)
                        found.pop(name, None)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    name = alias.asname or alias.name.partition(".")[0]
                    if alias.name == _AMP_MODULE and alias.asname:
                        found[name] = _AMP_MODULE
                    else:
                        found.pop(name, None)
    return found


def _resolve(func: ast.expr, aliases: dict[str, str]) -> str:
    """The dotted name a call's function stands for, with the cells' imports applied."""
    text = ast.unparse(func)
    head, _, rest = text.partition(".")
    if head in aliases:
        return aliases[head] + (f".{rest}" if rest else "")
    return text


def _amp_call(cell: CellSource, aliases: dict[str, str]) -> tuple[str, list[str]] | None:
    """The cell's first ``torch.cuda.amp.autocast``/``GradScaler`` call (under any name it
    was imported as): which one, and the user's arguments as text (``enabled=False`` kept:
    the fix must not turn on what they turned off); autocast's positional ones named, since
    ``torch.autocast`` takes the device first."""
    if "torch.cuda.amp." not in cell.source and not any(a in cell.source for a in aliases):
        return None  # cheap: neither the full name nor an imported one appears
    tree = parse(cell.source)
    for node in ast.walk(tree) if tree is not None else ():
        if not isinstance(node, ast.Call):
            continue
        full = _resolve(node.func, aliases)
        what = full[len(_AMP_MODULE) + 1 :] if full.startswith(_AMP_MODULE + ".") else ""
        if what not in _AMP_CALLS:
            continue
        text = [ast.get_source_segment(cell.source, a) or ast.unparse(a) for a in node.args]
        if what == "autocast":
            text = [f"{_AUTOCAST_PARAMS[i]}={t}" for i, t in enumerate(text[:3])]
        for kw in node.keywords:
            value = ast.get_source_segment(cell.source, kw.value) or ast.unparse(kw.value)
            text.append(f"{kw.arg}={value}" if kw.arg else f"**{value}")
        return what, text
    return None


def cuda_amp(cell: CellSource, aliases: dict[str, str]) -> Mistake | None:
    found = _amp_call(cell, aliases)
    if found is None:
        return None
    what, args = found
    if what == "autocast":
        if not any(a.startswith(("dtype=", "**")) for a in args):
            args.insert(0, "dtype=torch.float16")  # torch.cuda.amp.autocast's default
        fix = f'torch.autocast("cuda", {", ".join(args)})'
    else:
        fix = "torch.amp.GradScaler(" + ", ".join(['"cuda"', *args]) + ")"
    return _mistake(
        f"cuda_amp:{cell.execution_count}",
        f"Deprecated torch.cuda.amp.{what} in cell [{cell.execution_count}]",
        f"torch.cuda.amp.{what} is deprecated; use the device-generic torch.amp API",
        fix,
        cell,
    )


def missing_zero_grad(ctx: Context) -> Mistake | None:
    cell = ctx.training
    if cell is None or ctx.region is None or ctx.region.loop is None:
        return None
    if "zero_grad(" in cell.source or ".grad = None" in cell.source:
        return None
    opt = ctx.names.optimizer or "optimizer"
    return _mistake(
        "zero_grad_missing",
        f"zero_grad() is never called in training cell [{cell.execution_count}]",
        "the loop calls .backward() and .step() but never clears the gradients: each step "
        "adds its gradients to all the previous ones (unless you accumulate on purpose)",
        f"{opt}.zero_grad(set_to_none=True)  # first line of the loop body",
        cell,
    )


def kept_graphs(ctx: Context) -> list[Mistake]:
    out = []
    for holder in ctx.holders:
        if holder.get("kind") != "graph_retention":
            continue
        name = str(holder.get("name", ""))
        cell = _appending_cell(ctx.cells, name)
        fix = None
        if cell is not None:  # the cell that appends, keeping numbers instead of graphs
            fix = re.sub(
                rf"\b{re.escape(name)}\.append\((\w+)\)", rf"{name}.append(\1.item())", cell.source
            )
            fix = None if fix == cell.source else fix
        if fix is None and name.isidentifier():
            value = ctx.ns.get(name)
            if isinstance(value, ctx.torch.Tensor):
                fix = f"{name} = {name}.detach()  # keep the values, free the graph"
            elif isinstance(value, (list, tuple)):
                fix = f"{name} = [v.detach() if torch.is_tensor(v) else v for v in {name}]"
        out.append(
            _mistake(
                f"kept_graph:{name}",
                f"`{name}` keeps a loss or output with its graph across steps",
                str(holder.get("explanation", "")),
                fix,
                cell,
            )
        )
    return out


def _appending_cell(cells: list[CellSource], name: str) -> CellSource | None:
    for cell in reversed(cells):
        if f"{name}.append(" in cell.source:
            return cell
    return None


def _without_autograd(cell: CellSource) -> str | None:
    try:
        return "import torch\n\n" + wrap_all(cell.source, "with torch.inference_mode():")
    except CannotRewrite:
        return None


def eval_with_grad(ctx: Context, evals: list[tuple[CellSource, int]]) -> list[Mistake]:
    return [
        _mistake(
            f"eval_with_grad:{cell.execution_count}",
            f"Evaluation with autograd on in cell [{cell.execution_count}]",
            f"the cell runs the model without .backward(), but autograd still saved "
            f"{mib(saved)} of activations for it",
            _without_autograd(cell),
            cell,
        )
        for cell, saved in evals
    ]


def find(ctx: Context, evals: list[tuple[CellSource, int]]) -> list[Mistake]:
    found: list[Mistake] = []
    aliases = amp_aliases(ctx.cells)
    checked: set[str] = set()  # a cell run again is checked once: its newest run
    for cell in reversed(ctx.cells):
        if cell.cell_id is not None:
            if cell.cell_id in checked:
                continue
            checked.add(cell.cell_id)
        tree = parse(cell.source) if "checkpoint" in cell.source else None
        m = reentrant_checkpoint(cell, tree) if tree is not None else None
        for item in (m, cuda_amp(cell, aliases)):
            if item is not None and item["id"] not in {f["id"] for f in found}:
                found.append(item)
    found.reverse()  # in the cells' order
    zero = missing_zero_grad(ctx)
    if zero is not None:
        found.append(zero)
    found.extend(kept_graphs(ctx))
    found.extend(eval_with_grad(ctx, evals))
    return found

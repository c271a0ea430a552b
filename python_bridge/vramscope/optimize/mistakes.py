"""Mistakes seen in real training code, found in the recorded cells and the holders scan."""

from __future__ import annotations

import ast
import re

from .codegen import CannotRewrite, wrap_all
from .context import Context
from .names import CellSource, parse
from .schema import Mistake
from .techniques.base import mib

_CUDA_AMP = re.compile(r"torch\.cuda\.amp\.(autocast|GradScaler)\(")


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


def _amp_arguments(cell: CellSource, what: str) -> list[str]:
    """The user's arguments to their first ``torch.cuda.amp.<what>(...)`` call, as text
    (``enabled=False`` kept: the fix must not turn on what they turned off); autocast's
    positional ones named, since ``torch.autocast`` takes the device first."""
    tree = parse(cell.source)
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Call) and ast.unparse(node.func) == f"torch.cuda.amp.{what}":
            text = [ast.get_source_segment(cell.source, a) or ast.unparse(a) for a in node.args]
            if what == "autocast":
                text = [f"{_AUTOCAST_PARAMS[i]}={t}" for i, t in enumerate(text[:3])]
            for kw in node.keywords:
                value = ast.get_source_segment(cell.source, kw.value) or ast.unparse(kw.value)
                text.append(f"{kw.arg}={value}" if kw.arg else f"**{value}")
            return text
    return []


def cuda_amp(cell: CellSource) -> Mistake | None:
    match = _CUDA_AMP.search(cell.source)
    if match is None:
        return None
    what = match.group(1)
    args = _amp_arguments(cell, what)
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
    for cell in ctx.cells:
        tree = parse(cell.source) if "checkpoint" in cell.source else None
        m = reentrant_checkpoint(cell, tree) if tree is not None else None
        for item in (m, cuda_amp(cell)):
            if item is not None and item["id"] not in {f["id"] for f in found}:
                found.append(item)
    zero = missing_zero_grad(ctx)
    if zero is not None:
        found.append(zero)
    found.extend(kept_graphs(ctx))
    found.extend(eval_with_grad(ctx, evals))
    return found

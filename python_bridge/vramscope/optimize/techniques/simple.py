"""Small techniques: ``zero_grad(set_to_none=True)``, evaluation under
``torch.inference_mode()``, and freeing what the holders scan found."""

from __future__ import annotations

import ast
import keyword
import re
from typing import Any

from ...fixes import FREE_TRACEBACK
from ...messages.optimize import Suggestion
from ..codegen import CannotRewrite, replace_call_kwarg, wrap_all
from ..context import Context
from ..names import CellSource, is_training_source
from ..outcomes import CellRun, activation_bytes
from .base import mib, predicted, suggestion

FREE_CELLS = {
    "output_cache": (
        "IPython's output cache (Out, _, _N)",
        'get_ipython().run_line_magic("reset", "-f out")  # drop IPython\'s output cache\n'
        'get_ipython().push({"_": None, "__": None, "___": None}, interactive=False)\n',
    ),
    "traceback": ("the last error's traceback", FREE_TRACEBACK),
}


def _grad_bytes(ctx: Context) -> int:
    return sum(int(r.get("grad_bytes", 0)) for r in ctx.layers)


def zero_grad(ctx: Context) -> list[Suggestion]:
    """``zero_grad(set_to_none=False)`` keeps the gradients allocated through the forward."""
    if ctx.tree is None or ctx.training is None:
        return []
    for node in ast.walk(ctx.tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "zero_grad"
            and any(
                kw.arg == "set_to_none"
                and isinstance(kw.value, ast.Constant)
                and kw.value.value is False
                for kw in node.keywords
            )
        ):
            grads = _grad_bytes(ctx)
            if not grads:
                return []
            try:
                code = replace_call_kwarg(ctx.training.source, node, "set_to_none", "True")
            except CannotRewrite:
                return []
            sid = "zero_grad:set_to_none"
            why = [
                f"training cell [{ctx.training.execution_count}] zeroes the gradients in "
                f"place: {mib(grads)} stay allocated through every forward",
            ]
            return [
                suggestion(
                    sid,
                    "zero_grad",
                    "zero_grad(set_to_none=True): free gradients between steps",
                    why,
                    predicted(None, None, grads, grads),
                    ("none", 1.0),
                    "rewrite",
                    f"# vramscope: {sid}\n{code}",
                    None,
                    ctx.training.ref,
                )
            ]
    return []


def eval_cells(ctx: Context, runs: list[CellRun]) -> list[tuple[CellSource, int]]:
    """Recent cells that ran the model with autograd on and no backward, with what they saved."""
    model = ctx.names.model or ctx.model_name
    found: dict[int | None, tuple[CellSource, int]] = {}
    if not model:
        return []
    measured: set[int] = set()  # insights already used (one may cover several cells)
    # an insight shared with a training cell (cells run quickly one after another) holds
    # that cell's graph: it says nothing about the cells beside it
    measured.update(id(r.insight) for r in runs if r.insight is not None and _trains(r))
    # a cell that kept the graph of every forward it ran (losses.append(loss)) is a leak,
    # which the holders and mistakes name, not an evaluation: the tracker saw it at the
    # cell's end (a later `del losses` ended the leak, not what the cell did); a list the
    # holders found keeping graphs, filled by the cell, says the same where no forward of
    # it was measured
    kept_now = _graph_lists(ctx.holders)
    for run in runs:
        src = run.cell.source
        if _trains(run) or not calls(src, model) or run.kept_forwards >= 2:
            continue
        kept_lists = kept_now + _graph_lists((run.insight or {}).get("holders") or ())
        if any(f"{name}.append(" in src or f"{name} +=" in src for name in kept_lists):
            continue
        if "inference_mode" in src or "no_grad" in src:
            continue
        if (run.insight or {}).get("model") != ctx.model_name or id(run.insight) in measured:
            continue  # another model, or the same measurement as an earlier cell (Run All)
        # its own: what was still saved when it started (a graph kept before) is left out
        before = self_baseline(runs, run)
        saved = activation_bytes(run.insight) - live_bytes(before, ctx.model_name)
        if saved > 0 and run.record.get("ok", True):
            measured.add(id(run.insight))
            found[run.cell.execution_count] = (run.cell, saved)
    return list(found.values())


def _graph_lists(holders: Any) -> list[str]:
    """The names of the holders found keeping autograd graphs alive."""
    return [
        str(h.get("name"))
        for h in holders
        if isinstance(h, dict)
        and h.get("kind") == "graph_retention"
        and str(h.get("name", "")).isidentifier()
    ]


def _trains(run: CellRun) -> bool:
    return is_training_source(run.cell.source) or ".backward(" in run.cell.source


def calls(source: str, expr: str) -> bool:
    """Whether ``source`` calls ``expr`` (``m(x)``; not ``LayerNorm(`` nor ``self.m(``)."""
    start = r"(?<![\w.])" if expr[:1].isidentifier() else ""
    return re.search(start + re.escape(expr) + r"\s*\(", source) is not None


def self_baseline(runs: list[CellRun], run: CellRun) -> dict[str, Any] | None:
    for earlier in reversed(runs[: runs.index(run)]):
        if earlier.insight is not None and earlier.insight is not run.insight:
            return earlier.insight
    return None


def live_bytes(insight: dict[str, Any] | None, model: str | None) -> int:
    if not insight or insight.get("model") != model:
        return 0
    return sum(int(r.get("saved_bytes", 0)) for r in insight.get("layers", ()))


def inference_mode(ctx: Context, runs: list[CellRun]) -> list[Suggestion]:
    out = []
    for cell, saved in eval_cells(ctx, runs):
        try:
            body = wrap_all(cell.source, "with torch.inference_mode():")
        except CannotRewrite:
            continue
        sid = f"inference_mode:{cell.execution_count}"
        code = (
            f"# vramscope: {sid}\n# Cell [{cell.execution_count}] with autograd off: "
            "nothing is saved for a backward that never comes.\nimport torch\n\n" + body + "\n"
        )
        why = [
            f"cell [{cell.execution_count}] runs {ctx.names.model or ctx.model_name} without "
            f"calling .backward(), yet autograd saved {mib(saved)} for it",
        ]
        out.append(
            suggestion(
                sid,
                "inference_mode",
                f"Evaluate under torch.inference_mode() (cell [{cell.execution_count}])",
                why,
                predicted(saved, 0, saved),
                ("none (faster: no graph is built)", 1.0),
                "rewrite",
                code,
                None,
                cell.ref,
            )
        )
    return out


def free_holders(ctx: Context) -> list[Suggestion]:
    out = []
    for holder in ctx.holders:
        kind, nbytes = holder.get("kind"), int(holder.get("bytes", 0))
        name = str(holder.get("name", ""))
        if kind in FREE_CELLS:
            what, body = FREE_CELLS[kind]
            sid = f"free:{kind}"
        elif kind == "graph_retention" and name.isidentifier() and not keyword.iskeyword(name):
            what = f"`{name}`'s autograd graphs"
            sid = f"free:{name}"
            body = (
                f"if isinstance({name}, torch.Tensor):\n"
                f"    {name} = {name}.detach()  # keep the values, free the graph\n"
                "else:\n"
                f"    {name} = [v.detach() if isinstance(v, torch.Tensor) else v for v in {name}]\n"
            )
        else:
            continue
        cuda = "if torch.cuda.is_available():\n    torch.cuda.empty_cache()\n"
        code = checked_free(sid, what, body + "import gc\n\ngc.collect()\n" + cuda)
        out.append(
            suggestion(
                sid,
                "free_holders",
                f"Free {what}",
                [str(holder.get("explanation", ""))],
                predicted(None, None, nbytes, None),
                ("none", None),
                "free",
                code,
            )
        )
    return out


def checked_free(sid: str, what: str, body: str) -> str:
    from ..codegen import checked

    return checked(f"# vramscope: {sid}\n# Free {what}.\nimport torch\n\n{body}")

"""Gradient accumulation: the same effective batch in micro-batches.

Predicted from the measured per-sample activation bytes: activations scale with the batch,
so ``k`` micro-batches keep about ``1/k`` of them at the step's peak.
"""

from __future__ import annotations

import ast
import re

from ...messages.optimize import Suggestion, SuggestionKind
from ..codegen import CannotRewrite, rewrite_accumulation
from ..context import Context
from ..names import tensor_mapping
from ..peakmodel import accumulated_peak
from .base import mib, predicted, suggestion
from .template import template


def micro_steps(batch: int) -> int | None:
    """The smallest ``k >= 2`` dividing the batch (equal micro-batches), or None."""
    for k in range(2, min(batch, 64) + 1):
        if batch % k == 0:
            return k
    return None


_MARKER = re.compile(r"^[ \t]*#[ \t]*vramscope:[ \t]*accumulate:(\d+)\b", re.M)
_STEPS = re.compile(r"^[ \t]*accum_steps[ \t]*=[ \t]*(\d+)\b", re.M)


def accumulating(source: str) -> int | None:
    """The micro-batches per step of a cell that already accumulates, else None: the
    rewrite's marker (``# vramscope: accumulate:2``), or an ``accum_steps = k`` with a
    ``.chunk(accum_steps)`` loop (the rewrite's code with its marker deleted)."""
    marker = _MARKER.search(source)
    if marker:
        return int(marker.group(1))
    steps = _STEPS.search(source)
    if steps and ".chunk(accum_steps)" in source:
        return int(steps.group(1))
    return None


def batch_vars(ctx: Context) -> list[str]:
    """The loop's batch tensors (``for x, y in loader``), else the batch tensor fed to the model."""
    torch = ctx.torch
    loop = ctx.region.loop if ctx.region else None
    if loop is not None and ctx.names.batch_vars:
        # the loop target's tensors (for step, (x, y) in enumerate(loader): x and y)
        return [v for v in ctx.names.batch_vars if isinstance(ctx.ns.get(v), torch.Tensor)]
    if ctx.names.batch and tensor_mapping(ctx.ns.get(ctx.names.batch), torch):
        return [ctx.names.batch]  # model(**batch): the dict is split key by key
    if not ctx.names.batch or not isinstance(ctx.ns.get(ctx.names.batch), torch.Tensor):
        return []
    # with it, the other tensors the forward reads that have the batch's first dimension
    # (``criterion(net(images), labels)``: the labels are split too)
    found = [ctx.names.batch]
    forward = [n for s in (ctx.region.forward if ctx.region else []) for n in ast.walk(s)]
    names = [n.id for n in forward if isinstance(n, ast.Name)]
    stored = {n.id for n in forward if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    for name in names:
        value = ctx.ns.get(name)
        if (
            name not in found
            and name not in stored
            and isinstance(value, torch.Tensor)
            and value.dim() > 0
            and int(value.shape[0]) == ctx.batch_size
        ):
            found.append(name)
    return found


def suggest(ctx: Context) -> list[Suggestion]:
    if not ctx.layers or ctx.training is None:
        return []
    if not ctx.batch_size:
        ctx.notes.append(
            f"gradient accumulation: not offered, the batch size of training cell "
            f"[{ctx.training.execution_count}] was not found: the model's input is not a "
            "variable holding a tensor, a dict of tensors (model(**batch)) or a sequence of "
            "tensors, nor a DataLoader named in the cell"
        )
        return []
    done = accumulating(ctx.training.source)
    if done is not None:
        # wrapping the rewritten cell again would nest a second micro-batch loop in the first
        ctx.notes.append(
            f"gradient accumulation: training cell [{ctx.training.execution_count}] already "
            f"runs {done} micro-batches per step: to split further, raise its accum_steps"
        )
        return []
    k = micro_steps(ctx.batch_size)
    before = ctx.activation_bytes
    if k is None or before == 0:
        return []
    after = before // k
    saving = before - after
    if ctx.step is not None:  # the measured step: its gradients stay, the rest is 1/k
        peak_saving = ctx.step.peak - ctx.step.accumulated_peak(k)
        if peak_saving <= 0:
            ctx.notes.append(
                f"gradient accumulation: not offered, {k} micro-batches would not lower the "
                f"measured step peak ({mib(ctx.step.peak)}, about "
                f"{mib(ctx.step.accumulated_peak(k))} with them: the "
                f"{mib(ctx.step.grads)} of gradients stay through every micro-batch)"
            )
            return []
    else:
        persistent = ctx.persistent_grads
        peak_saving = ctx.memoized(
            ("accumulation", k, persistent),
            lambda: ctx.plain_peak(persistent) - accumulated_peak(ctx.units(), k, persistent),
        )
    sid = f"accumulate:{k}"
    why = [
        f"training cell [{ctx.training.execution_count}] runs batches of {ctx.batch_size}: "
        f"{mib(before)} of saved activations, {mib(before / ctx.batch_size)} per sample",
        f"{k} micro-batches of {ctx.batch_size // k} keep {mib(after)} at a time; the "
        "gradients add up to the same step",
    ]
    batchnorm = [row["path"] for row in ctx.layers if "BatchNorm" in str(row.get("type"))]
    if batchnorm:
        why.append(
            f"the model has BatchNorm ({batchnorm[0]}"
            + (f" and {len(batchnorm) - 1} more" if len(batchnorm) > 1 else "")
            + f"): it normalizes each micro-batch of {ctx.batch_size // k} on its own and "
            f"updates its running statistics {k} times a step, so training changes slightly"
        )
    if ctx.step is not None:
        why.append(
            f"one training step measured at a {mib(ctx.step.peak)} peak, "
            f"{mib(ctx.step.grads)} of it gradients: about "
            f"{mib(ctx.step.peak - peak_saving)} with {k} micro-batches"
        )
    try:
        if ctx.region is None:
            raise CannotRewrite("no `<loss>.backward()` statement found")
        names = batch_vars(ctx)
        mappings = {v for v in names if tensor_mapping(ctx.ns.get(v), ctx.torch)}
        code = rewrite_accumulation(ctx.training.source, ctx.region, names, k, mappings)
        code = (
            f"# vramscope: {sid}\n# Your training cell with {k} micro-batches per optimizer step "
            "(the loss is divided by accum_steps;\n# after a step, the loss variable holds its "
            "last micro-batch's loss).\n" + code
        )
        kind: SuggestionKind = "rewrite"
    except CannotRewrite as err:
        step = [
            "{opt}.zero_grad()",
            "for micro in {batch}.chunk(accum_steps):",
            "    output = {model}(micro)",
            "    loss = {loss}",
            "    (loss / accum_steps).backward()",
            "{opt}.step()",
        ]
        code = template(ctx, sid, str(err), step, f"accum_steps = {k}\n")
        kind = "template"
    title = f"Gradient accumulation: {k} micro-batches of {ctx.batch_size // k}"
    cost = (f"{k} smaller forward/backward passes per step (less parallel work each)", None)
    return [
        suggestion(
            sid,
            "accumulation",
            title,
            why,
            predicted(before, after, saving, peak_saving),
            cost,
            kind,
            code,
            None,
            ctx.training.ref,
        )
    ]

"""Gradient accumulation: the same effective batch in micro-batches.

Predicted from the measured per-sample activation bytes: activations scale with the batch,
so ``k`` micro-batches keep about ``1/k`` of them at the step's peak.
"""

from __future__ import annotations

from ..codegen import CannotRewrite, rewrite_accumulation
from ..context import Context
from ..peakmodel import accumulated_peak, step_peak
from ..schema import Suggestion, SuggestionKind
from .base import mib, predicted, suggestion
from .template import template


def micro_steps(batch: int) -> int | None:
    """The smallest ``k >= 2`` dividing the batch (equal micro-batches), or None."""
    for k in range(2, min(batch, 64) + 1):
        if batch % k == 0:
            return k
    return None


def batch_vars(ctx: Context) -> list[str]:
    """The loop's batch tensors (``for x, y in loader``), else the batch tensor fed to the model."""
    torch = ctx.torch
    loop = ctx.region.loop if ctx.region else None
    if loop is not None and ctx.names.batch_vars:
        # the loop target's tensors (for step, (x, y) in enumerate(loader): x and y)
        return [v for v in ctx.names.batch_vars if isinstance(ctx.ns.get(v), torch.Tensor)]
    if ctx.names.batch and isinstance(ctx.ns.get(ctx.names.batch), torch.Tensor):
        return [ctx.names.batch]
    return []


def suggest(ctx: Context) -> list[Suggestion]:
    if not ctx.layers or ctx.training is None or not ctx.batch_size:
        return []
    k = micro_steps(ctx.batch_size)
    before = ctx.activation_bytes
    if k is None or before == 0:
        return []
    after = before // k
    saving = before - after
    units = ctx.units()
    peak_saving = step_peak(units, ctx.persistent_grads) - accumulated_peak(
        units, k, ctx.persistent_grads
    )
    sid = f"accumulate:{k}"
    why = [
        f"training cell [{ctx.training.execution_count}] runs batches of {ctx.batch_size}: "
        f"{mib(before)} of saved activations, {mib(before / ctx.batch_size)} per sample",
        f"{k} micro-batches of {ctx.batch_size // k} keep {mib(after)} at a time; the "
        "gradients add up to the same step",
    ]
    try:
        if ctx.region is None:
            raise CannotRewrite("no `<loss>.backward()` statement found")
        names = batch_vars(ctx)
        code = rewrite_accumulation(ctx.training.source, ctx.region, names, k)
        code = (
            f"# vramscope: {sid}\n# Your training cell with {k} micro-batches per optimizer step "
            "(the loss is divided by accum_steps).\n" + code
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

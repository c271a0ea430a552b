"""Activation checkpointing of the model's repeated blocks.

Blocks are found by structure: a ``ModuleList``/``Sequential`` whose children (at least two,
not leaves) are all of one class. The prediction comes from the training run's per-layer
saved bytes: the blocks' saved activations today, minus what stays with checkpointing (each
block's input, kept for the recomputation, plus one block's activations while it is
recomputed in backward).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ...messages.optimize import Suggestion
from ..codegen import safe_word
from ..context import Context
from ..peakmodel import step_peak
from .base import mib, predicted, suggestion

COST = ("one extra forward of the blocks in backward (~1.3x step time)", 1.33)


def repeated_blocks(model: Any, torch: Any) -> list[tuple[str, list[str]]]:
    """``[(container path, [block paths])]``, outermost containers only, in the order of
    ``named_modules``. The walk does not go into the blocks it finds (nothing inside a block
    is listed), so on a deep model it visits the containers and the blocks only."""
    found: list[tuple[str, list[str]]] = []
    containers = (torch.nn.ModuleList, torch.nn.Sequential)
    seen: set[int] = set()
    stack: list[tuple[str, Any]] = [("", model)]
    while stack:
        path, module = stack.pop()
        if id(module) in seen:
            continue  # shared: named_modules lists it once
        seen.add(id(module))
        children = [(n, c) for n, c in module._modules.items() if c is not None]
        prefix = f"{path}." if path else ""
        if isinstance(module, containers) and len(children) >= 2:
            classes = {type(child) for _, child in children}
            if len(classes) == 1 and children[0][1]._modules:
                found.append((path, [f"{prefix}{name}" for name, _ in children]))
                seen.update(id(child) for _, child in children)
                continue
        stack.extend((f"{prefix}{name}", child) for name, child in reversed(children))
    return found


def _elem_size(model: Any) -> int:
    try:
        return int(next(model.parameters()).element_size())
    except Exception:
        return 4


def _input_bytes(ctx: Context, blocks: list[str], elem: int) -> list[int]:
    """Each block's input: the previous block's output (the first: its own output)."""
    sizes = []
    for i, path in enumerate(blocks):
        row = ctx.row(blocks[i - 1] if i else path)
        shape = row.get("output_shape") if row else None
        sizes.append(math.prod(shape) * elem if shape else 0)
    return sizes


def _batchnorm_inside(ctx: Context, blocks: set[str]) -> bool:
    for row in ctx.layers:
        if "BatchNorm" in row["type"]:
            parts = row["path"].split(".")
            if any(".".join(parts[:i]) in blocks for i in range(1, len(parts))):
                return True
    return False


def is_hf(model: Any) -> bool:
    return callable(getattr(model, "gradient_checkpointing_enable", None)) and bool(
        getattr(model, "supports_gradient_checkpointing", False)
    )


@dataclass(frozen=True)
class Analysis:
    """What checkpointing the model's repeated blocks does to the measured rows."""

    groups: list[tuple[str, list[str]]]
    blocks: list[str]
    saved: list[int]  # each block's saved bytes today
    inputs: list[int]  # each block's input (kept with checkpointing)
    peak_before: int
    peak_after: int
    batchnorm: bool


def analyse(ctx: Context, persistent: bool) -> Analysis:
    groups = repeated_blocks(ctx.model, ctx.torch)
    blocks = [b for _, group in groups for b in group]
    saved = [ctx.subtree_bytes(b) for b in blocks]
    if not blocks or sum(saved) == 0:
        return Analysis(groups, blocks, saved, [], 0, 0, False)
    inputs = _input_bytes(ctx, blocks, _elem_size(ctx.model))
    # at the step's peak (backward) one block's activations are back while it is recomputed
    peak_before = ctx.plain_peak(persistent)
    peak_after = step_peak(ctx.units(dict(zip(blocks, inputs))), persistent)
    bn = _batchnorm_inside(ctx, set(blocks))
    return Analysis(groups, blocks, saved, inputs, peak_before, peak_after, bn)


def suggest(ctx: Context) -> list[Suggestion]:
    if ctx.model is None or not ctx.layers:
        return []
    persistent = ctx.persistent_grads
    a = ctx.memoized(("checkpointing", persistent), lambda: analyse(ctx, persistent))
    groups, blocks, saved, inputs = a.groups, a.blocks, a.saved, a.inputs
    total_blocks = sum(saved)
    if not blocks or total_blocks == 0:
        if not blocks:
            ctx.notes.append("checkpointing: no repeated blocks (same class, repeated) found")
        return []
    # kept from forward to backward: only the blocks' inputs
    saving = total_blocks - sum(inputs)
    peak_before, peak_after = a.peak_before, a.peak_after
    peak_saving = peak_before - peak_after
    if saving <= 0:
        ctx.notes.append(
            f"checkpointing: the blocks save {mib(total_blocks)}, no more than what would "
            "stay (their inputs and one block recomputed)"
        )
        return []
    before = ctx.activation_bytes
    hf = is_hf(ctx.model)
    model = ctx.names.model or "model"
    where = ", ".join(ctx.expr(p) for p, _ in groups)
    cls = type(ctx.model.get_submodule(blocks[0])).__name__
    why = [
        f"{len(blocks)} {cls} blocks in {where} save {mib(total_blocks)} of the "
        f"{mib(before)} of activations measured in training cell "
        f"[{ctx.training.execution_count if ctx.training else '?'}]",
        f"with checkpointing each keeps only its input ({mib(sum(inputs))} in all); in "
        f"backward one block at a time is recomputed (the largest: {mib(max(saved))})",
        f"forward + backward peak: {mib(peak_before)} -> {mib(peak_after)} (with the "
        "gradients allocated in backward)",
    ]
    if ctx.step is not None:
        why[-1] = (
            f"one training step measured at a {mib(ctx.step.peak)} peak: about "
            f"{mib(ctx.step.peak - peak_saving)} with checkpointing (the blocks' activations "
            "give way to their inputs and one block recomputed at a time)"
        )
    if a.batchnorm:
        why.append("BatchNorm inside the blocks updates its running statistics twice a step")
    sid = "checkpoint:" + ("hf" if hf else _path_id(groups[0][0]))
    pred = predicted(before, before - saving, saving, peak_saving)
    if hf:
        code, undo = hf_cells(sid, model)
        title = f"Gradient checkpointing ({type(ctx.model).__name__}'s own switch)"
    else:
        exprs = [ctx.expr(p) for p, _ in groups]
        code, undo = block_cells(sid, exprs, len(blocks), cls)
        title = f"Checkpoint the {len(blocks)} {cls} blocks of {where}"
    return [suggestion(sid, "checkpointing", title, why, pred, COST, "enable", code, undo)]


def hf_cells(sid: str, model: str) -> tuple[str, str]:
    code = (
        f"# vramscope: {sid}\n"
        "# Activation checkpointing through the model's own switch: activations are\n"
        "# recomputed in backward instead of kept. Re-running this cell is harmless.\n"
        f"{model}.gradient_checkpointing_enable(\n"
        '    gradient_checkpointing_kwargs={"use_reentrant": False}\n'
        ")\n"
    )
    undo = f"# vramscope: undo {sid}\n{model}.gradient_checkpointing_disable()\n"
    return code, undo


def _blocks_expr(exprs: list[str]) -> str:
    return exprs[0] if len(exprs) == 1 else "[" + ", ".join(f"*{e}" for e in exprs) + "]"


def _path_id(path: str) -> str:
    """The suggestion id's part for a container path: the path when every part is an
    identifier or an index, else ``blocks`` (ids are read back from marker comments)."""
    parts = path.split(".")
    if path and all(safe_word(p) == p or (p.isdecimal() and p.isascii()) for p in parts):
        return path
    return "blocks" if path else "model"


def block_cells(sid: str, exprs: list[str], count: int, cls: str) -> tuple[str, str]:
    blocks = _blocks_expr(exprs)
    cls = safe_word(cls)
    code = (
        f"# vramscope: {sid}\n"
        f"# Activation checkpointing of the {count} {cls} blocks: their activations are\n"
        "# recomputed in backward instead of kept (non-reentrant torch.utils.checkpoint).\n"
        "# Re-running this cell is harmless; the undo cell restores the plain forwards.\n"
        "import torch\n"
        "import torch.utils.checkpoint\n"
        "\n"
        "\n"
        "def _checkpointed(block):\n"
        "    forward = block.forward\n"
        "\n"
        "    def checkpointed_forward(*args, **kwargs):\n"
        "        if block.training and torch.is_grad_enabled():\n"
        "            return torch.utils.checkpoint.checkpoint(\n"
        "                forward, *args, use_reentrant=False, **kwargs\n"
        "            )\n"
        "        return forward(*args, **kwargs)\n"
        "\n"
        "    checkpointed_forward.plain_forward = forward\n"
        "    # the block's own instance-level forward, if it had one: the undo cell puts it back\n"
        '    checkpointed_forward.own_forward = vars(block).get("forward")\n'
        "    return checkpointed_forward\n"
        "\n"
        "\n"
        f"for _block in {blocks}:\n"
        '    if not hasattr(_block.forward, "plain_forward"):\n'
        "        _block.forward = _checkpointed(_block)\n"
    )
    undo = (
        f"# vramscope: undo {sid}\n"
        f"for _block in {blocks}:\n"
        '    _forward = vars(_block).get("forward")\n'
        '    if hasattr(_forward, "plain_forward"):\n'
        '        _own = getattr(_forward, "own_forward", None)\n'
        "        if _own is None:\n"
        "            del _block.forward  # back to the class's forward\n"
        "        else:\n"
        "            _block.forward = _own  # back to the block's own forward\n"
    )
    return code, undo

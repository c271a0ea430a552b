"""Lightning's own settings: the ``Trainer(...)`` call rewritten.

A Lightning ``Trainer`` is built for one ``fit`` (a second ``fit`` past ``max_steps`` trains
nothing), so the user runs the cell that builds it before each ``fit``: each card's cell is
that cell with one keyword set (``precision="bf16-mixed"``, ``accumulate_grad_batches=k``),
its other text unchanged. Accumulation also needs the micro-batch: the ``DataLoader`` that
``fit`` takes is rebuilt, after the Trainer line, with ``batch_size`` divided by ``k`` and
its other settings carried over (once: the original is kept for the undo cell, so running
the cell again does not divide again). The model's own checkpointing is the checkpointing
technique's card, kept as it is (the LightningModule is the user's module).

Predictions are the manual techniques' figures (autocast's replay, accumulation's).
"""

from __future__ import annotations

import ast
from typing import Any

from ...messages.optimize import Suggestion
from ..codegen import CannotRewrite, checked, replace_call_kwarg
from ..context import Context
from ..names import CellSource, resolve
from .carry import STASH, wrap_comment
from .frameworks import Run, accumulation_card, assigning_call, from_card, plain_expr

LOADER_SKIPPED = ("dataset", "batch_size", "shuffle", "sampler", "batch_sampler")


def suggest(ctx: Context, run: Run, manual: dict[str, Suggestion]) -> list[Suggestion]:
    trainer = resolve(ast.parse(run.trainer, mode="eval").body, ctx.ns)
    built = run.built
    call = assigning_call(built.source, run.trainer) if built else None
    if trainer is None or built is None or call is None:
        ctx.notes.append(
            f"lightning: the cell that built {run.trainer} was not found: its settings "
            "(precision, accumulate_grad_batches) are not offered"
        )
        return []
    out = [
        _precision(ctx, run, trainer, built, call, manual.get("autocast")),
        _accumulation(ctx, run, trainer, built, call),
    ]
    return [s for s in out if s is not None]


def _precision(
    ctx: Context, run: Run, trainer: Any, built: CellSource, call: ast.Call, card: Any
) -> Suggestion | None:
    if card is None or str(getattr(trainer, "precision", "32-true")) not in ("32-true", "32"):
        return None
    value = '"16-mixed"' if card["id"] == "autocast:fp16" else '"bf16-mixed"'
    sid = "lightning:" + value.strip('"')
    code = _rewritten(ctx, built, call, "precision", value)
    if code is None:
        return None
    head = f"# vramscope: {sid}\n" + wrap_comment(
        f"Your Trainer cell with precision={value}: autocast around training_step "
        f"(the forward and the loss). Run it, then {run.trainer}.fit(...) again."
    )
    why = f"Lightning runs it for you: Trainer(precision={value})"
    title = f"Mixed precision: Trainer(precision={value})"
    return from_card(card, sid, title, why, "rewrite", (head + code, None), built)


def _accumulation(
    ctx: Context, run: Run, trainer: Any, built: CellSource, call: ast.Call
) -> Suggestion | None:
    loader_expr, loader = _fit_loader(ctx, run)
    torch = ctx.torch
    if loader_expr is None or not isinstance(loader, torch.utils.data.DataLoader):
        ctx.notes.append(
            "lightning: gradient accumulation not offered: fit does not take a DataLoader "
            "from the namespace (a datamodule or the module's train_dataloader())"
        )
        return None
    batch = loader.batch_size
    sampler = loader.sampler
    plain_sampler = isinstance(
        sampler, (torch.utils.data.RandomSampler, torch.utils.data.SequentialSampler)
    )
    if not isinstance(batch, int) or batch < 2 or not plain_sampler:
        return None
    found = accumulation_card(ctx, batch)
    if found is None:
        return None
    card, k = found
    steps = int(getattr(trainer, "accumulate_grad_batches", 1) or 1)
    sid = f"lightning:accumulate:{k}"
    code = _rewritten(ctx, built, call, "accumulate_grad_batches", str(steps * k))
    if code is None:
        return None
    head = f"# vramscope: {sid}\n" + wrap_comment(
        f"Your Trainer cell with accumulate_grad_batches={steps * k}, and {loader_expr} "
        f"rebuilt in micro-batches of {batch // k} (was {batch}), its other settings kept: "
        f"each optimizer step sees the same samples. Run it, then {run.trainer}.fit(...) "
        "again. Re-running it keeps the micro-batch; the undo cell puts the DataLoader back."
    )
    tail = (
        "\n\nimport inspect\n\nimport torch\n\n"
        f'{STASH} = globals().setdefault("{STASH}", {{}})\n'
        f'_old = {STASH}.setdefault("{sid}", {{"loader": {loader_expr}}})["loader"]\n'
        "_settings = {\n"
        "    k: getattr(_old, k)\n"
        "    for k in inspect.signature(type(_old)).parameters\n"
        f"    if k not in {LOADER_SKIPPED!r} and hasattr(_old, k)\n"
        "}\n"
        f"{loader_expr} = type(_old)(\n"
        f"    _old.dataset,\n"
        f"    batch_size={batch // k},\n"
        "    shuffle=isinstance(_old.sampler, torch.utils.data.RandomSampler),\n"
        "    **_settings,\n"
        ")\n"
        "del _old, _settings\n"
    )
    undo = (
        f"# vramscope: undo {sid}\n"
        + wrap_comment(
            f"Back to the DataLoader {loader_expr} was; run your Trainer cell as it was "
            "(without accumulate_grad_batches) before the next fit."
        )
        + f'{STASH} = globals().setdefault("{STASH}", {{}})\n'
        + f'_kept = {STASH}.pop("{sid}", None)\n'
        + "if _kept is None:\n"
        + f'    print("nothing to undo: the {sid} cell has not run, or was undone")\n'
        + "else:\n"
        + f'    {loader_expr} = _kept["loader"]\n'
        + "    del _kept\n"
    )
    why = (
        f"Lightning runs it for you: Trainer(accumulate_grad_batches={steps * k}) with "
        f"{loader_expr} in batches of {batch // k}"
    )
    title = (
        f"Gradient accumulation: Trainer(accumulate_grad_batches={steps * k}), batches of "
        f"{batch // k}"
    )
    cells = (checked(head + code.rstrip("\n") + tail), checked(undo))
    return from_card(card, sid, title, why, "rewrite", cells, built)


def _rewritten(
    ctx: Context, built: CellSource, call: ast.Call, name: str, value: str
) -> str | None:
    """The Trainer cell with ``name=value`` set, or None (and a note) when it cannot be."""
    try:
        return set_keyword(built.source, call, name, value)
    except CannotRewrite as err:
        ctx.notes.append(f"lightning: {name}={value} not offered ({err})")
        return None


def _fit_loader(ctx: Context, run: Run) -> tuple[str | None, Any]:
    """The DataLoader the training cell's ``fit`` takes: (its expression, the object)."""
    tree = ast.parse(ctx.training.source) if ctx.training else None
    for node in ast.walk(tree) if tree is not None else ():
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr != "fit" or plain_expr(ast.unparse(node.func.value)) != run.trainer:
            continue
        arg = next((k.value for k in node.keywords if k.arg == "train_dataloaders"), None)
        if arg is None and len(node.args) >= 2:
            arg = node.args[1]
        text = plain_expr(ast.unparse(arg)) if arg is not None else None
        if text is not None:
            return text, resolve(ast.parse(text, mode="eval").body, ctx.ns)
    return None, None


def set_keyword(source: str, call: ast.Call, name: str, value: str) -> str:
    """``source`` with keyword ``name=value`` of ``call`` set: an existing one's value
    replaced, else added after the last argument; nothing else changes."""
    if any(k.arg == name for k in call.keywords):
        return replace_call_kwarg(source, call, name, value)
    if any(k.arg is None for k in call.keywords):
        raise CannotRewrite(f"the call takes **settings that may hold {name}")
    lines = source.splitlines(keepends=True)
    last = max(
        [*call.args, *(k.value for k in call.keywords)],
        key=lambda n: (n.end_lineno or 0, n.end_col_offset or 0),
        default=None,
    )
    if last is not None:
        row, col, text = (last.end_lineno or 1) - 1, last.end_col_offset or 0, f", {name}={value}"
    else:  # Trainer(): before the closing parenthesis
        row, col, text = (
            (call.end_lineno or 1) - 1,
            (call.end_col_offset or 1) - 1,
            f"{name}={value}",
        )
    raw = lines[row].encode("utf-8")  # AST columns are UTF-8 byte offsets
    lines[row] = (raw[:col] + text.encode("utf-8") + raw[col:]).decode("utf-8")
    return checked("".join(lines))

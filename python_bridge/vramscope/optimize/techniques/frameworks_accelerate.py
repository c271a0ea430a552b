"""``accelerate``'s own settings, for a hand-written loop over an ``Accelerator``
(``accelerator.backward(loss)``).

The ``Accelerator`` owns mixed precision and gradient accumulation, and its state is one per
process (``AcceleratorState`` and ``GradientState`` share a class-level dict): a new
``Accelerator`` with other settings is refused while the old state stands. Each cell keeps
the old accelerator, the objects it prepared and both shared states for the undo cell, clears
the states, builds the user's own ``Accelerator(...)`` call again with one keyword set, and
prepares the user's objects with it:

- mixed precision (an enable cell below the cell that built the accelerator):
  ``mixed_precision="bf16"`` (``"fp16"`` where the autocast technique picks fp16), the model
  prepared again (its forward wrapped in autocast) and the optimizer's inner optimizer
  wrapped again (its state kept; fp16's loss scaler is the new accelerator's);
- gradient accumulation (the training cell rewritten): ``gradient_accumulation_steps=k``,
  the loader rebuilt in micro-batches of ``batch/k`` (its other settings kept) and prepared,
  the loop body under ``with accelerator.accumulate(model):``.

The set-up runs once (re-running a cell changes nothing more); the undo cell puts back the
very objects and both shared states. Checkpointing is the model's own switch: the
checkpointing technique's cards stay as they are. Predictions are the manual techniques'
figures (autocast's replay, accumulation's).
"""

from __future__ import annotations

import ast
from typing import Any

from ...messages.optimize import Suggestion
from ..codegen import CannotRewrite, checked, wrap_loop_body
from ..context import Context
from ..names import resolve
from .carry import STASH, wrap_comment
from .frameworks import Run, accumulation_card, assigning_call, from_card, plain_expr
from .frameworks_lightning import set_keyword

#: what ``prepare`` sets on a model (restored by the undo cell as they were)
PREPARED = ("forward", "_original_forward", "_is_accelerate_prepared")
#: DataLoader settings the rebuilt loader takes from the cell, not from the old loader
LOADER_SKIPPED = ("dataset", "batch_size", "shuffle", "sampler", "batch_sampler", "drop_last")
STATES = "(AcceleratorState._shared_state, GradientState._shared_state)"
#: the rebuilt loader's settings taken from the old one
SETTINGS = [
    "_settings = {",
    "    k: getattr(_base, k)",
    "    for k in inspect.signature(type(_base)).parameters",
    "    if k not in _skipped and hasattr(_base, k)",
    "}",
]


def suggest(ctx: Context, run: Run, manual: dict[str, Suggestion]) -> list[Suggestion]:
    accelerator = resolve(ast.parse(run.trainer, mode="eval").body, ctx.ns)
    built = run.built
    call = assigning_call(built.source, run.trainer) if built else None
    text = ast.get_source_segment(built.source, call) if built and call else None
    model, opt = _plain(ctx.names.model), _plain(ctx.names.optimizer)
    if accelerator is None or text is None or model is None or opt is None:
        ctx.notes.append(
            f"accelerate: the cell that built {run.trainer} or the model and optimizer the "
            "loop uses were not found: its settings (mixed_precision, "
            "gradient_accumulation_steps) are not offered"
        )
        return []
    found = [
        _precision(ctx, run, accelerator, text, (model, opt), manual.get("autocast")),
        _accumulation(ctx, run, accelerator, text, (model, opt)),
    ]
    return [s for s in found if s is not None]


def _plain(expr: str | None) -> str | None:
    return plain_expr(expr) if expr else None


def _precision(
    ctx: Context, run: Run, accelerator: Any, text: str, names: tuple[str, str], card: Any
) -> Suggestion | None:
    if card is None or str(getattr(accelerator, "mixed_precision", "no")) != "no":
        return None
    value = '"fp16"' if card["id"] == "autocast:fp16" else '"bf16"'
    sid = "accelerate:" + value.strip('"')
    new = _call(ctx, text, "mixed_precision", value)
    if new is None:
        return None
    model, opt = names
    acc = run.trainer
    head = f"# vramscope: {sid}\n" + wrap_comment(
        f"Mixed precision through accelerate's own setting: Accelerator(mixed_precision="
        f"{value}) prepares {model} again (autocast around its forward) and {opt} (its state "
        "kept). The next run of your training cell uses them. Re-running this cell changes "
        "nothing more; the undo cell puts the previous accelerator and objects back."
    )
    prepare = [
        f'vars({model}).pop("_is_accelerate_prepared", None)  # prepared again: autocast',
        f"{model} = {acc}.prepare({model})",
        f'{opt} = {acc}.prepare(getattr({opt}, "optimizer", {opt}))',
    ]
    code = head + _setup(sid, acc, names, new, prepare, {})
    undo = _undo(sid, acc, names, {}, "run your training cell as it is")
    why = f"accelerate runs it for you: Accelerator(mixed_precision={value})"
    title = f"Mixed precision: Accelerator(mixed_precision={value})"
    cells = (checked(code), checked(undo))
    return from_card(card, sid, title, why, "enable", cells, run.built)


def _accumulation(
    ctx: Context, run: Run, accelerator: Any, text: str, names: tuple[str, str]
) -> Suggestion | None:
    training, region = ctx.training, ctx.region
    if training is None or region is None or region.loop is None:
        return None
    if ".accumulate(" in training.source:
        ctx.notes.append(
            "gradient accumulation: the training cell already runs under "
            f"{run.trainer}.accumulate(...): to split further, raise its "
            "gradient_accumulation_steps"
        )
        return None
    loader_expr, loader = _loop_loader(ctx, region.loop)
    batch = getattr(loader, "total_batch_size", None) or getattr(loader, "batch_size", None)
    batches = getattr(loader, "batch_sampler", None)
    if loader_expr is None or not isinstance(batch, int) or batch < 2 or batches is None:
        ctx.notes.append(
            "accelerate: gradient accumulation not offered: the loop does not iterate a "
            "DataLoader from the namespace with a batch size"
        )
        return None
    found = accumulation_card(ctx, batch)
    if found is None:
        return None
    card, k = found
    steps = int(getattr(accelerator, "gradient_accumulation_steps", 1) or 1)
    new = _call(ctx, text, "gradient_accumulation_steps", str(steps * k))
    if new is None:
        return None
    model, opt = names
    acc = run.trainer
    sid = f"accelerate:accumulate:{k}"
    try:
        loop = wrap_loop_body(training.source, region, f"with {acc}.accumulate({model}):")
    except CannotRewrite as err:
        ctx.notes.append(f"accelerate: gradient accumulation not offered ({err})")
        return None
    head = f"# vramscope: {sid}\n" + wrap_comment(
        f"Your training cell with gradient accumulation through accelerate's own setting: "
        f"Accelerator(gradient_accumulation_steps={steps * k}), {loader_expr} rebuilt in "
        f"micro-batches of {batch // k} (was {batch}, its other settings kept) and the loop "
        f"body under {acc}.accumulate({model}): {opt} steps (and zeroes) once every "
        f"{steps * k} micro-batches, and {acc}.backward divides the loss, so each step sees "
        "the same samples. The loop now counts micro-batches. The set-up runs once; the undo "
        "cell puts the previous accelerator and objects back."
    )
    prepare = [
        f"{model} = {acc}.prepare({model})  # known to the new accelerator, as it was",
        f'{opt} = {acc}.prepare(getattr({opt}, "optimizer", {opt}))',
        f'_base = getattr({loader_expr}, "base_dataloader", {loader_expr})',
        f"_batches = {loader_expr}.batch_sampler",
        f"_skipped = {_tuple(LOADER_SKIPPED)}",
        *SETTINGS,
        f"{loader_expr} = {acc}.prepare(",
        "    type(_base)(",
        f"        {loader_expr}.dataset,",
        f"        batch_size={batch // k},",
        "        shuffle=isinstance(_batches.sampler, torch.utils.data.RandomSampler),",
        '        drop_last=getattr(_batches, "drop_last", False),',
        "        **_settings,",
        "    )",
        ")",
        "del _base, _batches, _skipped, _settings",
    ]
    extra = {"loader": loader_expr}
    setup = "import inspect\n\nimport torch\n" + _setup(sid, acc, names, new, prepare, extra)
    code = head + setup + "\n" + loop
    undo = _undo(sid, acc, names, extra, "run your training cell as it was")
    why = (
        f"accelerate runs it for you: Accelerator(gradient_accumulation_steps={steps * k}) "
        f"with {loader_expr} in batches of {batch // k} and {acc}.accumulate({model})"
    )
    title = (
        f"Gradient accumulation: Accelerator(gradient_accumulation_steps={steps * k}), "
        f"batches of {batch // k}"
    )
    cells = (checked(code), checked(undo))
    return from_card(card, sid, title, why, "rewrite", cells, training)


def _call(ctx: Context, text: str, name: str, value: str) -> str | None:
    """The user's ``Accelerator(...)`` call with ``name=value`` set, or None (and a note)."""
    try:
        tree = ast.parse(text, mode="eval")
        if not isinstance(tree.body, ast.Call):
            raise CannotRewrite("the accelerator is not built by a call")
        return set_keyword(text, tree.body, name, value)
    except (CannotRewrite, SyntaxError) as err:
        ctx.notes.append(f"accelerate: {name}={value} not offered ({err})")
        return None


def _setup(
    sid: str,
    acc: str,
    names: tuple[str, str],
    new: str,
    prepare: list[str],
    extra: dict[str, str],
) -> str:
    """The once-only set-up: the old objects and states kept, the states cleared, the new
    accelerator built (``new``: the user's call with the change) and ``prepare`` run."""
    model, opt = names
    kept = "".join(f'        "{k}": {v},\n' for k, v in extra.items())
    if "\n" in new:  # one line, as its own statement in the block
        new = ast.unparse(ast.parse(new, mode="eval"))
    return (
        "from accelerate.state import AcceleratorState, GradientState\n\n"
        f'{STASH} = globals().setdefault("{STASH}", {{}})\n'
        f"_states = {STATES}\n"
        f'if "{sid}" not in {STASH}:\n'
        f'    {STASH}["{sid}"] = {{\n'
        f'        "accelerator": {acc},\n'
        f'        "optimizer": {opt},\n'
        f'        "model": {{\n'
        "            k: v\n"
        f"            for k, v in vars({model}).items()\n"
        f"            if k in {_tuple(PREPARED)}\n"
        "        },\n"
        '        "states": tuple(dict(s) for s in _states),\n' + kept + "    }\n"
        "    # one accelerator state per process: cleared so that the new settings take\n"
        "    AcceleratorState._reset_state()\n"
        "    GradientState._reset_state()\n"
        f"    {acc} = {new}\n" + "".join(f"    {line}\n" for line in prepare) + "del _states\n"
    )


def _undo(sid: str, acc: str, names: tuple[str, str], extra: dict[str, str], then: str) -> str:
    model, opt = names
    return (
        f"# vramscope: undo {sid}\n"
        + wrap_comment(
            f"Back to the accelerator, {opt}"
            + "".join(f", {v}" for v in extra.values())
            + f" and {model}'s prepared forward as they were before the {sid} cell, and "
            f"accelerate's shared state with them; then {then}."
        )
        + "from accelerate.state import AcceleratorState, GradientState\n\n"
        + f'{STASH} = globals().setdefault("{STASH}", {{}})\n'
        + f'_kept = {STASH}.pop("{sid}", None)\n'
        + "if _kept is None:\n"
        + f'    print("nothing to undo: the {sid} cell has not run, or was undone")\n'
        + "else:\n"
        + f"    _states = {STATES}\n"
        + '    for _shared, _old in zip(_states, _kept["states"]):\n'
        + "        _shared.clear()\n"
        + "        _shared.update(_old)\n"
        + f"    for _k in {_tuple(PREPARED)}:\n"
        + f"        vars({model}).pop(_k, None)\n"
        + f'    vars({model}).update(_kept["model"])\n'
        + f'    {acc} = _kept["accelerator"]\n'
        + f'    {opt} = _kept["optimizer"]\n'
        + "".join(f'    {v} = _kept["{k}"]\n' for k, v in extra.items())
        + "    del _kept, _states, _shared, _old, _k\n"
    )


def _tuple(words: tuple[str, ...]) -> str:
    """A tuple of vramscope's own words as code, in double quotes."""
    return "(" + ", ".join(f'"{w}"' for w in words) + ")"


def _loop_loader(ctx: Context, loop: ast.For) -> tuple[str | None, Any]:
    """The loader the step's loop iterates (``for b in loader``, ``enumerate(loader)``):
    (its expression, the object)."""
    node: ast.expr = loop.iter
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "enumerate"
        and node.args
    ):
        node = node.args[0]
    text = plain_expr(ast.unparse(node))
    if text is None:
        return None, None
    return text, resolve(ast.parse(text, mode="eval").body, ctx.ns)

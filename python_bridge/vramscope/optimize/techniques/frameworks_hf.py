"""The ``transformers.Trainer``'s own settings: ``TrainingArguments`` keywords.

Each card's cell gives the trainer new arguments the way the Trainer's own hyperparameter
search does between two ``train()`` calls (transformers 4.40-5.x): a copy of
``trainer.args`` with the keywords changed (``dataclasses.replace``, which runs
``TrainingArguments.__post_init__`` and sets the accelerator state up for them), the
per-device batch size the Trainer keeps, and a new ``Accelerator`` (mixed precision is the
accelerator's). The next ``trainer.train()`` runs with them. The undo cell puts back the
very arguments object it replaced (or, when other arguments were set since, only its own
keywords' old values), and what ``train()`` changed on the model (checkpointing turned on,
the autocast wrapper of the model's forward).

Predictions are the manual techniques' figures: checkpointing's for the model's own switch
(what ``gradient_checkpointing=True`` turns on), autocast's replay for ``bf16``/``fp16``,
accumulation's for the per-device batch, the optimizer's state for Adafactor.
"""

from __future__ import annotations

from typing import Any

from ...messages.optimize import Suggestion
from ..context import Context
from . import optimizer as lighter
from .base import mib, predicted, suggestion
from .carry import STASH, wrap_comment
from .frameworks import (
    Run,
    accumulation_card,
    cell_calling,
    cell_label,
    from_card,
    user_of,
)

ARGS = "TrainingArguments"
ADAMW = ("adamw_torch", "adamw_torch_fused", "adamw_hf")


def suggest(ctx: Context, run: Run, manual: dict[str, Suggestion]) -> list[Suggestion]:
    trainer = _resolve(ctx, run.trainer)
    args = getattr(trainer, "args", None)
    if (
        trainer is None
        or args is None
        or not hasattr(trainer, "create_accelerator_and_postprocess")
    ):
        return []
    where = cell_label(cell_calling(ctx.cells, ARGS))
    made = [
        _checkpointing(ctx, run, args, manual.get("checkpointing"), where),
        _precision(run, args, manual.get("autocast"), where),
        _accumulation(ctx, run, args, where),
        _adafactor(ctx, run, trainer, args, where),
    ]
    return [card for card in made if card is not None]


def _resolve(ctx: Context, expr: str) -> Any:
    import ast

    from ..names import resolve

    return resolve(ast.parse(expr, mode="eval").body, ctx.ns)


def _checkpointing(
    ctx: Context, run: Run, args: Any, card: Suggestion | None, where: str
) -> Suggestion | None:
    if card is None or getattr(args, "gradient_checkpointing", False):
        return None
    sid = "trainer:gradient_checkpointing"
    changes = [
        ("gradient_checkpointing", "True"),
        ("gradient_checkpointing_kwargs", '{"use_reentrant": False}'),
    ]
    model = f"{run.trainer}.model"
    code, undo = cells(
        sid,
        run.trainer,
        changes,
        "Gradient checkpointing through the Trainer's own arguments: train() turns on the "
        "model's checkpointing, whose activations are recomputed in backward instead of kept.",
        undo_lines=[f"{model}.gradient_checkpointing_disable()  # train() turned it on"],
    )
    title = "Gradient checkpointing: TrainingArguments(gradient_checkpointing=True)"
    return from_card(card, sid, title, _keep(changes, where), "enable", (code, undo), run.built)


def _precision(run: Run, args: Any, card: Suggestion | None, where: str) -> Suggestion | None:
    if card is None or getattr(args, "bf16", False) or getattr(args, "fp16", False):
        return None
    flag = "fp16" if card["id"] == "autocast:fp16" else "bf16"
    sid = f"trainer:{flag}"
    changes = [(flag, "True")]
    model = f"{run.trainer}.model"
    code, undo = cells(
        sid,
        run.trainer,
        changes,
        f"Mixed precision through the Trainer's own arguments: {flag} autocast around the "
        "forward and the loss (the accelerator's, set up again here).",
        enable_lines=reprepare(run.trainer),
        undo_lines=[
            "# the forward train() wrapped in autocast goes back",
            f'_forward = vars({model}).pop("_original_forward", None)',
            f'if getattr(_forward, "__func__", 0) is type({model}).forward:',
            f'    vars({model}).pop("forward", None)  # the class\'s own forward',
            "elif _forward is not None:",
            f"    {model}.forward = _forward",
            *reprepare(run.trainer),
        ],
    )
    title = f"Mixed precision: TrainingArguments({flag}=True)"
    return from_card(card, sid, title, _keep(changes, where), "enable", (code, undo), run.built)


def _accumulation(ctx: Context, run: Run, args: Any, where: str) -> Suggestion | None:
    batch = getattr(args, "per_device_train_batch_size", None)
    steps = getattr(args, "gradient_accumulation_steps", 1)
    if not isinstance(batch, int) or not isinstance(steps, int) or batch < 2:
        return None
    found = accumulation_card(ctx, batch)
    if found is None:
        return None
    card, k = found
    sid = f"trainer:accumulate:{k}"
    changes = [
        ("per_device_train_batch_size", str(batch // k)),
        ("gradient_accumulation_steps", str(steps * k)),
    ]
    code, undo = cells(
        sid,
        run.trainer,
        changes,
        f"Gradient accumulation through the Trainer's own arguments: micro-batches of "
        f"{batch // k} (was {batch}), {steps * k} of them per optimizer step (was {steps}): "
        "the same samples per step.",
    )
    title = (
        f"Gradient accumulation: per_device_train_batch_size={batch // k}, "
        f"gradient_accumulation_steps={steps * k}"
    )
    return from_card(card, sid, title, _keep(changes, where), "enable", (code, undo), run.built)


def _adafactor(ctx: Context, run: Run, trainer: Any, args: Any, where: str) -> Suggestion | None:
    """``optim="adafactor"`` when the Trainer made an AdamW (from ``args.optim``) whose state
    outweighs the step's saved activations."""
    held = getattr(trainer, "optimizer", None)
    inner = getattr(held, "optimizer", held)  # accelerate's AcceleratedOptimizer wraps it
    torch = ctx.torch
    if str(getattr(args, "optim", "")).split(".")[-1].lower() not in ADAMW:
        return None
    if not isinstance(inner, torch.optim.Optimizer) or type(inner).__name__ not in (
        "Adam",
        "AdamW",
    ):
        return None
    if user_of(ctx, inner) or user_of(ctx, held):
        return None  # the user's own optimizer (Trainer(optimizers=...)): args.optim is unused
    now = lighter.state_bytes(inner, torch)
    activations = ctx.activation_bytes
    after = lighter.adafactor_bytes(inner)
    if now == 0 or now <= activations or after >= now:
        return None
    sid = "trainer:adafactor"
    changes = [("optim", '"adafactor"')]
    code, undo = cells(
        sid,
        run.trainer,
        changes,
        "A lighter optimizer through the Trainer's own arguments: Adafactor (factored second "
        "moments, no first moment) instead of AdamW, made by the next train(); its updates "
        "differ: watch the loss. The AdamW it replaces, with its state, is kept for the undo "
        f"cell; {STASH}.clear() frees it.",
        enable_lines=[f"{run.trainer}.optimizer = None  # train() makes the new one"],
        stash_extra={"optimizer": f"{run.trainer}.optimizer"},
        undo_lines=[f'{run.trainer}.optimizer = _kept["optimizer"]  # the AdamW, with its state'],
    )
    why = [
        f"the Trainer's {type(inner).__name__} holds {mib(now)} of state (two moments per "
        f"parameter), more than the {mib(activations)} of activations the step saves",
        f"Adafactor keeps a row and a column of second moments per weight matrix: {mib(after)}",
        _keep(changes, where),
    ]
    title = 'A lighter optimizer: TrainingArguments(optim="adafactor")'
    cost = ("different updates (no momentum); the learning rate may need tuning", None)
    pred = predicted(None, None, now - after, None)
    target = run.built.ref if run.built else None
    return suggestion(sid, "optimizer", title, why, pred, cost, "enable", code, undo, target)


def reprepare(trainer: str) -> list[str]:
    """Lines that let the next ``train()`` prepare the model and the optimizer for the new
    accelerator (accelerate leaves an object it prepared once as it is: the model's forward
    would keep its precision, an fp16 optimizer its loss scaler)."""
    return [
        "# the next train() prepares the model and the optimizer (its state kept) again",
        f'vars({trainer}.model).pop("_is_accelerate_prepared", None)',
        f'{trainer}.optimizer = getattr({trainer}.optimizer, "optimizer", {trainer}.optimizer)',
    ]


def _keep(changes: list[tuple[str, str]], where: str) -> str:
    keywords = ", ".join(f"{k}={v}" for k, v in changes)
    return f"to keep it, pass {keywords} to {ARGS}(...) in {where}"


def cells(
    sid: str,
    trainer: str,
    changes: list[tuple[str, str]],
    about: str,
    enable_lines: list[str] | None = None,
    undo_lines: list[str] | None = None,
    stash_extra: dict[str, str] | None = None,
) -> tuple[str, str]:
    """The enable and undo cells of ``changes`` (keyword, literal) to ``trainer``'s
    arguments. ``trainer`` is a canonical expression (frameworks.plain_expr); keywords and
    literals are vramscope's own."""
    keys = ", ".join(f'"{k}"' for k, _ in changes)
    extra = "".join(f', "{k}": {v}' for k, v in (stash_extra or {}).items())
    code = (
        f"# vramscope: {sid}\n"
        + wrap_comment(
            about + f" Takes effect at the next {trainer}.train(). Re-running this cell is "
            "harmless; the undo cell puts the previous arguments back."
        )
        + "import dataclasses\n\n"
        + f'{STASH} = globals().setdefault("{STASH}", {{}})\n'
        + f'if "{sid}" not in {STASH}:\n'
        + f'    {STASH}["{sid}"] = {{"args": {trainer}.args{extra}}}\n'
        + f"{trainer}.args = dataclasses.replace(\n"
        + f"    {trainer}.args,\n"
        + "".join(f"    {k}={v},\n" for k, v in changes)
        + ")\n"
        + f'{STASH}["{sid}"]["set"] = {trainer}.args\n'
        + _use_args(trainer)
        + "".join(f"{line}\n" for line in enable_lines or [])
    )
    undo = (
        f"# vramscope: undo {sid}\n"
        + wrap_comment(
            f"Back to the arguments {trainer} had before the {sid} cell (that very object, or "
            "only these settings when other arguments were set since)."
        )
        + "import dataclasses\n\n"
        + f'{STASH} = globals().setdefault("{STASH}", {{}})\n'
        + f'_kept = {STASH}.pop("{sid}", None)\n'
        + "if _kept is None:\n"
        + f'    print("nothing to undo: the {sid} cell has not run, or was undone")\n'
        + "else:\n"
        + f'    if {trainer}.args is _kept.get("set"):\n'
        + "        # a copy sets the accelerator state up again as the old arguments describe\n"
        + '        dataclasses.replace(_kept["args"])\n'
        + f'        {trainer}.args = _kept["args"]\n'
        + "    else:\n"
        + f"        _old = {{k: getattr(_kept['args'], k) for k in ({keys},)}}\n"
        + f"        {trainer}.args = dataclasses.replace({trainer}.args, **_old)\n"
        + _use_args(trainer, "    ")
        + "".join(f"    {line}\n" for line in undo_lines or [])
        + "    del _kept\n"
    )
    from ..codegen import checked

    return checked(code), checked(undo)


def _use_args(trainer: str, indent: str = "") -> str:
    return (
        f"{indent}# as the Trainer's own hyperparameter search does between two train() calls\n"
        f"{indent}{trainer}._train_batch_size = {trainer}.args.train_batch_size\n"
        f"{indent}{trainer}.create_accelerator_and_postprocess()\n"
    )

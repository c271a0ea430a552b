"""LoRA-style freezing with ``peft`` where the optimizer's state dominates and the model is a
Hugging Face model (fine-tuning pretrained weights; a model trained from scratch needs all of
its weights trained): the base weights are frozen (no gradients, no optimizer state) and
rank-8 adapters on every linear layer are trained instead (``target_modules="all-linear"``:
``nn.Linear`` and transformers' ``Conv1D``, not the model's output embeddings).

Predicted exactly from what is held now: the optimizer's state (measured: every tensor in
``optimizer.state``) and the parameters' gradients go; the adapters' come, sized from the
linear layers' shapes and the optimizer's measured state per parameter (bytes per element of
its moments, plus its per-tensor scalars such as Adam's ``step``). The cell needs peft; it
says so when it is not installed (an import check), and it works without vramscope.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from ...messages.optimize import Suggestion
from ..codegen import checked, safe_word
from ..context import Context
from .base import mib, predicted, suggestion
from .carry import STASH, carried, enable_helpers, undo_cell, wrap_comment
from .optimizer import assignable, find_optimizer, state_bytes

RANK = 8
COST = (
    "trains rank-8 adapters instead of the full weights: fewer trainable parameters, "
    "usually a slightly lower final quality than full fine-tuning",
    None,
)


def adapter_shapes(model: Any, torch: Any) -> list[tuple[int, int]]:
    """(in, out) of every layer peft's "all-linear" targets."""
    head = None
    if callable(getattr(model, "get_output_embeddings", None)):
        try:
            head = model.get_output_embeddings()
        except Exception:
            head = None
    shapes = []
    for module in model.modules():
        if module is head:
            continue
        if isinstance(module, torch.nn.Linear):
            shapes.append((module.in_features, module.out_features))
        elif type(module).__name__ == "Conv1D" and getattr(module, "weight", None) is not None:
            nx, nf = module.weight.shape  # transformers' Conv1D: weight is (in, out)
            shapes.append((int(nx), int(nf)))
    return shapes


def is_pretrained(model: Any) -> bool:
    """A Hugging Face model (``transformers.PreTrainedModel``): what LoRA fine-tunes."""
    return any(c.__name__ == "PreTrainedModel" for c in type(model).__mro__)


def state_per_parameter(optimizer: Any, torch: Any) -> tuple[float, int] | None:
    """Measured: (bytes per element of the parameter-shaped state, bytes of the other
    tensors per parameter), from the first parameter that has state."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            state = optimizer.state.get(p)
            if not state:
                continue
            shaped = other = 0
            for value in state.values():
                if isinstance(value, torch.Tensor):
                    nbytes = value.numel() * value.element_size()
                    if value.shape == p.shape:
                        shaped += nbytes
                    else:
                        other += nbytes
            return shaped / max(1, p.numel()), other
    return None


def suggest(ctx: Context) -> list[Suggestion]:
    torch = ctx.torch
    name, optimizer = find_optimizer(ctx)
    model_name = ctx.names.model
    if optimizer is None or name is None or ctx.model is None or model_name is None:
        return []
    if not assignable(name) or not assignable(model_name) or hasattr(ctx.model, "peft_config"):
        return []
    if not is_pretrained(ctx.model):
        return []  # adapters fine-tune pretrained weights: a model trained from scratch needs all
    now = state_bytes(optimizer, torch)
    if now == 0 or now <= ctx.activation_bytes or len(optimizer.param_groups) != 1:
        return []
    per = state_per_parameter(optimizer, torch)
    shapes = adapter_shapes(ctx.model, torch)
    if per is None or not shapes:
        return []
    per_element, per_tensor = per
    params = list(ctx.model.parameters())
    elem = params[0].element_size() if params else 4
    grads = sum(p.grad.numel() * p.grad.element_size() for p in params if p.grad is not None)
    numel = sum(RANK * (i + o) for i, o in shapes)  # lora_A (r x in) + lora_B (out x r)
    adapters_state = int(numel * per_element) + 2 * len(shapes) * per_tensor
    adapters_grads = numel * elem if grads else 0  # gradients as they are held now
    saving = now + grads - adapters_state - adapters_grads
    if saving <= 0:
        return []
    cls = type(optimizer).__name__
    sid = "lora:peft"
    installed = importlib.util.find_spec("peft") is not None
    why = [
        f"{cls} `{name}` holds {mib(now)} of state and the parameters {mib(grads)} of "
        f"gradients, more than the {mib(ctx.activation_bytes)} of activations a step saves",
        f"rank-{RANK} adapters on the {len(shapes)} linear layers: {numel:,} trainable "
        f"parameters, {mib(adapters_state + adapters_grads)} of state and gradients",
    ]
    if not installed:
        why.append("peft is not installed in this kernel: the cell says so (pip install peft)")
    code, undo = lora_cells(sid, model_name, name, optimizer, torch)
    pred = predicted(None, None, saving, None)  # held between steps: no step-peak figure
    title = f"LoRA adapters (peft): freeze the base weights of {model_name}"
    return [suggestion(sid, "lora", title, why, pred, COST, "enable", code, undo)]


def lora_cells(sid: str, model: str, name: str, optimizer: Any, torch: Any) -> tuple[str, str]:
    """The enable cell (peft adapters; the optimizer rebuilt over them with every setting
    of ``name``; schedulers re-bound; the model, the old optimizer and every parameter's
    ``requires_grad`` kept) and the undo cell (adapters merged, all of those put back)."""
    cls = safe_word(type(optimizer).__name__)
    try:
        kept, _ = carried(type(optimizer), optimizer, torch)
    except Exception:  # the cell decides for itself; only the comment is left general
        kept = ["its settings"]
    about = (
        f"LoRA (peft): the base weights of {model} frozen, rank-{RANK} adapters on every "
        f"linear layer trained instead; {name} rebuilt as a {cls} over the adapters only, "
        f"with its settings ({', '.join(kept)}). Parameters frozen before stay frozen; LR "
        f"schedulers bound to {name} follow the new one. The model, the old optimizer (its "
        f"state moved to the CPU) and every parameter's requires_grad are kept in {STASH} "
        "for the undo cell, which merges the adapters back. Re-running this cell is harmless."
    )
    lora = (
        f"LoraConfig(r={RANK}, lora_alpha={2 * RANK}, lora_dropout=0.0, "
        'target_modules="all-linear")'
    )
    # the class by its torch.optim name where that is it (readable), else the old one's type
    own = type(optimizer)
    new_cls = (
        f"torch.optim.{own.__name__}"
        if getattr(torch.optim, own.__name__, None) is own
        else "type(_old)"
    )
    code = (
        f"# vramscope: {sid}\n" + wrap_comment(about) + "import inspect\n\nimport torch\n\n"
        "try:\n"
        "    from peft import LoraConfig, get_peft_model\n"
        "except ImportError as err:\n"
        '    raise ImportError("this cell needs peft: pip install peft") from err\n'
        "\n" + enable_helpers() + "\n" + f'{STASH} = globals().setdefault("{STASH}", {{}})\n'
        f'if "{sid}" not in {STASH} and not hasattr({model}, "peft_config"):\n'
        f"    _old = {name}\n"
        f'    {STASH}["{sid}"] = {{\n'
        f'        "model": {model},\n'
        '        "optimizer": _old,\n'
        f'        "requires_grad": [(_p, _p.requires_grad) for _p in {model}.parameters()],\n'
        '        "moved": _offload(_old),\n'
        "    }\n"
        f"    {model} = get_peft_model({model}, {lora})\n"
        f"    for _p in {model}.parameters():\n"
        "        if not _p.requires_grad:\n"
        "            _p.grad = None  # the frozen weights' gradients are not needed any more\n"
        f"    _adapters = [_p for _p in {model}.parameters() if _p.requires_grad]\n"
        "    _groups, _defaults = _carried_groups(type(_old), _old, _adapters)\n"
        f"    {name} = {new_cls}(_groups, **_defaults)\n"
        f"    _rebind_schedulers(_old, {name})\n"
        "    del _old, _adapters, _groups, _defaults\n"
    )
    undo = undo_cell(
        sid,
        f"The adapters merged into the weights; {model}, the {cls} that {name} was (with its "
        "state) and every parameter's requires_grad back as they were.",
        [
            f'if hasattr({model}, "peft_config"):',
            f"    {model}.merge_and_unload()  # the adapters merged into the base weights",
            f'{model} = _kept["model"]',
            'for _p, _flag in _kept["requires_grad"]:',
            "    _p.requires_grad_(_flag)",
            '_reload(_kept["moved"])',
            f'_rebind_schedulers({name}, _kept["optimizer"])',
            f'{name} = _kept["optimizer"]',
        ],
    )
    return checked(code), checked(undo)

"""Which of the namespace's models model insight reports, and the picker's list of them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import torch

from ..messages.insight import ModelInfo, model_info
from ..step_roots import trains_by_step
from ._torchutil import param_bytes


def choose(
    modules: list[tuple[str, torch.nn.Module]],
    override: Optional[str],
    watched: Optional[torch.nn.Module],
    watched_name: Optional[str],
    ran: Sequence[torch.nn.Module],
) -> tuple[Optional[str], Optional[torch.nn.Module]]:
    """The reported model and its name, in this order: ``override`` (a name, for one
    snapshot), the model the user chose (``watched``, or ``watched_name`` while it is bound),
    a LightningModule whose child ran, a model that ran (``ran``: measured in this cell) and
    is bound to no name, else the namespace's largest."""
    by_name = dict(modules)
    if override is not None:
        return (override, by_name[override]) if override in by_name else (override, None)
    if watched is not None:
        found = next((n for n, m in modules if m is watched), None)
        return found or watched_name or f"<{type(watched).__name__}>", watched
    if watched_name is not None and watched_name in by_name:
        return watched_name, by_name[watched_name]
    owners = [
        (n, m)
        for n, m in modules
        if trains_by_step(m) and any(c is r for c in m.children() for r in ran)
    ]
    if owners:  # a LightningModule whose training_step called its child
        return max(owners, key=lambda o: param_bytes(o[1]))
    if ran and not any(m is r for _, m in modules for r in ran):
        # the model that ran has no namespace name (holder.net, trainer.model)
        model = max(ran, key=param_bytes)
        return f"<{type(model).__name__}>", model
    if not modules:
        return None, None
    sizes = [(param_bytes(m), -i, n, m) for i, (n, m) in enumerate(modules)]
    best = max(sizes, key=lambda s: (s[0], s[1]))
    return best[2], best[3]


def model_infos(
    modules: list[tuple[str, torch.nn.Module]],
    chosen_name: Optional[str],
    chosen: Optional[torch.nn.Module],
) -> list[ModelInfo]:
    """The namespace's models for the picker, largest first (ties: namespace order).

    A module bound to several names is listed once (first name); a module that is a submodule
    of another listed module (``enc = model.encoder``) is left out, unless it is the chosen
    model. The chosen model is listed even when it is not in the namespace.
    """
    unique: dict[int, tuple[str, torch.nn.Module]] = {}
    for name, module in modules:
        unique.setdefault(id(module), (name, module))
    inner: set[int] = set()
    for _, module in unique.values():
        try:
            inner.update(id(sub) for sub in module.modules() if sub is not module)
        except Exception:
            continue
    listed = [(n, m) for mid, (n, m) in unique.items() if mid not in inner or m is chosen]
    if chosen is not None and chosen_name is not None and id(chosen) not in unique:
        listed.append((chosen_name, chosen))
    infos: list[ModelInfo] = []
    for name, module in listed:
        try:
            size = param_bytes(module)
        except Exception:
            size = 0
        infos.append(model_info(name, type(module).__name__, size))
    infos.sort(key=lambda info: -info["param_bytes"])
    return infos


def namespace_models(items: list[tuple[str, Any]]) -> tuple[list[tuple[str, Any]], list[Any]]:
    """The namespace's modules (name, module) and optimizers."""
    modules = [(n, v) for n, v in items if isinstance(v, torch.nn.Module)]
    return modules, [v for _, v in items if isinstance(v, torch.optim.Optimizer)]

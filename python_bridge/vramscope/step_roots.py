"""The modules whose forward may run a model's training step.

A model's step normally runs its own forward (``model(x)``). A PyTorch Lightning
``LightningModule`` is trained through its ``training_step``, which may call its submodules
directly (``self.net(x)``, ``self.encoder(x)``, ``functional_call(self.net, ...)``) and never
``self(...)``: for it, the step's forward is whichever of its direct children ran. Model
insight keeps its root hooks on those children too (insight.roots), and the step watch opens
a step at their forwards (optimize.stepwatch); inside the module's own forward they are
nested calls and count for nothing more.

Reads classes and children only; keeps no reference.
"""

from __future__ import annotations

from typing import Any

#: top-level packages whose ``LightningModule`` trains through ``training_step``
LIGHTNING = ("lightning", "pytorch_lightning")


def trains_by_step(module: Any) -> bool:
    """``module`` is a LightningModule (its class or a base comes from Lightning and has a
    ``training_step``)."""
    for klass in type(module).__mro__:
        package = (getattr(klass, "__module__", "") or "").split(".", 1)[0]
        if package in LIGHTNING and klass.__name__ == "LightningModule":
            return True
    return False


def forward_roots(module: Any) -> list[Any]:
    """``module``, and for a LightningModule its direct children: the modules whose forward
    may start its training step."""
    if not trains_by_step(module):
        return [module]
    try:
        return [module, *module.children()]
    except Exception:
        return [module]

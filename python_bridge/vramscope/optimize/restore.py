"""Put models and optimizers back as they were after a trial step (the batch-size finder).

Copies are kept on the CPU, so a snapshot of a CUDA model costs no device memory.
"""

from __future__ import annotations

import copy
import inspect
from typing import Any, Callable


def training_objects(
    torch: Any, step_fn: Callable[..., Any], model: Any, optimizer: Any
) -> tuple[list[Any], list[Any]]:
    """The models and optimizers to restore: those given, else those ``step_fn`` refers to
    (its globals and closure)."""
    models = [model] if model is not None else []
    optimizers = [optimizer] if optimizer is not None else []
    if model is None or optimizer is None:
        try:
            refs = inspect.getclosurevars(step_fn)
            values = [*refs.nonlocals.values(), *refs.globals.values()]
        except Exception:
            values = []
        for value in values:
            if model is None and isinstance(value, torch.nn.Module):
                models.append(value)
            if optimizer is None and isinstance(value, torch.optim.Optimizer):
                optimizers.append(value)
    return models, optimizers


def _to_cpu(value: Any) -> Any:
    if hasattr(value, "detach") and hasattr(value, "to"):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, dict):
        return {k: _to_cpu(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to_cpu(v) for v in value)
    return copy.deepcopy(value)


class Snapshot:
    def __init__(self, torch: Any, models: list[Any], optimizers: list[Any]) -> None:
        self.torch = torch
        self.models = [(m, _to_cpu(m.state_dict())) for m in models]
        self.grads = [
            (p, None if p.grad is None else p.grad.detach().to("cpu", copy=True))
            for m in models
            for p in m.parameters()
        ]
        self.optimizers = [(o, _to_cpu(o.state_dict())) for o in optimizers]

    def restore(self) -> None:
        torch = self.torch
        with torch.no_grad():
            for model, state in self.models:
                model.load_state_dict(state)
            for p, grad in self.grads:
                p.grad = None if grad is None else grad.to(p.device)
        for optimizer, state in self.optimizers:
            optimizer.load_state_dict(_to_cpu(state))
            # load_state_dict moves state to the parameters' device; an empty state stays empty

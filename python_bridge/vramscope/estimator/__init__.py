"""Training-memory estimator: parameters, gradients, optimizer state, master weights and
activations per GPU, for a model or a parameter count, under ZeRO / FSDP sharding."""

from __future__ import annotations

from .api import Estimate, compute, module_params, parse_param_count
from .measured import ActivationMemo, Measurement
from .optimizers import OPTIMIZER_NAMES
from .precisions import PRECISION_NAMES

__all__ = [
    "OPTIMIZER_NAMES",
    "PRECISION_NAMES",
    "ActivationMemo",
    "Estimate",
    "Measurement",
    "compute",
    "module_params",
    "parse_param_count",
]

"""Optimizers: the bytes of state they keep per parameter.

* SGD: no state. SGD with momentum: one buffer per parameter.
* Adam / AdamW: two moments per parameter (``exp_avg``, ``exp_avg_sq``).
* 8-bit Adam (bitsandbytes ``Adam8bit`` / ``AdamW8bit``): both moments in one byte each;
  the per-block quantization constants (one fp32 per 256-element block per moment, about
  0.03 bytes per parameter) are counted, tensors bitsandbytes keeps in 32 bits (those under
  4096 elements) are not.
* Adafactor (``torch.optim.Adafactor``, HF/fairseq without ``beta1``): a factored second
  moment, one row and one column vector (``rows + cols`` elements) per matrix, the full
  second moment for vectors. With a model instance the shapes give the exact figure; a bare
  parameter count has no shapes, so Adafactor's state is counted as 0 and the result's notes
  say so (it is below 1% of the parameters for matrices larger than about 200 x 200).

Step counters (one scalar per parameter tensor) are left out: a few bytes per tensor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .precisions import Precision

#: bitsandbytes' block size for 8-bit optimizer states
BNB_BLOCK = 256


@dataclass(frozen=True)
class Optimizer:
    name: str
    #: full-precision state elements per parameter (Adam 2, momentum 1, SGD 0)
    states: int
    kind: str = "dense"  # "dense", "8bit" or "factored"


_OPTIMIZERS = {
    "sgd": Optimizer("sgd", 0),
    "sgd-momentum": Optimizer("sgd-momentum", 1),
    "adam": Optimizer("adam", 2),
    "adamw": Optimizer("adamw", 2),
    "adam-8bit": Optimizer("adam-8bit", 2, "8bit"),
    "adamw-8bit": Optimizer("adamw-8bit", 2, "8bit"),
    "adafactor": Optimizer("adafactor", 1, "factored"),
}

_ALIASES = {
    "momentum": "sgd-momentum",
    "sgd_momentum": "sgd-momentum",
    "sgdm": "sgd-momentum",
    "adam8bit": "adam-8bit",
    "adamw8bit": "adamw-8bit",
    "adam_8bit": "adam-8bit",
    "adamw_8bit": "adamw-8bit",
    "paged_adamw_8bit": "adamw-8bit",
    "adamw_torch": "adamw",
    "adamw_bnb_8bit": "adamw-8bit",
}

OPTIMIZER_NAMES: tuple[str, ...] = tuple(_OPTIMIZERS)


def get_optimizer(name: object) -> Optimizer:
    """The Optimizer named ``name`` (case-insensitive); ValueError otherwise."""
    if isinstance(name, str):
        key = name.strip().lower()
        key = _ALIASES.get(key, key)
        if key in _OPTIMIZERS:
            return _OPTIMIZERS[key]
    raise ValueError(
        f"unknown optimizer {name!r}; known: {', '.join(OPTIMIZER_NAMES)} "
        f"(also: {', '.join(sorted(_ALIASES))})"
    )


def factored_elements(shapes: Sequence[Sequence[int]]) -> int:
    """Adafactor's second-moment elements for parameters of these shapes."""
    total = 0
    for shape in shapes:
        if len(shape) >= 2:
            lead = 1
            for dim in shape[:-2]:
                lead *= int(dim)
            total += lead * (int(shape[-2]) + int(shape[-1]))
        else:
            n = 1
            for dim in shape:
                n *= int(dim)
            total += n
    return total


def state_bytes(
    opt: Optimizer,
    precision: Precision,
    count: int,
    shapes: Sequence[Sequence[int]] | None,
) -> tuple[int, str | None]:
    """Bytes of optimizer state for ``count`` parameters, and a note when approximate."""
    if opt.kind == "8bit":
        blocks = -(-count // BNB_BLOCK)
        return opt.states * (count + 4 * blocks), None
    if opt.kind == "factored":
        if shapes is None:
            return 0, (
                "Adafactor's factored state (rows + cols per matrix) needs the parameter "
                "shapes: counted as 0 for a bare parameter count"
            )
        return factored_elements(shapes) * precision.state_bytes, None
    return opt.states * count * precision.state_bytes, None

"""Training precisions: bytes per parameter of each model-state part.

Names as in Lightning (``"32-true"``, ``"16-mixed"``, ``"bf16-mixed"``, ``"16-true"``,
``"bf16-true"``) and in accelerate (``"no"``, ``"fp16"``, ``"bf16"``; accelerate's are mixed
precision).

Mixed precision is counted as in the ZeRO paper (Rajbhandari et al., 2020, section 3.1):
half-precision parameters and gradients (2 + 2 bytes), an fp32 master copy of the parameters
(4 bytes) and fp32 optimizer states. torch AMP (what Lightning's ``*-mixed`` run) keeps fp32
parameters and gradients instead (4 + 4 bytes) and no separate master copy: the same total,
distributed differently, so only the ZeRO stage 1 split (which shards the master copy with the
optimizer states) differs from what an AMP run without sharding holds.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Precision:
    name: str
    #: bytes per parameter of the weights the forward uses
    param_bytes: int
    #: bytes per parameter of the gradients
    grad_bytes: int
    #: bytes per parameter of an fp32 master copy (0 when there is none)
    master_bytes: int
    #: bytes per element of full-precision optimizer states (Adam's moments, momentum)
    state_bytes: int
    mixed: bool


_PRECISIONS = {
    "32-true": Precision("32-true", 4, 4, 0, 4, mixed=False),
    "16-mixed": Precision("16-mixed", 2, 2, 4, 4, mixed=True),
    "bf16-mixed": Precision("bf16-mixed", 2, 2, 4, 4, mixed=True),
    "16-true": Precision("16-true", 2, 2, 0, 2, mixed=False),
    "bf16-true": Precision("bf16-true", 2, 2, 0, 2, mixed=False),
}

_ALIASES = {
    # accelerate's mixed_precision values
    "no": "32-true",
    "fp16": "16-mixed",
    "bf16": "bf16-mixed",
    # Lightning's short and legacy spellings
    "32": "32-true",
    "16": "16-mixed",
    "bf16-mixed": "bf16-mixed",
    "fp32": "32-true",
}

PRECISION_NAMES: tuple[str, ...] = (*_PRECISIONS, *[a for a in _ALIASES if a not in _PRECISIONS])


def get_precision(name: object) -> Precision:
    """The Precision named ``name`` (Lightning or accelerate spelling); ValueError otherwise."""
    key = str(name).strip().lower() if isinstance(name, (str, int)) else None
    if key is not None:
        key = _ALIASES.get(key, key)
        if key in _PRECISIONS:
            return _PRECISIONS[key]
    raise ValueError(f"unknown precision {name!r}; known: {', '.join(PRECISION_NAMES)}")

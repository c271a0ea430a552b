"""ZeRO stages / FSDP sharding and CPU offload of the model states across data-parallel GPUs.

ZeRO (Rajbhandari et al., 2020) partitions over ``N`` GPUs:

* stage 1 (P_os): optimizer states (the fp32 master copy included);
* stage 2 (P_os+g): ... and gradients;
* stage 3 (P_os+g+p): ... and parameters.

FSDP's ``SHARD_GRAD_OP`` is stage 2, ``FULL_SHARD`` stage 3, ``NO_SHARD`` stage 0. Each GPU
holds the largest shard, ``ceil(bytes / N)``. Offload moves a GPU's share of the optimizer
states and master weights (``"optimizer"``, also spelled ``"cpu"``) and/or of the parameters
(``"params"``, stage 3 only, as in DeepSpeed's ``offload_param``) to host memory.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

_STAGE_ALIASES = {
    "no_shard": 0,
    "shard_grad_op": 2,
    "full_shard": 3,
    "hybrid_shard": 3,
}
_OFFLOAD_ALIASES = {
    "cpu": ("optimizer",),
    "optimizer": ("optimizer",),
    "params": ("params",),
    "param": ("params",),
    "parameters": ("params",),
    "all": ("optimizer", "params"),
    "both": ("optimizer", "params"),
}


@dataclass(frozen=True)
class Parts:
    """Bytes of each model-state part."""

    parameters: int
    gradients: int
    optimizer_state: int
    master_weights: int


def get_stage(value: object) -> int:
    """ZeRO stage 0-3, or an FSDP sharding strategy name; ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"zero_stage must be 0, 1, 2 or 3, got {value!r}")
    if isinstance(value, int) and 0 <= value <= 3:
        return value
    if isinstance(value, str):
        key = value.strip().lower()
        if key in _STAGE_ALIASES:
            return _STAGE_ALIASES[key]
        if key in {"0", "1", "2", "3"}:
            return int(key)
    raise ValueError(
        f"zero_stage must be 0, 1, 2 or 3 (or an FSDP strategy: "
        f"{', '.join(_STAGE_ALIASES)}), got {value!r}"
    )


def get_gpus(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"n_gpus must be a whole number >= 1, got {value!r}")
    return value


def get_offload(value: object, stage: int) -> frozenset[str]:
    """What is offloaded to the CPU: a subset of {"optimizer", "params"}."""
    if value is None or value is False:
        return frozenset()
    names: Iterable[object]
    if isinstance(value, str):
        names = [value]
    elif isinstance(value, (list, tuple, set, frozenset)):
        names = list(value)
    else:
        raise ValueError(
            f"offload must be None, 'cpu', 'optimizer', 'params' or 'all', got {value!r}"
        )
    parts: set[str] = set()
    for name in names:
        key = name.strip().lower() if isinstance(name, str) else None
        if key not in _OFFLOAD_ALIASES:
            raise ValueError(
                f"unknown offload {name!r}; known: None, {', '.join(_OFFLOAD_ALIASES)}"
            )
        parts.update(_OFFLOAD_ALIASES[key])
    if "params" in parts and stage != 3:
        raise ValueError(
            f"parameter offload needs ZeRO stage 3 / FSDP full_shard (zero_stage={stage})"
        )
    return frozenset(parts)


def _shard(nbytes: int, n: int) -> int:
    return -(-nbytes // n)


def per_gpu(full: Parts, stage: int, n_gpus: int, offload: frozenset[str]) -> tuple[Parts, int]:
    """A GPU's share of each part, and the bytes of that share moved to the CPU."""
    opt, master = full.optimizer_state, full.master_weights
    grads, params = full.gradients, full.parameters
    if stage >= 1:
        opt, master = _shard(opt, n_gpus), _shard(master, n_gpus)
    if stage >= 2:
        grads = _shard(grads, n_gpus)
    if stage >= 3:
        params = _shard(params, n_gpus)
    host = 0
    if "optimizer" in offload:
        host += opt + master
        opt = master = 0
    if "params" in offload:
        host += params
        params = 0
    return Parts(params, grads, opt, master), host

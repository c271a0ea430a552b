"""Activations measured at one dtype, estimated for a precision that computes in another.

The measurement splits its peak saved bytes by dtype (``Measurement.by_dtype``). What the
activations were *measured at* is the narrowest floating dtype holding at least a fifth of
the floating bytes: float32 for a plain fp32 forward, bfloat16 / float16 under autocast (its
matmuls save half-precision copies while softmax, norms and losses stay in float32) or for a
half-precision model. Only the bytes in that dtype are rescaled to the precision's compute
dtype (a bf16-mixed estimate of an fp32 measurement halves the float32 bytes; an fp32 estimate
of an autocast measurement doubles the bfloat16 bytes and keeps the float32 ones); integer and
boolean tensors (indices, masks) are kept as measured.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

#: bytes per element of the floating dtypes saved tensors come in
FLOAT_SIZES = {
    "float64": 8,
    "float32": 4,
    "bfloat16": 2,
    "float16": 2,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
}

#: the dtype each precision's forward computes (and saves activations) in
COMPUTE_DTYPES = {
    "32-true": "float32",
    "16-mixed": "float16",
    "bf16-mixed": "bfloat16",
    "16-true": "float16",
    "bf16-true": "bfloat16",
}

#: the share of the floating bytes a narrower dtype needs to count as the measured one
_MIN_SHARE = 0.2


@dataclass(frozen=True)
class Scaling:
    #: the dtype the activations were measured at (None: not known)
    measured_dtype: str | None
    #: the precision's compute dtype
    target_dtype: str
    #: scaled bytes / measured bytes (1.0 when not scaled)
    factor: float
    note: str


def measured_dtype(by_dtype: Mapping[str, int]) -> str | None:
    """The floating dtype the activations were measured at, or None without a split."""
    floats = {d: n for d, n in by_dtype.items() if d in FLOAT_SIZES and n > 0}
    total = sum(floats.values())
    if total <= 0:
        return None
    for dtype in sorted(floats, key=lambda d: FLOAT_SIZES[d]):
        if floats[dtype] >= _MIN_SHARE * total:
            return dtype
    return max(floats, key=lambda d: floats[d])


def scale(by_dtype: Mapping[str, int], precision: str) -> Scaling:
    """How activations measured with this dtype split scale to ``precision``'s compute dtype."""
    target = COMPUTE_DTYPES.get(precision, "float32")
    measured = measured_dtype(by_dtype)
    if measured is None:
        return Scaling(
            None,
            target,
            1.0,
            "the activations' dtype was not measured: used as measured, not scaled to "
            f"{target} for {precision}",
        )
    total = sum(n for n in by_dtype.values() if n > 0)
    ratio = FLOAT_SIZES[target] / FLOAT_SIZES[measured]
    scaled = sum((n * ratio if d == measured else n) for d, n in by_dtype.items() if n > 0)
    factor = scaled / total
    if ratio == 1:
        return Scaling(
            measured,
            target,
            1.0,
            f"activations measured at {measured}, the compute dtype of {precision}: not scaled",
        )
    share = 100 * by_dtype[measured] / total
    note = (
        f"activations measured at {measured}, scaled x{factor:.2f} to {target} for "
        f"{precision} (the {share:.0f}% saved in {measured} rescaled, the rest kept)"
    )
    if ratio < 1 and precision.endswith("-mixed"):
        note += (
            "; autocast keeps softmax, norms and losses in float32, so the real figure "
            "can be higher"
        )
    return Scaling(measured, target, factor, note)

"""The peak of a forward + backward, predicted from the per-layer figures.

Backward visits the layers in reverse; visiting one frees what it saved and allocates its
parameters' gradients (unless they already exist: ``zero_grad(set_to_none=False)``). The
peak is the largest of: everything saved at the end of the forward, and, for each layer as
backward reaches it, what is still saved up to it, plus what it brings back (a checkpointed
block's recomputed activations), plus the gradients allocated so far, plus the gradients of
its output and input that backward holds while it is in it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Unit:
    """A layer, or a checkpointed block (``inner``: its layers, recomputed in backward)."""

    kept: int  # saved from forward until backward is through it
    grads: int  # gradient bytes allocated when backward reaches it
    inner: list[Unit] = field(default_factory=list)
    transient: int = 0  # gradients of its output and input, alive while backward is in it


def _backward(
    units: list[Unit], base: int, allocated: int, persistent: bool, scale: float
) -> tuple[int, int]:
    """(peak, gradient bytes allocated) of backward through ``units`` above ``base``."""
    kept = [u.kept for u in units] if scale == 1.0 else [int(u.kept * scale) for u in units]
    saved = sum(kept)
    peak = base + saved + allocated
    for i in range(len(units) - 1, -1, -1):
        unit = units[i]
        if unit.inner:  # recompute the block: its layers' activations come back
            inner_peak, allocated = _backward(
                unit.inner, base + saved, allocated, persistent, scale
            )
            if inner_peak > peak:
                peak = inner_peak
        else:
            if not persistent:
                allocated += unit.grads
            here = (
                base
                + saved
                + allocated
                + (unit.transient if scale == 1.0 else int(unit.transient * scale))
            )
            if here > peak:
                peak = here
        saved -= kept[i]
    return peak, allocated


def step_peak(units: list[Unit], persistent_grads: bool = False, scale: float = 1.0) -> int:
    """Peak bytes above the start of the step; ``scale`` multiplies the saved bytes (a
    smaller micro-batch)."""
    return _backward(units, 0, 0, persistent_grads, scale)[0]


def accumulated_peak(units: list[Unit], k: int, persistent_grads: bool = False) -> int:
    """``k`` micro-batches: the first allocates the gradients, the next ones run with them."""
    first = step_peak(units, persistent_grads, 1.0 / k)
    if k == 1 or persistent_grads:
        return first
    grads = sum(u.grads for u in units)
    return max(first, step_peak(units, True, 1.0 / k) + grads)

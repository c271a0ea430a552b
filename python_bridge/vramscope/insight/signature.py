"""What decides whether a model call is measured again (see activations.py, "Measured
steps"): a root module's input shapes/dtypes/devices, the autocast policy, grad mode and
train/eval mode. Plain tuples of ints, dtypes and strings: no tensor is referenced."""

from __future__ import annotations

from typing import Any, Optional

import torch

Signature = tuple[Any, ...]


def _tensor_sig(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return (tuple(value.shape), value.dtype, value.device)
    if isinstance(value, (tuple, list)):
        return tuple(_tensor_sig(v) for v in value[:8])
    return None


def signature(module: torch.nn.Module, args: Any, kwargs: Any) -> Signature:
    """What decides whether a root forward is measured again: input shapes/dtypes/devices,
    the autocast policy, grad mode and train/eval mode."""
    autocast = tuple(
        (dev, torch.get_autocast_dtype(dev))
        for dev in ("cpu", "cuda")
        if torch.is_autocast_enabled(dev)
    )
    kw = tuple((k, _tensor_sig(v)) for k, v in kwargs.items()) if kwargs else ()
    return (_tensor_sig(args), kw, autocast, torch.is_grad_enabled(), module.training)


def reason_to_measure(old: Optional[Signature], new: Signature) -> Optional[str]:
    """Why ``new`` must be measured after ``old`` (None: it need not)."""
    if old is None:
        return "first"
    if old == new:
        return None
    if old[2:] != new[2:]:
        return "dtype" if old[2] != new[2] else "mode"
    shapes_old = _strip_dtypes(old[:2])
    return "shapes" if shapes_old != _strip_dtypes(new[:2]) else "dtype"


def _strip_dtypes(value: Any) -> Any:
    if isinstance(value, tuple):
        if len(value) == 3 and isinstance(value[1], torch.dtype):
            return value[0]
        return tuple(_strip_dtypes(v) for v in value)
    return value

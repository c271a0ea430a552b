"""Measured activations: what the watched model's forwards saved for backward, per sample.

Model insight (``vramscope.insight``) counts the tensors autograd saves for backward, per
module, with their peak in each cell. After every cell the runtime hands the cell's Insight to
:meth:`ActivationMemo.observe`; the newest cell in which a model's forward saved anything is
kept for that model: the sum of its layers' peak saved bytes and the batch size, read as the
first dimension of the model's output (batch-first models; for an output that is not a
tensor, such as a Hugging Face ``ModelOutput``, a dict or a tuple, the first tensor with a
dimension in it: the logits, not a scalar loss), plus the second dimension as the sequence
length when that tensor has three or more dimensions, and the peak's split by the saved
tensors' dtype (``peak_saved_by_dtype``: what the activations were measured at).

Only numbers and names are kept, never a tensor or a module.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Measurement:
    model: str
    #: peak bytes saved for backward during one cell's forwards (all layers)
    saved_bytes: int
    batch_size: int
    seq_len: int | None
    #: the peak saved bytes by dtype ({"float32": n, "bfloat16": m}); empty when unknown
    by_dtype: Mapping[str, int] = field(default_factory=dict)

    @property
    def per_sample(self) -> float:
        return self.saved_bytes / self.batch_size


class ActivationMemo:
    """The newest measurement per model name (bounded to the last 32 models)."""

    LIMIT = 32

    def __init__(self) -> None:
        self._by_model: dict[str, Measurement] = {}
        self._lock = threading.Lock()

    def observe(self, insight: Mapping[str, Any]) -> Measurement | None:
        """Keep the cell's measurement of ``insight['model']`` if its forward saved bytes."""
        try:
            found = _measure(insight)
        except Exception:
            return None
        if found is None:
            return None
        with self._lock:
            self._by_model.pop(found.model, None)
            self._by_model[found.model] = found
            while len(self._by_model) > self.LIMIT:
                del self._by_model[next(iter(self._by_model))]
        return found

    def get(self, name: str) -> Measurement | None:
        with self._lock:
            return self._by_model.get(name)


def _measure(insight: Mapping[str, Any]) -> Measurement | None:
    model = insight.get("model")
    layers = insight.get("layers")
    if not isinstance(model, str) or not isinstance(layers, list):
        return None
    saved = sum(int(row.get("peak_saved_bytes") or 0) for row in layers)
    root = next((row for row in layers if row.get("path") == ""), None)
    shape = root.get("output_shape") if root is not None else None
    if saved <= 0 or not isinstance(shape, list) or not shape:
        return None
    batch = int(shape[0])
    if batch <= 0:
        return None
    seq = int(shape[1]) if len(shape) >= 3 and int(shape[1]) > 0 else None
    by_dtype: dict[str, int] = {}
    for row in layers:
        for dtype, nbytes in (row.get("peak_saved_by_dtype") or {}).items():
            by_dtype[str(dtype)] = by_dtype.get(str(dtype), 0) + int(nbytes)
    return Measurement(model, saved, batch, seq, by_dtype)

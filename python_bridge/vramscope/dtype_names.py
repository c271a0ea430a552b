"""A torch dtype's name as the protocol writes it: ``torch.bfloat16`` -> ``"bfloat16"``.

Without importing torch (the estimator's setup reader uses it too). Cached: the activation
ledger reads it for every storage a measured forward saves.
"""

from __future__ import annotations

from typing import Any

_NAMES: dict[Any, str] = {}


def dtype_name(dtype: Any) -> str:
    name = _NAMES.get(dtype)
    if name is None:
        name = _NAMES[dtype] = str(dtype).replace("torch.", "")
    return name

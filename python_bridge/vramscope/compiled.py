"""What ``torch.compile`` has done in this process, read without importing torch or Dynamo.

Dynamo traces module hooks into its graphs and compiles again when they change, and code it
compiled runs differently under a Python dispatch mode: model insight keeps its hooks off
compiled models (insight/roots.py) and the step watch follows no step op by op once Dynamo
has compiled anything (optimize/stepwatch.py).
"""

from __future__ import annotations

import sys
from typing import Any


def dynamo_ran() -> bool:
    """Dynamo has evaluated a frame in this process (compiled code may run from now on)."""
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is None:
        return False
    try:
        return bool(dynamo.utils.counters["frames"]["total"])
    except Exception:
        return True


def is_compile_wrapper(module: Any) -> bool:
    """``module`` is the ``OptimizedModule`` that ``torch.compile(model)`` makes."""
    cls = type(module)
    return cls.__name__ == "OptimizedModule" and cls.__module__.startswith("torch._dynamo")


def is_compiled(module: Any) -> bool:
    """``module`` is compiled: a ``torch.compile`` wrapper, or ``module.compile()`` ran."""
    return is_compile_wrapper(module) or getattr(module, "_compiled_call_impl", None) is not None

"""Skip a test module whose optional packages are not installed, without importing them."""

from __future__ import annotations

from importlib.util import find_spec

import pytest


def requires(*packages: str) -> pytest.MarkDecorator:
    """``pytestmark = requires("lightning")``: as ``pytest.importorskip`` at a module's top, but
    the packages are looked up, not imported. Every pytest-xdist worker collects every module:
    importing lightning, transformers, peft and accelerate there cost each worker ~8 s of CPU,
    for the tests of one worker; the tests' kernels import what they use."""
    missing = [name for name in packages if find_spec(name) is None]
    return pytest.mark.skipif(bool(missing), reason=f"not installed: {', '.join(missing)}")

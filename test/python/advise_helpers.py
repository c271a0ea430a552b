"""Shared by the Optimize tests: a real kernel with vramscope loaded, and a ground truth of the
test's own, independent of vramscope: ``_gt_measure(fn)`` runs ``fn`` under a dispatch mode
that follows every tensor storage an op allocates until it is freed, and returns the bytes
still alive when ``fn`` returned (``kept``) and the highest count while it ran (``peak``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from kernel_harness import BOOTSTRAP, KernelHarness

GROUND_TRUTH = '''
import weakref as _gt_weakref
import torch as _gt_torch
from torch.utils._python_dispatch import TorchDispatchMode as _GtMode
from torch.utils._pytree import tree_flatten as _gt_flatten


class _GtTracker(_GtMode):
    def __init__(self):
        super().__init__()
        self.live, self.now, self.peak = {}, 0, 0

    def _free(self, key):
        self.now -= self.live.pop(key, 0)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        seen = {
            a.untyped_storage().data_ptr()
            for a in _gt_flatten((args, kwargs))[0]
            if isinstance(a, _gt_torch.Tensor)
        }
        for t in _gt_flatten(out)[0]:
            if isinstance(t, _gt_torch.Tensor):
                s = t.untyped_storage()
                key = s.data_ptr()
                if key and key not in seen and key not in self.live:
                    self.live[key] = s.nbytes()
                    self.now += s.nbytes()
                    self.peak = max(self.peak, self.now)
                    _gt_weakref.finalize(s, self._free, key)
        return out


def _gt_measure(fn):
    """(kept, peak, result): bytes alive after fn, the peak while it ran, fn's result."""
    tracker = _GtTracker()
    with tracker:
        result = fn()
    return tracker.now, tracker.peak, result
'''


def start_kernel(setup: str = "") -> KernelHarness:
    """A fresh kernel: vramscope bootstrapped, torch imported, the ground truth defined."""
    k = KernelHarness()
    reply = k.execute(BOOTSTRAP, silent=True)
    assert reply["content"]["status"] == "ok", reply["content"]
    k.run_ok(
        "import json\nimport torch\nimport vramscope\ntorch.manual_seed(0)\n"
        "torch.set_num_threads(1)\n" + GROUND_TRUTH + setup,
        "setup",
    )
    return k


def value(k: KernelHarness, expr: str) -> Any:
    """A JSON-serialisable value computed in the kernel."""
    return json.loads(k.eval(f"json.dumps({expr})"))


def advise(k: KernelHarness, model: str | None = None) -> dict[str, Any]:
    arg = "" if model is None else repr(model)
    result: dict[str, Any] = value(k, f"vramscope.advise({arg})")
    return result


def by_technique(advice: dict[str, Any], technique: str) -> dict[str, Any]:
    found = [s for s in advice["suggestions"] if s["technique"] == technique]
    assert found, (technique, [s["id"] for s in advice["suggestions"]], advice["notes"])
    return found[0]


def compiles(code: str) -> None:
    compile(code, "<suggestion>", "exec")


def kernel_with(setup: str, train: str, probes: str) -> Iterator[KernelHarness]:
    """A module fixture's kernel: the model's setup and training cells run, the test's probes
    (its own forward and step) defined silently, so they are not recorded cells."""
    k = start_kernel()
    k.run_ok(setup, "setup-model")
    k.run_ok(train, "train")
    assert k.execute(probes, silent=True)["content"]["status"] == "ok"
    try:
        yield k
    finally:
        k.close()

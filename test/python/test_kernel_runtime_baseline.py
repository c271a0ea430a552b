"""The runtime baseline in real kernels (issue 12 item 5): "Other" shows what ``import torch``
cost as its own part, measured when torch was imported after vramscope, and says "not
measured" when torch came first. The ground truth is an independent measure: a second fresh
kernel, without vramscope, reading glibc's mallinfo2 through its own ctypes call just before
and just after ``import torch``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kernel_connect import connect
from kernel_harness import KernelHarness

pytestmark = pytest.mark.kernel
MIB = 2**20
#: vramscope's own modules are loaded before torch in the measured kernel, not in the
#: independent one; what they share with torch's imports is counted in one only (~0.1 MiB)
TOLERANCE = 2 * MIB

MALLINFO2 = """
import ctypes as _ct
class _MI(_ct.Structure):
    _fields_ = [(n, _ct.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
_mi = _ct.CDLL(None).mallinfo2
_mi.restype = _MI
def _in_use():
    i = _mi()
    return i.uordblks + i.hblkhd
"""

MODEL = (
    "model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),\n"
    "                            torch.nn.Linear(512, 8))\n"
    "opt = torch.optim.Adam(model.parameters())\n"
    "model(torch.randn(64, 256)).sum().backward()\n"
    "opt.step()\n"
    "x = torch.empty(16 * 2**20, dtype=torch.uint8)"
)


@pytest.fixture(scope="module")
def torch_first() -> Iterator[tuple[KernelHarness, int]]:
    """A fresh kernel without vramscope, and what ``import torch`` cost there (mallinfo2
    in-use bytes, the readings right before and right after the import in one cell)."""
    k = KernelHarness(cold=True)  # what importing torch costs
    try:
        k.run_ok(MALLINFO2)
        k.run_ok("_before = _in_use()\nimport torch\n_after = _in_use()")
        assert k.eval("'vramscope' in __import__('sys').modules") is False
        yield k, k.eval("_after - _before")
    finally:
        k.close()


def _breakdown(k: KernelHarness, control: str) -> dict[str, Any]:
    reply = k.request(control, "get_insight", {})
    cpu: dict[str, Any] = reply["result"]["insight"]["breakdown"]["cpu"]
    return cpu


def _assert_parts_add_up(cpu: dict[str, Any]) -> None:
    parts = ("parameters", "gradients", "optimizer_state", "activations", "other")
    assert sum(cpu[p] for p in parts) == cpu["total_bytes"]
    # the split of "other": tensors in no model, the runtime, and a non-negative rest
    assert cpu["other_tensors"] + cpu.get("runtime_bytes", 0) <= cpu["other"]


def test_the_runtime_baseline_is_what_importing_torch_cost(
    torch_first: tuple[KernelHarness, int],
) -> None:
    truth = torch_first[1]
    assert truth > 20 * MIB  # torch's libraries and caches: tens of MiB on CPU
    k = KernelHarness(cold=True)  # what importing torch costs
    try:
        _, control = connect(k)
        k.run_ok("import torch", "rb-import")
        cpu = _breakdown(k, control)
        assert "runtime_note" not in cpu
        assert abs(cpu["runtime_bytes"] - truth) <= TOLERANCE, (
            f"{cpu['runtime_bytes'] / MIB:.2f} MiB measured, {truth / MIB:.2f} MiB independently"
        )
        _assert_parts_add_up(cpu)
        baseline = cpu["runtime_bytes"]

        # a model, its optimizer and a 16 MiB variable: the baseline stays what it was
        k.run_ok(MODEL, "rb-model")
        cpu = _breakdown(k, control)
        assert cpu["runtime_bytes"] == baseline
        assert cpu["other_tensors"] == 16 * MIB  # x
        _assert_parts_add_up(cpu)
    finally:
        k.close()


def test_torch_imported_before_vramscope_is_not_measured(
    torch_first: tuple[KernelHarness, int],
) -> None:
    k = torch_first[0]  # torch is imported; vramscope loads now
    _, control = connect(k)
    k.run_ok("y = torch.ones(1000)", "nb-cell")
    cpu = _breakdown(k, control)
    assert "runtime_bytes" not in cpu  # no guess
    assert cpu["runtime_note"] == "torch was imported before vramscope"
    _assert_parts_add_up(cpu)

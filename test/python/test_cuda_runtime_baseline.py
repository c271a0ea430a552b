"""On a real GPU (``pytest -m cuda``): the CUDA runtime baseline in a real kernel is the
device memory used outside PyTorch's allocator at the end of the cell that initialised CUDA,
and it is a part of ``outside_pytorch``."""

from __future__ import annotations

import pytest

from kernel_connect import connect
from kernel_harness import KernelHarness

pytestmark = [pytest.mark.cuda, pytest.mark.kernel]
torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

MIB = 2**20


def test_the_cuda_context_is_a_part_of_outside_pytorch() -> None:
    k = KernelHarness()
    try:
        _, control = connect(k)
        # the cell that initialises CUDA ends with the ground truth, read the same way
        k.run_ok(
            "import torch\n"
            "x = torch.empty(8 * 2**20, dtype=torch.uint8, device='cuda:0')\n"
            "_free, _total = torch.cuda.mem_get_info(0)\n"
            "_outside = _total - _free - torch.cuda.memory_reserved(0)",
            "cu-init",
        )
        truth = k.eval("_outside")
        reply = k.request(control, "get_insight", {})
        cuda = reply["result"]["insight"]["breakdown"]["cuda:0"]
        assert "runtime_note" not in cuda
        # the context is hundreds of MiB; the cell's end reading follows within microseconds
        assert truth > 50 * MIB
        assert abs(cuda["runtime_bytes"] - truth) <= 4 * MIB
        assert cuda["runtime_bytes"] <= cuda["outside_pytorch"]
        parts = ("parameters", "gradients", "optimizer_state", "activations", "other")
        assert sum(cuda[p] for p in parts) == cuda["total_bytes"]
    finally:
        k.close()

"""Run All in a fresh real kernel: cells queued back to back, as JupyterLab sends them.

A cell's figure must be that cell's own memory: vramscope's follow-up work for the previous
cell (its message, model insight) and its own allocations must never land inside it, nor
the kernel's answers to JupyterLab's debugger (its ``modules`` request after every cell,
answered on the control thread with a ~300 KiB reply that pyzmq frees later on its own
thread: vramscope.quiet)."""

from __future__ import annotations

from typing import Any

import pytest

from kernel_harness import KernelHarness

pytestmark = pytest.mark.kernel
MIB = 2**20
#: the recorder's waits for the kernel's own work that ended at their bound (vramscope.quiet)
TIMED_OUT = "list(__import__('vramscope.quiet').quiet.TIMED_OUT)"

CELLS = [
    ("ra-import", "import torch"),
    (
        "ra-model",
        "model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(),\n"
        "                            torch.nn.Linear(512, 10))\n"
        "opt = torch.optim.Adam(model.parameters())\n"
        "loss = model(torch.randn(64, 512)).square().mean()\n"
        "loss.backward()\n"
        "opt.step()",
    ),
    ("ra-64mib", "x = torch.empty(64 * 2**20, dtype=torch.uint8).fill_(7)"),
]


@pytest.fixture
def kernel(fresh_stream_kernel: tuple[KernelHarness, str]) -> tuple[KernelHarness, str]:
    return fresh_stream_kernel  # conftest: a new kernel with a stream comm open


def run_all(
    k: KernelHarness, stream: str, cells: list[tuple[str, str]], debugger: bool = False
) -> dict[str, Any]:
    """Queue every cell at once; return each cell's record by cell id. With ``debugger``,
    ask for the module list on the control channel as each reply arrives, as JupyterLab's
    debugger does (its answer is built while the next cell runs)."""
    ids = [k.send_execute(code, cell_id) for cell_id, code in cells]
    for msg_id in ids:
        assert k.reply(msg_id)["content"]["status"] == "ok"
        if debugger:
            request = {"seq": 0, "type": "request", "command": "modules", "arguments": {}}
            k.kc.control_channel.send(k.kc.session.msg("debug_request", request))
    records: dict[str, Any] = {}
    while len(records) < len(cells):
        record = k.comm_data(stream, "cell")["record"]
        records[record["cell_id"]] = record
    return records


@pytest.mark.parametrize("attempt", [1, 2])
def test_the_64_mib_cell_reads_exactly_64_mib(
    kernel: tuple[KernelHarness, str], attempt: int
) -> None:
    """With the debugger's requests, as in JupyterLab: without vramscope.quiet's waits and
    frame accounting this cell read +63.70 MiB in 3 of 4 runs (+64.00..64.02 with them)."""
    k, stream = kernel
    records = run_all(k, stream, CELLS, debugger=True)
    delta = records["ra-64mib"]["devices"]["cpu"]["delta_bytes"]
    # ground truth: the tensor's own storage, read back in the kernel
    size = k.eval("x.untyped_storage().nbytes()")
    assert size == 64 * MIB
    # "+64.0 MiB" as the footer rounds it; a few KiB of Python objects are the cell's own
    assert abs(delta - size) < 0.05 * MIB, (
        f"{delta / MIB:.3f} MiB; waits for the kernel that ended at their bound: "
        f"{k.eval(TIMED_OUT)}; the cell's record: {records['ra-64mib']}"
    )
    # model insight ran once, after the last cell (coalesced), and saw the tensor
    insight = k.comm_data(stream, "insight")["insight"]
    holders = {h["name"]: h["bytes"] for h in insight["holders"]}
    assert holders["x"] == size


#: pyzmq's garbage collector runs (vramscope.warmup)
ZMQ_GC = "__import__('zmq.utils.garbage').utils.garbage.gc.is_alive()"


def test_the_kernels_one_time_setups_land_in_no_cell(kernel: tuple[KernelHarness, str]) -> None:
    """vramscope.warmup: pyzmq's garbage collector (its first zero-copy send, ~100 KiB: the
    64 MiB cell read +64.103 MiB when the debugger's first ``modules`` reply fell in it) runs
    from the bridge's start, and IPython's history writer has read its page cache (~92 KiB:
    a kernel's first cell, ``pass``, read +96 KiB)."""
    k, stream = kernel
    assert k.eval(ZMQ_GC) is True
    records = run_all(k, stream, [("first", "pass"), ("second", "y = bytearray(2**20)")])
    first = records["first"]["devices"]["cpu"]["delta_bytes"]
    assert abs(first) < 24 * 1024, records["first"]
    second = records["second"]["devices"]["cpu"]["delta_bytes"]
    size = k.eval("y.__sizeof__()")
    assert abs(second - size) < 24 * 1024, records["second"]

"""Exact CPU peaks (``cpu_peak: "exact"``, devices/exact.py), in process: a cell's peak is the
most bytes its torch storages held at once, whatever the sampler saw.

Ground truths are computed here from the tensors' own sizes; the kernel-level checks (repeated
``vramscope profile`` runs against an independent per-op glibc counter) are in
test_exact_peak_cli.py.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

torch = pytest.importorskip("torch")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from vramscope.devices import CpuDevice, heapcount  # noqa: E402
from vramscope.devices.cpu import load_mallinfo2  # noqa: E402
from vramscope.devices.exact import armed_modes  # noqa: E402

if load_mallinfo2() is None:
    pytest.skip("exact peaks need glibc mallinfo2", allow_module_level=True)

MIB = 1 << 20
SLACK = 8 * 1024  # malloc's own bookkeeping around a block: a few KiB at most


def _nbytes(t: object) -> int:
    return int(t.untyped_storage().nbytes())  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def no_collection() -> Iterator[None]:
    """Glibc's in-use total is the whole process's: a cyclic collection that an allocation of
    the cell set off frees garbage earlier tests of this worker left (seen: -97 KiB in a
    ``y = torch.ones(n)`` cell). Collected before, paused during each test."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.fixture(params=["heap-counter", "op-counter"])
def exact_cpu(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """Both exact sources, held to the same truths: the heap counter (every cell, where it
    runs) and the op-by-op count (``cpu_peak: "exact"`` without it)."""
    counted = request.param == "heap-counter"
    cpu = CpuDevice(exact=lambda: True, heap_counter=counted)
    if counted and cpu.heap is None:
        pytest.skip(f"no heap counter here: {heapcount.unavailable()}")
    yield cpu
    cpu.close()


def test_rerun_of_a_tensor_cell_peaks_at_the_new_tensor(exact_cpu: CpuDevice) -> None:
    """``y = torch.ones(n)`` run again: the new y exists before the old one is freed."""
    y = torch.ones(4 * 1024 * 1024)  # made before any cell: the counter never saw it
    truth = _nbytes(y)
    assert truth == 16 * MIB
    for _ in range(3):  # then again, with the old y made in an armed cell
        mark = exact_cpu.begin_cell("reset")
        assert mark.exact
        y = torch.ones(4 * 1024 * 1024)
        delta, _ = exact_cpu.end_cell(mark, None)
        assert delta["peak_source"] == "exact"
        assert abs(delta["peak_delta_bytes"] - truth) <= SLACK, delta
        assert abs(delta["delta_bytes"]) <= SLACK, delta
    sampled = CpuDevice(heap_counter=False)
    mark = sampled.begin_cell("reset")
    assert not mark.exact
    delta, _ = sampled.end_cell(mark, None)
    assert delta["peak_source"] == "sampled"
    sampled.close()
    del y


def test_a_free_of_an_older_tensor_that_an_op_read_lowers_the_count(
    exact_cpu: CpuDevice,
) -> None:
    """``a`` is from before arming; once an op read it, its free counts: the cell's peak is
    one block (b, then c after a went), not two."""
    a = torch.ones(2 * 1024 * 1024)
    block = _nbytes(a)
    mark = exact_cpu.begin_cell("reset")
    b = a * 2  # +block, a now followed
    del a  # -block
    c = torch.zeros(2 * 1024 * 1024)  # +block: back at one block over the start
    delta, _ = exact_cpu.end_cell(mark, None)
    assert abs(delta["peak_delta_bytes"] - block) <= SLACK, delta
    assert abs(delta["delta_bytes"] - block) <= SLACK, delta
    # a temporary made and freed inside the cell, under what the cell keeps
    mark = exact_cpu.begin_cell("reset")
    big = torch.ones(6 * 1024 * 1024)
    kept = big[:1024].clone()
    del big
    delta, _ = exact_cpu.end_cell(mark, None)
    assert abs(delta["peak_delta_bytes"] - (24 * MIB + _nbytes(kept))) <= SLACK, delta
    del b, c, kept


def test_memory_outside_torch_counts_as_the_delta_shows(exact_cpu: CpuDevice) -> None:
    """A cell that keeps a bytearray and a tensor: the peak is both (glibc's delta beyond the
    storages' net change is added)."""
    mark = exact_cpu.begin_cell("reset")
    raw = bytearray(8 * MIB)
    t = torch.ones(2 * 1024 * 1024)
    delta, _ = exact_cpu.end_cell(mark, None)
    truth = len(raw) + _nbytes(t)
    assert abs(delta["peak_delta_bytes"] - truth) <= 2 * SLACK, delta
    del raw, t


def test_a_mode_the_user_leaves_open_keeps_ours_under_it_until_it_goes(
    exact_cpu: CpuDevice,
) -> None:
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    class Users(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            return func(*args, **(kwargs or {}))

    mark = exact_cpu.begin_cell("reset")
    if exact_cpu.heap is not None:  # the heap counter pushes no mode at all
        assert armed_modes() == 0 and not _get_current_dispatch_mode_stack()
        with Users():
            delta, _ = exact_cpu.end_cell(mark, None)
        assert delta["peak_source"] == "exact" and not _get_current_dispatch_mode_stack()
        return
    assert armed_modes() == 1  # the step watch does not take it for a user's mode
    users = Users()
    users.__enter__()  # left open at the cell's end
    delta, _ = exact_cpu.end_cell(mark, None)
    assert delta["peak_source"] == "exact"
    stack = _get_current_dispatch_mode_stack()
    assert len(stack) == 2 and stack[-1] is users  # ours waits under theirs
    mark = exact_cpu.begin_cell("reset")
    assert not mark.exact  # not armed for this cell: sampled
    delta, _ = exact_cpu.end_cell(mark, None)
    assert delta["peak_source"] == "sampled"
    users.__exit__(None, None, None)
    mark = exact_cpu.begin_cell("reset")  # ours is on top again: popped, pushed anew
    assert mark.exact and len(_get_current_dispatch_mode_stack()) == 1
    x = torch.ones(1024 * 1024)
    delta, _ = exact_cpu.end_cell(mark, None)
    assert abs(delta["peak_delta_bytes"] - _nbytes(x)) <= SLACK
    assert not _get_current_dispatch_mode_stack() and armed_modes() == 0


def test_armed_cells_compute_what_plain_ones_compute(exact_cpu: CpuDevice) -> None:
    """Same values, same gradients, same in-place error under the counter."""

    def run() -> tuple[list[float], str]:
        torch.manual_seed(0)
        lin = torch.nn.Linear(8, 4)
        out = torch.sigmoid(lin(torch.randn(3, 8)))
        out.sum().backward()
        h = torch.sigmoid(lin(torch.randn(3, 8)))
        h += 1
        try:
            h.sum().backward()
            err = "none"
        except RuntimeError as exc:
            err = str(exc).split(";")[0]
        assert lin.weight.grad is not None
        return lin.weight.grad.flatten().tolist(), err

    plain = run()
    mark = exact_cpu.begin_cell("reset")
    armed = run()
    exact_cpu.end_cell(mark, None)
    assert armed == plain and "modified by an inplace operation" in plain[1]

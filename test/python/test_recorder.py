from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from vramscope.devices import CellMark, Device, make_delta
from vramscope.messages.records import CellRecord, DeviceDelta, DeviceInfo, DeviceSample
from vramscope.recorder import CellRecorder, code_head, is_oom


class StepDevice(Device):
    """A device whose usage the test sets by hand."""

    id = "fake"
    kind = "cpu"
    source = "test"

    def __init__(self) -> None:
        self.used = 1000

    def read(self) -> DeviceSample:
        return {"used": self.used}

    def info(self, sample: DeviceSample | None = None) -> DeviceInfo:
        raise NotImplementedError

    def begin_cell(self, policy: Any) -> CellMark:
        return CellMark(before=self.used)

    def end_cell(self, mark: CellMark, window_max: int | None) -> tuple[DeviceDelta, DeviceSample]:
        rise = None if window_max is None else window_max - mark.before
        return make_delta(mark.before, self.used, [rise]), self.read()


def _recorder(device: Device, window: dict[str, int]) -> tuple[CellRecorder, list[CellRecord]]:
    out: list[CellRecord] = []
    rec = CellRecorder(
        devices=lambda: [device],
        peak_policy=lambda: "reset",
        open_window=lambda: None,
        close_window=lambda: window,
        on_record=lambda r, _after: out.append(r),
    )
    return rec, out


def _result(exc: BaseException | None = None, count: int = 3) -> SimpleNamespace:
    return SimpleNamespace(
        success=exc is None, error_in_exec=exc, error_before_exec=None, execution_count=count
    )


def test_record_keys_and_values() -> None:
    dev = StepDevice()
    rec, out = _recorder(dev, {"fake": 5000})
    rec.pre_run_cell(SimpleNamespace(cell_id="abc", raw_cell="\n\n  x = big()  \ny"))
    dev.used = 1500
    rec.post_run_cell(_result())
    (record,) = out
    assert list(record) == [
        "cell_id",
        "execution_count",
        "start_time",
        "duration",
        "ok",
        "error_type",
        "oom",
        "code_head",
        "devices",
    ]
    assert record["cell_id"] == "abc" and record["execution_count"] == 3
    assert record["ok"] is True and record["error_type"] is None and record["oom"] is False
    assert record["code_head"] == "x = big()"
    assert record["devices"]["fake"] == {
        "before_bytes": 1000,
        "after_bytes": 1500,
        "delta_bytes": 500,
        "peak_delta_bytes": 4000,
    }
    assert rec.history() == out and rec.clear() == 1 and rec.history() == []


def test_failed_cell_keeps_no_exception() -> None:
    dev = StepDevice()
    rec, out = _recorder(dev, {})
    rec.pre_run_cell(SimpleNamespace(cell_id=None, raw_cell="1/0"))
    rec.post_run_cell(_result(ZeroDivisionError("division by zero")))
    assert out[0]["ok"] is False and out[0]["error_type"] == "ZeroDivisionError"
    assert out[0]["cell_id"] is None and out[0]["oom"] is False


def test_post_without_pre_is_ignored() -> None:
    rec, out = _recorder(StepDevice(), {})
    assert rec.post_run_cell(_result()) is None and out == []


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (
            RuntimeError(
                "[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory"
            ),
            True,
        ),
        (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), True),
        (MemoryError(), True),
        (RuntimeError("shape mismatch"), False),
        (ValueError("out of memory"), False),
        (None, False),
    ],
)
def test_oom_classification(exc: BaseException | None, expected: bool) -> None:
    assert is_oom(exc) is expected


def test_torch_oom_error_is_oom() -> None:
    torch = pytest.importorskip("torch")
    assert is_oom(torch.OutOfMemoryError("x"))


def test_code_head_limits() -> None:
    assert code_head("") == "" and code_head(None) == ""
    assert len(code_head("a" * 500)) == 120


def test_drop_pending_forgets_a_cell_whose_post_run_cell_never_comes() -> None:
    """``%unload_ext`` removes the hooks inside a cell: its pre_run_cell ran, its
    post_run_cell never will; the next post_run_cell (of the cell that loads the bridge
    again) must not close it with a bogus record."""
    dev = StepDevice()
    closed: list[int] = []
    out: list[CellRecord] = []
    rec = CellRecorder(
        devices=lambda: [dev],
        peak_policy=lambda: "reset",
        open_window=lambda: None,
        close_window=lambda: closed.append(1) or {},
        on_record=lambda r, _after: out.append(r),
    )
    rec.pre_run_cell(SimpleNamespace(cell_id="unload", raw_cell="%unload_ext vramscope"))
    rec.drop_pending()
    assert closed == [1]  # the sampler's window is closed too
    rec.drop_pending()  # idempotent
    assert closed == [1]
    assert rec.post_run_cell(_result()) is None
    assert out == [] and rec.history() == []
    rec.pre_run_cell(SimpleNamespace(cell_id="next", raw_cell="x = 1"))
    assert rec.post_run_cell(_result()) is not None
    assert [r["cell_id"] for r in out] == ["next"]

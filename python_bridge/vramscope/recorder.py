"""Per-cell records from IPython's ``pre_run_cell``/``post_run_cell`` events.

Keeps no reference to user objects: of a failed cell only the exception's class name and
whether it was an out-of-memory error are kept.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

from .devices import CellMark, Device, PeakPolicy
from .messages.records import CellRecord, DeviceDelta, DeviceSample, error_type_of
from .quiet import settle_sent, settled, wait_kernel_quiet

CODE_HEAD_CHARS = 120
MAX_CELLS = 10_000
_OOM_MARKERS = (
    "out of memory",
    "can't allocate memory",
    "cannot allocate memory",
    "not enough memory",  # torch's CPU allocator on Windows
    "storage size calculation overflowed",  # a size no allocator can give (torch.empty(2**62))
)


def is_oom(exc: BaseException | None) -> bool:
    """torch.OutOfMemoryError, MemoryError, or a RuntimeError reporting an allocation failure."""
    if exc is None:
        return False
    if isinstance(exc, MemoryError):
        return True
    torch = sys.modules.get("torch")
    oom_type = getattr(torch, "OutOfMemoryError", None) if torch is not None else None
    if isinstance(oom_type, type) and isinstance(exc, oom_type):
        return True
    if isinstance(exc, RuntimeError):
        text = str(exc).lower()
        return any(marker in text for marker in _OOM_MARKERS)
    return False


def code_head(source: str | None) -> str:
    for line in (source or "").splitlines():
        if line.strip():
            return line.strip()[:CODE_HEAD_CHARS]
    return ""


@dataclass
class _Pending:
    cell_id: str | None
    source: str
    start_time: float
    start_perf: float
    marks: dict[str, tuple[Device, CellMark]]
    held: int  # bytes of sent frames pyzmq still held at the starting readings


class CellRecorder:
    """Turns run_cell events into CellRecords and hands each to ``on_record``."""

    def __init__(
        self,
        devices: Callable[[], list[Device]],
        peak_policy: Callable[[], PeakPolicy],
        open_window: Callable[[], None],
        close_window: Callable[[], dict[str, int]],
        on_record: Callable[[CellRecord, dict[str, DeviceSample]], None],
    ) -> None:
        self._devices = devices
        self._peak_policy = peak_policy
        self._open_window = open_window
        self._close_window = close_window
        self._on_record = on_record
        self._stack: list[_Pending] = []
        self.records: deque[CellRecord] = deque(maxlen=MAX_CELLS)

    def pre_run_cell(self, info: Any, settle: bool = False) -> None:
        """A cell starts: its starting readings. ``settle``: the bridge sent messages just
        now, wait until they are gone (``quiet.settle_sent``) first."""
        # the kernel's own work (the debugger's answers, frames being sent): not this cell's
        if settle:
            settle_sent()
        else:
            wait_kernel_quiet()
        marks, held = settled(lambda: self._begin(self._peak_policy()))
        if not self._stack:
            self._open_window()
        self._stack.append(
            _Pending(
                cell_id=_str_or_none(getattr(info, "cell_id", None)),
                source=str(getattr(info, "raw_cell", "") or ""),
                start_time=time.time(),
                start_perf=time.perf_counter(),
                marks=marks,
                held=held,
            )
        )

    def _begin(self, policy: PeakPolicy) -> dict[str, tuple[Device, CellMark]]:
        marks: dict[str, tuple[Device, CellMark]] = {}
        for device in self._devices():
            try:
                marks[device.id] = (device, device.begin_cell(policy))
            except Exception:
                continue  # a device that fails to read is left out of this record
        return marks

    def _end(
        self, pending: _Pending, window: dict[str, int]
    ) -> tuple[dict[str, DeviceDelta], dict[str, DeviceSample]]:
        deltas: dict[str, DeviceDelta] = {}
        after: dict[str, DeviceSample] = {}
        for dev_id, (device, mark) in pending.marks.items():
            try:
                deltas[dev_id], after[dev_id] = device.end_cell(mark, window.get(dev_id))
            except Exception:
                continue
        return deltas, after

    def post_run_cell(self, result: Any) -> CellRecord | None:
        end_perf = time.perf_counter()
        if not self._stack:
            return None  # registered mid-cell: no matching pre_run_cell
        pending = self._stack.pop()
        wait_kernel_quiet()
        window = self._close_window() if not self._stack else {}
        (deltas, after), held = settled(lambda: self._end(pending, window))
        for dev_id, (device, _mark) in pending.marks.items():
            if device.kind == "cpu" and dev_id in deltas:  # host memory: the frames are in it
                deltas[dev_id] = without_frames(deltas[dev_id], pending.held, held)
        exc = getattr(result, "error_in_exec", None) or getattr(result, "error_before_exec", None)
        count = getattr(result, "execution_count", None)
        record: CellRecord = {
            "cell_id": pending.cell_id,
            "execution_count": count if isinstance(count, int) else None,
            "start_time": pending.start_time,
            "duration": end_perf - pending.start_perf,
            "ok": exc is None and bool(getattr(result, "success", True)),
            "error_type": error_type_of(exc),
            "oom": is_oom(exc),
            "code_head": code_head(pending.source),
            "devices": deltas,
        }
        del exc, result
        self.records.append(record)
        self._on_record(record, after)
        return record

    @property
    def running(self) -> bool:
        """A cell has started and not ended."""
        return bool(self._stack)

    def drop_pending(self) -> None:
        """Forget started cells whose ``post_run_cell`` will not come (hooks removed mid-cell)."""
        if self._stack:
            self._stack.clear()
            self._close_window()

    def history(self) -> list[CellRecord]:
        return list(self.records)

    def clear(self) -> int:
        count = len(self.records)
        self.records.clear()
        return count


def without_frames(delta: DeviceDelta, held_before: int, held_after: int) -> DeviceDelta:
    """A CPU delta without the bytes of sent frames pyzmq held at its two readings (kernel
    machinery, vramscope.quiet); the peak moves with the delta."""
    if not held_before and not held_after:
        return delta
    before = delta["before_bytes"] - held_before
    after = delta["after_bytes"] - held_after
    shift = held_after - held_before
    return {
        **delta,
        "before_bytes": before,
        "after_bytes": after,
        "delta_bytes": after - before,
        "peak_delta_bytes": max(0, after - before, delta["peak_delta_bytes"] - shift),
    }


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None

"""Per-cell progress on stderr: a bar redrawn in place on a terminal, plain lines otherwise."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from ..exports.summary import fmt_bytes, main_device
from .runner import CellDone

BAR = 24


def describe(record: dict[str, Any] | None, device: str | None) -> str:
    """``[3] cpu: delta +64.0 MiB, exact peak +65.5 MiB (0.12 s)`` for a CellRecord (the
    peak's kind when the record says it: ``exact`` or ``sampled``)."""
    if record is None:
        return "not recorded"
    count = record.get("execution_count")
    label = f"[{count}]" if count is not None else "[ ]"
    devices = record.get("devices") or {}
    if device is not None and device in devices:
        name, d = device, devices[device]
        delta, peak = d["delta_bytes"], d["peak_delta_bytes"]
    else:
        best = main_device(record)
        if best is None:
            return f"{label} no device measured"
        name, delta, peak = best.device, best.delta, best.peak
    how = (devices.get(name) or {}).get("peak_source")  # "exact" or "sampled" (CPU)
    status = "" if record.get("ok", True) else f" {record.get('error_type') or 'error'}"
    return (
        f"{label} {name}: delta {fmt_bytes(delta, signed=True)}, {how + ' ' if how else ''}"
        f"peak {fmt_bytes(peak, signed=True)} ({record.get('duration', 0):.2f} s){status}"
    )


class Progress:
    def __init__(self, device: str | None, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.device = device
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._drawn = False

    def cell(self, done: CellDone) -> None:
        n, total = done.index + 1, done.total
        text = describe(done.record, self.device)
        head = (done.record or {}).get("code_head", "")
        if self.tty:
            filled = BAR * n // max(total, 1)
            bar = "#" * filled + "." * (BAR - filled)
            line = f"[{bar}] {n}/{total} {text}  {head}"[:160]
            self.stream.write("\r\x1b[2K" + line)
            self._drawn = True
            if n == total:
                self.finish()
        else:
            self.stream.write(f"cell {n}/{total} {text}  {head}\n")
        self.stream.flush()

    def finish(self) -> None:
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False

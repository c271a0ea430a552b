"""The runtime baseline: what importing torch (and initialising CUDA) costs before any tensor
of the user's exists, so that the breakdown shows it as its own part of "Other".

- CPU: the bridge's CPU in-use reading (glibc mallinfo2; RSS under another malloc) just
  before ``import torch`` starts and just after torch's ``__init__`` has finished, taken by a
  ``sys.meta_path`` watch armed when vramscope is installed. Measured only when vramscope was
  loaded before torch, and torch was imported on the main thread; otherwise a note says why
  (never a guess).
- CUDA: device memory used outside PyTorch's allocator (device used minus reserved: the CUDA
  context and the libraries it loaded, plus whatever other processes held then) at the end
  of the cell that initialised CUDA. Nothing here creates a CUDA context: the reading is the
  recorder's own cell-end reading, which has ``device_used`` only once a context exists.

One baseline per process (torch is imported once): :data:`BASELINE`.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Mapping
from typing import Any, Callable, Optional

from .torch_import import TorchImportWatch

NOT_MEASURED_CPU = "torch was imported before vramscope"
NOT_MEASURED_THREAD = "torch's import was not seen completing on the kernel's main thread"
NOT_MEASURED_CUDA = "CUDA was initialised before vramscope"


class _BaselineWatch(TorchImportWatch):
    """The torch import watch that also calls ``before`` as ``import torch`` starts."""

    def __init__(self, before: Callable[[], None]) -> None:
        super().__init__()
        self._before = before

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if (
            fullname == "torch"
            and not self._finding
            and self._callback is not None
            and threading.current_thread() is threading.main_thread()
        ):
            with contextlib.suppress(Exception):
                self._before()
        return super().find_spec(fullname, path, target)


class RuntimeBaseline:
    """The measured baseline per device, or why it was not measured."""

    def __init__(self) -> None:
        self._read: Optional[Callable[[], int]] = None
        self._before: Optional[int] = None
        self.cpu_bytes: Optional[int] = None
        self.cpu_note: Optional[str] = None
        self.cuda_bytes: dict[str, int] = {}
        self.cuda_note: Optional[str] = None
        self._watch: Optional[_BaselineWatch] = None

    def start(self, read_cpu: Callable[[], int]) -> None:
        """vramscope is being installed: arm the import watch, or note that it is too late.
        Idempotent; never raises."""
        with contextlib.suppress(Exception):
            self._start(read_cpu)

    def _start(self, read_cpu: Callable[[], int]) -> None:
        self._read = read_cpu
        if self.cpu_bytes is not None or self.cpu_note is not None:
            return  # measured (or known unmeasurable) in an earlier install
        if "torch" in sys.modules:
            self.disarm()
            self.cpu_note = NOT_MEASURED_CPU
            if _cuda_initialized() and not self.cuda_bytes:
                self.cuda_note = NOT_MEASURED_CUDA
            return
        if self._watch is None:
            self._watch = _BaselineWatch(self._mark_before)
        self._watch.arm(self._mark_after)

    def disarm(self) -> None:
        if self._watch is not None:
            self._watch.disarm()
            self._watch = None

    def _mark_before(self) -> None:
        if self._read is not None:
            self._before = int(self._read())

    def _mark_after(self) -> None:
        self._watch = None  # the watch has left sys.meta_path
        if self._read is None or self._before is None:
            return
        self.cpu_bytes = max(0, int(self._read()) - self._before)

    def observe_cuda(self, readings: Mapping[str, Mapping[str, Any]]) -> None:
        """A cell's end readings: the first one of a CUDA device with a context sets its
        baseline (device used minus reserved). Never raises."""
        if self.cuda_note is not None:
            return
        with contextlib.suppress(Exception):
            for dev, reading in readings.items():
                if not dev.startswith("cuda:") or dev in self.cuda_bytes:
                    continue
                used, reserved = reading.get("device_used"), reading.get("reserved")
                if isinstance(used, int) and isinstance(reserved, int):
                    self.cuda_bytes[dev] = max(0, used - reserved)

    def part(self, dev: str, room: int) -> dict[str, Any]:
        """The breakdown's fields for ``dev``: ``runtime_bytes`` (at most ``room``, the
        unclaimed rest of the part it belongs to), ``runtime_note`` when it could not be
        measured, or nothing (vramscope not installed, or the device's baseline unknown)."""
        if dev == "cpu":
            measured, note = self.cpu_bytes, self.cpu_note
            if measured is None and note is None and self._read is not None:
                # started before torch came in, yet no measurement: another thread imported it
                note = NOT_MEASURED_THREAD if "torch" in sys.modules else None
        elif dev.startswith("cuda:"):
            measured, note = self.cuda_bytes.get(dev), self.cuda_note
        else:
            return {}
        if measured is not None:
            return {"runtime_bytes": max(0, min(room, measured))}
        return {"runtime_note": note} if note is not None else {}


def _cuda_initialized() -> bool:
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_initialized())
    except Exception:
        return False


#: the process's baseline (``Runtime.install`` starts it; the breakdown reads it)
BASELINE = RuntimeBaseline()

__all__ = ["BASELINE", "NOT_MEASURED_CPU", "NOT_MEASURED_CUDA", "RuntimeBaseline"]

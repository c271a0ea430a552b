"""Ctrl-C during a batch-size search: it stops the user's step, never the finder's restore.

While a search runs on the main thread, SIGINT goes to ``InterruptGuard``'s handler. In the
middle of the user's step it does what the handler it replaced does (a KeyboardInterrupt, the
step stops, the trial is put back and the search ends). While the finder's own code runs (a
protected function anywhere on the stack: the trial's set-up and restore; or a function whose
own lines are running: the trial between those) it only records the signal, and
``raise_pending`` delivers it once everything is back. The previous handler is put back when
the search ends. Python runs signal handlers between bytecodes of the main thread, so the
handler sees the exact frame the interrupt landed in.

Off the main thread (``signal.signal`` is refused there) nothing is installed.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any


class InterruptGuard:
    def __init__(self, protected: Iterable[Callable[..., Any]], own: Iterable[Callable[..., Any]]):
        #: functions during which (and in everything they call) Ctrl-C waits
        self._protected = {_code(f) for f in protected} | {_code(self.close)}
        #: functions whose own lines defer Ctrl-C (not what they call)
        self._own = {_code(f) for f in own} | {_code(self.raise_pending)}
        self._previous: Any = None
        self._pending: FrameType | None = None
        self._received = False
        self.active = False
        #: signals held back until a restore finished (tests read it)
        self.deferred = 0

    def open(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        try:
            self._previous = signal.signal(signal.SIGINT, self._handler)
            self.active = True
        except (ValueError, OSError):
            self.active = False

    def close(self) -> None:
        """Puts the previous handler back; a signal still held is delivered."""
        if self.active:
            self.active = False
            signal.signal(signal.SIGINT, self._previous)
        self.raise_pending()

    def raise_pending(self) -> None:
        if not self._received:
            return
        frame, self._pending, self._received = self._pending, None, False
        self._deliver(frame)

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        if frame is not None and (frame.f_code in self._own or self._in_protected(frame)):
            self._received, self._pending = True, frame
            self.deferred += 1
            return
        self._deliver(frame)

    def _in_protected(self, frame: FrameType | None) -> bool:
        while frame is not None:
            if frame.f_code in self._protected:
                return True
            frame = frame.f_back
        return False

    def _deliver(self, frame: FrameType | None) -> None:
        previous = self._previous
        if callable(previous):
            previous(signal.SIGINT, frame)
        elif previous != signal.SIG_IGN:
            raise KeyboardInterrupt


def _code(fn: Callable[..., Any]) -> Any:
    return getattr(fn, "__func__", fn).__code__

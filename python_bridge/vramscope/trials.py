"""Whether a batch-size finder's trial step is running on this thread.

``vramscope.find_batch_size`` runs the user's training step at sizes it would never train at
(a trial may be stopped half-way by its budget). Model insight leaves forwards run inside a
trial out of its figures (``running()``), so a trial never feeds the per-layer activations
or the Estimator. Thread-local: a trial on another thread changes nothing here.
"""

from __future__ import annotations

import threading

_state = threading.local()


def running() -> bool:
    """A finder trial is running on this thread."""
    return getattr(_state, "depth", 0) > 0


def begin() -> None:
    _state.depth = getattr(_state, "depth", 0) + 1


def end() -> None:
    _state.depth = max(0, getattr(_state, "depth", 0) - 1)

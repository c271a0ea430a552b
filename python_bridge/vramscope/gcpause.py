"""The bridge's own work between cells runs with Python's cyclic GC paused (issue 19).

Model insight after a cell that ran a 1,000-module model allocates ~18,000 container objects
(layer rows, claims, messages). With the collector on, that is ~26 young-generation
collections, and every tenth of those a middle one; sooner or later they tip a full
collection over every object of the kernel (~0.3 s with such a model in it), inside the
bridge's bookkeeping, where a plain kernel would have run none. Paused, the same objects
are looked at by one young collection at the end (:func:`paused`), which ages the older
generations by one step, as a single automatic collection would.

The user's choice is kept: with the collector disabled (or its first threshold 0), nothing
is switched or collected. Nothing of the user's runs inside a pause: it wraps the bridge's
IPython hooks and its after-reply jobs, never a cell; a cell's starting reading is taken
after the pause ended (runtime.py), so a collection it triggers is never the cell's.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """Run the body with the cyclic GC off, then one young collection if it is due."""
    if not gc.isenabled():  # the user turned it off, or an outer pause did
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        threshold = gc.get_threshold()[0]
        if threshold and gc.get_count()[0] > threshold:
            gc.collect(0)

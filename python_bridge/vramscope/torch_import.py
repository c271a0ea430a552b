"""``TorchImportWatch``: a callback the moment ``import torch`` has completed.

Its own module so that both its users depend on it and not on each other: the insight link
(``insight_link``: tracking starts when torch comes in) and the runtime baseline
(``torch_baseline``: what the import cost), which the insight breakdown reads. The dependency
runs one way: ``insight_link`` -> ``insight`` -> ``torch_baseline`` -> ``torch_import``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import threading
from typing import Any, Callable, Optional


class TorchImportWatch:
    """A ``sys.meta_path`` finder that calls back once ``import torch`` has completed.

    It finds nothing itself: for ``torch`` it asks the other finders for the spec and wraps
    the loader's ``exec_module`` for that one import, so the callback runs right after
    torch's ``__init__`` has finished, on the importing thread (only the main thread's
    import counts: saved-tensor hooks are thread-local). Then it leaves ``sys.meta_path``.
    """

    def __init__(self) -> None:
        self._callback: Optional[Callable[[], None]] = None
        self._finding = False

    def arm(self, callback: Callable[[], None]) -> None:
        self._callback = callback
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def disarm(self) -> None:
        self._callback = None
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != "torch" or self._finding or self._callback is None:
            return None
        self._finding = True
        try:
            spec = importlib.util.find_spec(fullname)
        except Exception:
            return None
        finally:
            self._finding = False
        loader: Any = getattr(spec, "loader", None)
        original = getattr(loader, "exec_module", None)
        if spec is None or original is None:
            return None
        callback, watch = self._callback, self

        def exec_module(module: Any) -> None:
            try:
                original(module)
            finally:
                with contextlib.suppress(AttributeError):
                    del loader.exec_module  # back to the class's own method
                watch.disarm()
            if threading.current_thread() is threading.main_thread():
                with contextlib.suppress(Exception):
                    callback()

        try:
            loader.exec_module = exec_module
        except Exception:
            return None
        return spec

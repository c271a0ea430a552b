"""``vramscope.widget()``: a live memory chart with cell bands, inline in cell output.

An ipywidgets ``DOMWidget`` whose view is registered by the vramscope JupyterLab extension.
The model carries only display choices (device, window, height) and the kernel's
``session_id``; the chart itself is drawn from the same session data as the panel, which the
front end already holds (no sample stream goes through the widget).
"""

from __future__ import annotations

import functools
from typing import Any

#: The widget module (the npm package) and its own protocol version (not the package's).
WIDGET_MODULE = "jupyterlab-vramscope"
WIDGET_MODULE_VERSION = "^1.0.0"

MISSING = (
    "vramscope.widget() needs ipywidgets in the kernel's environment "
    "(and jupyterlab_widgets in JupyterLab's): run  %pip install ipywidgets  "
    "then restart the kernel. The vramscope panel works without it."
)


@functools.cache
def _widget_class() -> type:
    try:
        import ipywidgets
        from traitlets import Float, Int, Unicode
    except ImportError as err:
        raise ImportError(MISSING) from err

    class MemoryWidget(ipywidgets.DOMWidget):
        """The inline chart; ``device`` '' follows the first accelerator (else the CPU)."""

        _model_name = Unicode("MemoryWidgetModel").tag(sync=True)
        _model_module = Unicode(WIDGET_MODULE).tag(sync=True)
        _model_module_version = Unicode(WIDGET_MODULE_VERSION).tag(sync=True)
        _view_name = Unicode("MemoryWidgetView").tag(sync=True)
        _view_module = Unicode(WIDGET_MODULE).tag(sync=True)
        _view_module_version = Unicode(WIDGET_MODULE_VERSION).tag(sync=True)
        session_id = Unicode("").tag(sync=True)
        device = Unicode("").tag(sync=True)
        window = Float(60.0, min=1.0).tag(sync=True)
        height = Int(120, min=40).tag(sync=True)

    return MemoryWidget


def widget(device: str | None = None, window: float = 60.0, height: int = 120) -> Any:
    """A live memory chart of this kernel for cell output (display it, or end a cell with it).

    ``device``: ``"cuda:0"``, ``"cpu"``, ...; None follows the first accelerator, else the CPU.
    ``window``: seconds shown, ending at the newest sample. ``height``: pixels.
    Raises ImportError with the install command when ipywidgets is missing.
    """
    from .runtime import get_runtime

    cls = _widget_class()
    return cls(
        session_id=get_runtime().session_id,
        device=device or "",
        window=float(window),
        height=int(height),
    )

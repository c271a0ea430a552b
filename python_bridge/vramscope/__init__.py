"""vramscope: PyTorch memory per cell, live, in JupyterLab."""

from ._version import __version__

__all__ = ["__version__"]


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "jupyterlab-vramscope"}]

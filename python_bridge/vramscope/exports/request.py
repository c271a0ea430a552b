"""The ``export_report`` request (protocol 1.1): the panel asks for a rendered report file."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

from . import EXTENSIONS, MIME_TYPES, normalize_format, render, with_notebook

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def report_filename(notebook: str | None, fmt: str) -> str:
    """``dir/My notebook.ipynb`` + html -> ``My_notebook.vramscope.html`` (a plain file name)."""
    stem = PurePosixPath(notebook).stem if notebook else ""
    stem = _UNSAFE.sub("_", stem).strip("._") or "session"
    return f"{stem[:100]}.vramscope{EXTENSIONS[normalize_format(fmt)]}"


def export_result(report: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """``{filename, content, mime, format}`` for validated ``params`` ``{format, notebook?}``."""
    fmt = normalize_format(str(params["format"]))
    notebook = params.get("notebook")
    named = with_notebook(report, PurePosixPath(notebook).name if notebook else None)
    return {
        "format": fmt,
        "filename": report_filename(notebook, fmt),
        "content": render(named, fmt),
        "mime": MIME_TYPES[fmt],
    }

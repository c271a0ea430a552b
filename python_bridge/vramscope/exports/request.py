"""The ``export_report`` request (protocol 1.1): the panel asks for a rendered report file."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

from . import EXTENSIONS, MIME_TYPES, normalize_format, render, with_notebook

#: Characters no file name may hold on a common file system (Windows' set, which includes
#: POSIX's "/"), control and format characters (bidi overrides could disguise a name).
_ILLEGAL = re.compile(r'[<>:"/\\|?*]')
_RESERVED = {"CON", "PRN", "AUX", "NUL", *(f"{p}{n}" for p in ("COM", "LPT") for n in range(1, 10))}
#: A file name's stem at most this many UTF-8 bytes (file systems allow 255 for the name).
MAX_STEM_BYTES = 150


def report_filename(notebook: str | None, fmt: str) -> str:
    """``dir/My notebook.ipynb`` + html -> ``My notebook.vramscope.html``: a plain file name
    that keeps the notebook's stem, non-ASCII letters and spaces included. Only characters
    a file name cannot hold are replaced, and then (or when the stem is cut to
    ``MAX_STEM_BYTES``) a hash of the whole stem is added, so two notebooks never get the
    same name (``a b``, ``a_b`` and ``a?b`` give three)."""
    stem = PurePosixPath(notebook).stem if notebook else ""
    safe = "".join("_" if _illegal(ch) else ch for ch in stem).strip(" .")
    if safe.split(".")[0].upper() in _RESERVED:
        safe = f"_{safe}"
    cut = safe.encode("utf-8")[:MAX_STEM_BYTES].decode("utf-8", "ignore")
    if not stem:
        cut = "session"
    elif cut != stem or not cut:
        digest = hashlib.sha256(stem.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        cut = f"{cut.rstrip(' .')}-{digest}".lstrip("-") if cut else digest
    return f"{cut}.vramscope{EXTENSIONS[normalize_format(fmt)]}"


def _illegal(ch: str) -> bool:
    return bool(_ILLEGAL.match(ch)) or unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp")


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

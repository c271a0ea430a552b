"""The package version; package.json is its one source (copied in at build time)."""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path


def _read_version() -> str:
    here = Path(__file__).resolve().parent
    for candidate in (here / "labextension" / "package.json", here.parent.parent / "package.json"):
        try:
            data = json.loads(candidate.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if data.get("name") == "jupyterlab-vramscope":
            return str(data["version"])
    try:
        return metadata.version("vramscope")
    except metadata.PackageNotFoundError:
        return "0.0.0"


__version__ = _read_version()

"""Hatchling version source: package.json is the one source of the version."""

import json
from pathlib import Path

__version__ = json.loads((Path(__file__).resolve().parent.parent / "package.json").read_text())[
    "version"
]

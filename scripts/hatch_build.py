"""Refuse to build a wheel without the prebuilt labextension (hatchling would do it silently)."""

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class CustomBuildHook(BuildHookInterface):  # type: ignore[misc]
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        ext = Path(self.root) / "python_bridge" / "vramscope" / "labextension" / "package.json"
        if not ext.exists():
            raise RuntimeError(
                f"{ext} is missing: build the front end first (npm install && npm run build:prod)"
            )

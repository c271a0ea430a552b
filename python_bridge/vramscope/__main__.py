"""``python -m vramscope``: the ``vramscope`` command line (vramscope.cli)."""

from __future__ import annotations

from .cli import main

raise SystemExit(main())

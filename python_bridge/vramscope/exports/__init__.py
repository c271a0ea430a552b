"""Reports out of the session: JSON, CSV, Markdown and self-contained HTML.

``render(report, fmt)`` gives one file's text; ``write_report(report, path)`` writes it (the
format from the suffix unless given). ``vramscope.export(path)`` does this for the running
session, the ``export_report`` request for the panel, ``vramscope profile`` for the CLI.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable

from .csv_ import render_cells_csv, render_samples_csv
from .html import render_html
from .json_ import load_report, parse_report, render_json
from .markdown import render_markdown

FORMATS = ("json", "csv", "markdown", "html")
SUFFIXES = {
    ".json": "json",
    ".csv": "csv",
    ".md": "markdown",
    ".markdown": "markdown",
    ".html": "html",
    ".htm": "html",
}
EXTENSIONS = {"json": ".json", "csv": ".csv", "markdown": ".md", "html": ".html"}
MIME_TYPES = {
    "json": "application/json",
    "csv": "text/csv",
    "markdown": "text/markdown",
    "html": "text/html",
}
_ALIASES = {"md": "markdown", "htm": "html"}
_RENDERERS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "json": render_json,
    "csv": render_cells_csv,
    "markdown": render_markdown,
    "html": render_html,
}


def normalize_format(fmt: str) -> str:
    """``"md"`` -> ``"markdown"``; ValueError for an unknown format."""
    name = _ALIASES.get(fmt.lower().lstrip("."), fmt.lower().lstrip("."))
    if name not in FORMATS:
        raise ValueError(f"unknown report format {fmt!r}; known: json, csv, md, html")
    return name


def format_for(path: str | Path, fmt: str | None = None) -> str:
    """The format named by ``fmt``, else by the file suffix; ValueError when neither does."""
    if fmt is not None:
        return normalize_format(fmt)
    suffix = Path(path).suffix.lower()
    if suffix not in SUFFIXES:
        raise ValueError(
            f"cannot tell the report format from {str(path)!r}: use a .json, .csv, .md or "
            ".html name, or pass format="
        )
    return SUFFIXES[suffix]


def render(report: Mapping[str, Any], fmt: str) -> str:
    """One file's text in format ``fmt`` (csv: the cells table)."""
    return _RENDERERS[normalize_format(fmt)](report)


def samples_path(path: str | Path) -> Path:
    """The CSV samples table next to ``path``: ``r.csv`` -> ``r.samples.csv``."""
    p = Path(path)
    return p.with_name(f"{p.stem}.samples.csv")


def write_report(
    report: Mapping[str, Any],
    path: str | Path,
    fmt: str | None = None,
    *,
    samples: bool = False,
    overwrite: bool = False,
) -> list[Path]:
    """Write ``report`` to ``path``; returns the files written (CSV with ``samples``: two).

    An existing file is never replaced unless ``overwrite``: FileExistsError names every
    file in the way (the ``.samples.csv`` sibling too) and nothing is written."""
    name = format_for(path, fmt)
    target = Path(path)
    files = [(target, render(report, name))]
    if name == "csv" and samples:
        files.append((samples_path(target), render_samples_csv(report)))
    if not overwrite:
        taken = [str(p) for p, _ in files if p.exists() or p.is_symlink()]
        if taken:
            raise FileExistsError(
                f"{' and '.join(taken)} already exist{'s' if len(taken) == 1 else ''}: "
                "pass overwrite=True to replace, or choose another name"
            )
    for file, text in files:
        # "x": a file created meanwhile is not replaced either. errors="replace": a lone
        # surrogate in a user string (chr(0xD800)) becomes "?"
        with open(file, "w" if overwrite else "x", encoding="utf-8", errors="replace") as f:
            f.write(text)
    return [file for file, _ in files]


def with_notebook(report: Mapping[str, Any], notebook: str | None) -> dict[str, Any]:
    """The report with its ``notebook`` key set (since 1.1; shown in the titles)."""
    out = dict(report)
    if notebook:
        out["notebook"] = notebook
    return out


__all__ = [
    "EXTENSIONS",
    "FORMATS",
    "MIME_TYPES",
    "format_for",
    "load_report",
    "normalize_format",
    "parse_report",
    "render",
    "render_samples_csv",
    "samples_path",
    "with_notebook",
    "write_report",
]

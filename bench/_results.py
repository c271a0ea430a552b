"""bench/RESULTS.md: one section per benchmark, rewritten in place by ``record``.

Sections are delimited by ``## <title>`` headings. ``record`` replaces every section whose
heading is ``title`` (also the older form ``<title> (<date…>)`` that carried the timestamp in
the heading) with a fresh one at the place of the first, or appends it; every other section,
including ones other scripts write, is kept byte for byte.
"""

from __future__ import annotations

import datetime
import platform
import re
from pathlib import Path

RESULTS = Path(__file__).with_name("RESULTS.md")
HEADER = "# Benchmark results\n"
_STAMPED = re.compile(r"^(?P<title>.*?) \(\d{4}-\d\d-\d\d[^()]*\)$")


def _title(heading: str) -> str:
    match = _STAMPED.match(heading)
    return match.group("title") if match else heading


def _split(text: str) -> tuple[str, list[tuple[str, str]]]:
    """The text before the first section, and each section as (title, text)."""
    parts = re.split(r"(?m)^(?=## )", text)
    head, sections = parts[0], []
    for part in parts[1:]:
        heading = part.split("\n", 1)[0][3:].strip()
        sections.append((_title(heading), part))
    return head, sections


def record(title: str, lines: list[str], path: Path = RESULTS) -> None:
    """Write ``lines`` (as a bullet list) as the section ``## title`` of ``path``."""
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    body = "\n".join(f"- {line}" for line in lines)
    section = f"## {title}\n\n_{stamp}, {platform.machine()}_\n\n{body}\n\n"
    text = path.read_text(encoding="utf-8") if path.exists() else HEADER
    head, sections = _split(text)
    out: list[str] = []
    placed = False
    for name, part in sections:
        if name != title:
            out.append(part if part.endswith("\n\n") else part.rstrip("\n") + "\n\n")
        elif not placed:
            out.append(section)
            placed = True
    if not placed:
        out.append(section)
    head = head.rstrip("\n") + "\n\n" if head.strip() else HEADER + "\n"
    path.write_text((head + "".join(out)).rstrip("\n") + "\n", encoding="utf-8")


def print_and_record(title: str, lines: list[str], write: bool) -> None:
    """Print a bench's ``lines``, and write them as the section ``## title`` when ``write``
    (its ``--record``)."""
    print("\n".join(lines))
    if write:
        record(title, lines)

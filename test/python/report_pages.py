"""Reading the reports back in tests: an HTML page's summary text and tables, exact byte
figures (``225,755,136 B``) and Markdown tables."""

from __future__ import annotations

from html.parser import HTMLParser


class PageText(HTMLParser):
    """The page's text, the summary section's alone, and its tables as rows of cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0  # inside <section class="summary">
        self.summary: list[str] = []
        self.tables: dict[str, list[list[str]]] = {}
        self._heading: str | None = None
        self._last_heading = ""
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "section" and ("class", "summary") in attrs:
            self.depth = 1
        elif tag == "section" and self.depth:
            self.depth += 1
        if tag in ("h2", "h3"):
            self._heading = ""
        if tag == "tr":
            self._row = []
        if tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "section" and self.depth:
            self.depth -= 1
        if tag in ("h2", "h3") and self._heading is not None:
            self._last_heading = self._heading
            self._heading = None
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell))
            self._cell = None
        if tag == "tr" and self._row is not None:
            key = ("summary: " if self.depth else "") + self._last_heading
            self.tables.setdefault(key, []).append(self._row)
            self._row = None

    def handle_data(self, data: str) -> None:
        if self.depth:
            self.summary.append(data)
        if self._heading is not None:
            self._heading += data
        if self._cell is not None:
            self._cell.append(data)


def exact_bytes(text: str) -> int:
    """``225,755,136 B`` -> 225755136."""
    return int(text.removesuffix(" B").replace(",", ""))


def md_table(md: str, heading: str) -> list[list[str]]:
    """The body rows of the first table under ``heading`` (the line), as cell texts."""
    lines = md.split(heading + "\n", 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines[start + 2 : end]]

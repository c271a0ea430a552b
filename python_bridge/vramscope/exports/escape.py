"""Escaping of user strings (cell source, variable, module and notebook names) per format."""

from __future__ import annotations

import html
import json
import re
from typing import Any

#: Characters a spreadsheet reads as the start of a formula (OWASP "CSV injection").
CSV_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")
_SCRIPT_UNSAFE = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
_SCRIPT_UNSAFE_RE = re.compile("[<>&\u2028\u2029]")


def html_text(value: object) -> str:
    """Text for HTML content or a quoted attribute: ``& < > " '`` become entities."""
    return html.escape(str(value), quote=True)


def markdown_text(value: object) -> str:
    """Text that Markdown renders literally: no markup, no raw HTML, one line."""
    text = " ".join(str(value).splitlines())
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", text)


def csv_cell(value: Any) -> Any:
    """A CSV field: strings that a spreadsheet would run as a formula get a leading ``'``.

    Numbers are written as numbers (a negative delta stays numeric); only text is escaped.
    """
    if isinstance(value, str) and value.startswith(CSV_FORMULA_STARTS):
        return "'" + value
    return value


def script_json(value: Any) -> str:
    """JSON safe inside ``<script>``: ``< > &`` and U+2028/2029 as ``\\uXXXX`` escapes.

    ``</script>`` or ``<!--`` in a string can then never end or change the script element,
    and ``JSON.parse`` gives back exactly the original strings.
    """
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return _SCRIPT_UNSAFE_RE.sub(lambda m: _SCRIPT_UNSAFE[m.group(0)], text)

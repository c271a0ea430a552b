"""What the tokenizer says about a cell's lines, for edits that must keep every other byte.

A line that begins inside a string token (the second and later lines of a triple-quoted
string or f-string, a backslash-continued string) belongs to the string's value: indenting
it would change the string. The AST gives columns as UTF-8 byte offsets; Python strings are
indexed by character: :func:`char_col` converts.
"""

from __future__ import annotations

import io
import tokenize
from dataclasses import dataclass

_FSTRING_START = getattr(tokenize, "FSTRING_START", None)  # Python 3.12+
_FSTRING_END = getattr(tokenize, "FSTRING_END", None)


class Untokenizable(Exception):
    """The source does not tokenize (the message says why)."""


@dataclass(frozen=True)
class LineFacts:
    """``in_string``: 1-based numbers of the lines whose first character lies inside a
    string literal."""

    in_string: frozenset[int]


def line_facts(source: str) -> LineFacts:
    inside: set[int] = set()
    starts: list[tuple[int, int]] = []  # open f-strings (3.12 tokenizes them in parts)
    readline = io.StringIO(source).readline
    try:
        for tok in tokenize.generate_tokens(readline):
            if tok.type == tokenize.STRING:
                inside.update(range(tok.start[0] + 1, tok.end[0] + 1))
            elif _FSTRING_START is not None and tok.type == _FSTRING_START:
                starts.append(tok.start)
            elif _FSTRING_END is not None and tok.type == _FSTRING_END and starts:
                first = starts.pop()
                inside.update(range(first[0] + 1, tok.end[0] + 1))
    except (tokenize.TokenError, SyntaxError) as err:
        raise Untokenizable(str(err)) from None
    return LineFacts(frozenset(inside))


def char_col(line: str, byte_col: int | None) -> int:
    """The character index in ``line`` of the AST's UTF-8 byte offset ``byte_col``."""
    if byte_col is None:
        return len(line)
    return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="replace"))


def indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def comment_only(line: str) -> bool:
    return line.lstrip().startswith("#")

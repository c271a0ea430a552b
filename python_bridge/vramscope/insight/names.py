"""Which namespace names are the user's: told apart in C set operations, not per name (issue 19).

IPython adds names to the namespace with every cell (``_i12``, and ``_12`` for an output), so
a long session has thousands that are never the user's variables; ``In`` lists every cell's
source. What the bridge looks at after every cell (the models to watch, the tensors the
breakdown's ``other_tensors`` sums, the holders) must not cost in proportion to them: measured
after ~1,500 cells, a Python loop over the namespace and ``In`` took ~1 ms a cell. Each name is
classified once, the first time it is seen, and a cell looks only at the names added since the
last one (``_names``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

IPYTHON_NAMES = frozenset(
    {"In", "Out", "_ih", "_oh", "_dh", "_i", "_ii", "_iii", "_", "__", "___", "exit", "quit"}
)
_HISTORY_NAME = re.compile(r"^_(i+|i?\d+)$")
#: IPython's input history: the cells' sources (``_i12``, ``_i``, ``In``), never a model
_INPUT_NAME = re.compile(r"^_i(i{0,2}|\d+)$")

#: Names seen in a namespace, and those of them that are never user variables (IPython's
#: history ``_i12``/``_12``, dunders): a name is classified once, not again after every cell.
#: Only strings are kept: a key of another type (``globals()[1] = x``) is nobody's name.
_SEEN: set[str] = set()
_NOT_USER: set[str] = set(IPYTHON_NAMES)
#: ``_12``: Out[12]
OUTPUT_NAMES: set[str] = set()
#: Not looked at for tensors: names starting with ``_`` (IPython's own, and private ones),
#: and IPython's names that hold no tensor (``In``: the cells' sources).
_NOT_PUBLIC: set[str] = {"In", "exit", "quit"}
#: Not looked at for models: IPython's input history (strings by construction).
_INPUT: set[str] = {"In", "_ih", "exit", "quit"}
_MISSING = object()


def _classify(names: Iterable[str]) -> None:
    new = set(names) - _SEEN
    if new:
        for name in new:
            if name.startswith("_"):
                _NOT_PUBLIC.add(name)
            if name.startswith("__") or _HISTORY_NAME.match(name) is not None:
                _NOT_USER.add(name)
                if name[1:].isdigit():
                    OUTPUT_NAMES.add(name)
            if _INPUT_NAME.match(name) is not None:
                _INPUT.add(name)
        _SEEN.update(new)


@dataclass
class _Names:
    """One namespace's names as last seen, in its order: all, the user's, the public ones
    and those that may hold a model (all but IPython's input history)."""

    keys: list[str] = field(default_factory=list)
    user: list[str] = field(default_factory=list)
    public: list[str] = field(default_factory=list)
    candidates: list[str] = field(default_factory=list)


#: per namespace (by id; string names only, never a value): the last few namespaces looked at
_NAMES: dict[int, _Names] = {}
_KEEP = 4


def _names(namespace: dict[str, Any]) -> _Names:
    """``namespace``'s names, classified: only the names added since the last call are looked
    at when the others are still there in the same order (a cell's ``_iN``, new variables);
    else all of them (a name was deleted or rebound after a deletion). A namespace with a key
    that is not a string is read afresh every time, and that key left out: nothing of the
    user's is kept."""
    now = list(namespace)
    seen = _NAMES.pop(id(namespace), None)
    if seen is not None and len(now) >= len(seen.keys) and now[: len(seen.keys)] == seen.keys:
        tail = now[len(seen.keys) :]
    else:
        seen, tail = _Names(), now
    strings = [n for n in tail if type(n) is str]
    if strings:
        _classify(strings)
        seen.user.extend(n for n in strings if n not in _NOT_USER)
        seen.public.extend(n for n in strings if n not in _NOT_PUBLIC)
        seen.candidates.extend(n for n in strings if n not in _INPUT)
    if len(strings) == len(tail):
        seen.keys = now
        _NAMES[id(namespace)] = seen
        while len(_NAMES) > _KEEP:
            del _NAMES[next(iter(_NAMES))]
    return seen


def output_names(namespace: dict[str, Any]) -> set[Any]:
    """The output cache's ``_12`` names in ``namespace``."""
    _names(namespace)  # classifies its string names
    return namespace.keys() & OUTPUT_NAMES


def user_items(namespace: dict[str, Any], hidden: Iterable[str]) -> list[tuple[str, Any]]:
    """The user's variables in ``namespace`` (its order), without IPython's own names."""
    skip = hidden.keys() if isinstance(hidden, dict) else set(hidden)
    return _values(namespace, [n for n in _names(namespace).user if n not in skip])


def model_candidates(namespace: dict[str, Any]) -> list[Any]:
    """The values of ``namespace`` that may be a model: all but IPython's input history (a
    model bound only to a hidden name, to ``_`` or ``Out``, or to ``__net`` is one)."""
    return [value for _, value in _values(namespace, _names(namespace).candidates)]


def public_items(namespace: dict[str, Any]) -> list[tuple[str, Any]]:
    """``namespace``'s items whose names do not start with ``_`` (its order), ``In`` (the
    cells' sources), ``exit`` and ``quit`` left out."""
    return _values(namespace, _names(namespace).public)


def _values(namespace: dict[str, Any], names: list[Any]) -> list[tuple[str, Any]]:
    items = []
    for name in names:
        value = namespace.get(name, _MISSING)
        if value is not _MISSING:
            items.append((name, value))
    return items

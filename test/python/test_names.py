"""insight/names.py: the user's names, kept between calls, match a from-scratch reading."""

from __future__ import annotations

import random
import re
from typing import Any

from vramscope.insight.names import IPYTHON_NAMES, public_items, user_items

HISTORY = re.compile(r"^_(i+|i?\d+)$")


def naive_user(ns: dict[str, Any], hidden: set[str]) -> list[tuple[str, Any]]:
    return [
        (n, v)
        for n, v in ns.items()
        if n not in IPYTHON_NAMES
        and not n.startswith("__")
        and not HISTORY.match(n)
        and n not in hidden
    ]


def naive_public(ns: dict[str, Any]) -> list[tuple[str, Any]]:
    return [
        (n, v) for n, v in ns.items() if not n.startswith("_") and n not in {"In", "exit", "quit"}
    ]


def test_names_follow_every_change_of_the_namespace() -> None:
    """Names added, deleted, re-added (moved to the end) and rebound, as cells do, for 2,000
    steps: both views equal a reading of the whole namespace after every step."""
    rng = random.Random(7)
    ns: dict[str, Any] = {"In": [], "Out": {}, "exit": None, "__name__": "__main__"}
    pool = [f"v{i}" for i in range(40)] + ["_private", "model", "_", "__", "In"]
    hidden = {"v3"}
    for step in range(2000):
        op = rng.random()
        if op < 0.3:
            ns[f"_i{step}"] = "source"  # a cell's input, as IPython adds it
        elif op < 0.4:
            ns[f"_{step}"] = step  # an output
        elif op < 0.7:
            ns[rng.choice(pool)] = object()  # bound, or rebound in place
        elif op < 0.85 and ns:
            del ns[rng.choice(list(ns))]
        else:
            name = rng.choice(pool)
            value = ns.pop(name, 0)
            ns[name] = value  # deleted and bound again: now last
        assert user_items(ns, hidden) == naive_user(ns, hidden)
        assert public_items(ns) == naive_public(ns)


def test_a_new_namespace_of_the_same_size_is_read_afresh() -> None:
    a = {"x": 1, "y": 2}
    assert [n for n, _ in user_items(a, {})] == ["x", "y"]
    b = {"p": 1, "q": 2}
    assert [n for n, _ in user_items(b, {})] == ["p", "q"]
    a.clear()
    a.update({"z": 3, "x": 4})
    assert user_items(a, {}) == [("z", 3), ("x", 4)]

"""insight/names.py: the user's names, kept between calls, match a from-scratch reading."""

from __future__ import annotations

import random
import re
from typing import Any

from vramscope.insight.names import IPYTHON_NAMES, model_candidates, public_items, user_items

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


def test_a_key_that_is_not_a_string_is_left_out_and_not_kept() -> None:
    """``globals()[key] = x`` with a key object: no view lists it, and nothing keeps it."""
    import gc
    import weakref

    class Key:
        pass

    key = Key()
    ref = weakref.ref(key)
    ns: dict[Any, Any] = {"x": 1, key: 2, "_y": 3}
    assert user_items(ns, {}) == [("x", 1), ("_y", 3)]
    assert public_items(ns) == [("x", 1)]
    assert model_candidates(ns) == [1, 3]
    del ns[key], key
    gc.collect()
    assert ref() is None


def test_models_may_be_bound_to_any_name_but_the_input_history() -> None:
    """A model shown as a cell's output (``_``, ``_1``), hidden by IPython (startup files) or
    bound to ``__net`` is still a candidate for watching; the cells' sources never are."""
    ns: dict[str, Any] = {"In": ["src"], "_i1": "src", "_ii": "src", "_ih": ["src"]}
    ns.update({"_": "m", "_1": "m1", "__net": "m2", "hidden": "m3", "Out": {1: "m1"}})
    assert model_candidates(ns) == ["m", "m1", "m2", "m3", {1: "m1"}]

"""The kernel side's imports go one way: no module of python_bridge/vramscope imports, at
module level or inside a function, a module that imports it back (directly or through
others). A package's ``__init__`` counts as the package."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "python_bridge" / "vramscope"


def _modules() -> dict[str, tuple[Path, list[str]]]:
    mods = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
            package = parts
        else:
            package = parts[:-1]
        mods[".".join(parts)] = (path, package)
    return mods


def _edges(mods: dict[str, tuple[Path, list[str]]]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {name: set() for name in mods}
    for name, (path, package) in mods.items():
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[: len(package) - (node.level - 1)]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                subs = [f"{module}.{a.name}" for a in node.names if f"{module}.{a.name}" in mods]
                targets += subs
                if len(subs) < len(node.names):
                    targets.append(module)
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            edges[name].update(t for t in targets if t in mods and t != name)
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        comp.append(top)
                        if top == node:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(edges[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_no_import_circles() -> None:
    mods = _modules()
    assert len(mods) > 50
    assert _cycles(_edges(mods)) == []


def test_the_scan_sees_a_circle() -> None:
    """The check can fail: a made-up circle a -> b -> c -> a is found."""
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(edges) == [["a", "b", "c"]]

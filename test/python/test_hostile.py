"""Hostile strings on the kernel side: module names, namespace names, cell sources and
notebook names holding HTML, ``</script>``, a bidi override, a newline followed by code,
100,000 characters, and a lone surrogate. They must reach the panel as the same text (a lone
surrogate, which Jupyter's UTF-8 serializer refuses, as U+FFFD), never drop a message, never
become code in an inserted cell, and stay inert in every export format."""

from __future__ import annotations

import ast
import csv
import io
import json
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from faults_session import Session
from test_protocol_fixtures import validate_kernel_message
from vramscope.optimize.context import Context, code_name
from vramscope.textsafe import safe_text, wire_safe

HTML = "<img src=x onerror=alert(1)>"
SCRIPT = "</script><script>alert(1)</script>"
BIDI = "evil\u202etxt-exe"
NEWLINE = "a\n__import__('os')"  # module names cannot hold a dot
LONG = "L" * 100_000
LONE = "\ud800x"
NAMES = [HTML, SCRIPT, BIDI, NEWLINE, LONG, LONE]


# --- inserted cells: a name never becomes code -----------------------------------------------


def _one_expression(text: str) -> ast.expr:
    tree = ast.parse(text)
    assert len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr), text
    return tree.body[0].value


@pytest.mark.parametrize("name", [*NAMES, "class", "0", "²"])
def test_a_module_path_becomes_one_expression_reaching_that_module(name: str) -> None:
    model = torch.nn.Sequential()
    inner = torch.nn.Sequential()
    model.add_module(name, inner)
    leaf = torch.nn.Linear(1, 1)
    inner.add_module("0", leaf)
    ctx = SimpleNamespace(names=SimpleNamespace(model="model"), model_name=None)
    text = Context.expr(ctx, f"{name}.0")  # type: ignore[arg-type]
    _one_expression(text)
    assert "\n" not in text
    assert eval(compile(text, "<expr>", "eval"), {"model": model}) is leaf


@pytest.mark.parametrize("name", [*NAMES, "model", "class"])
def test_a_namespace_name_becomes_one_expression_reaching_that_entry(name: str) -> None:
    text = code_name(name)
    assert text is not None and "\n" not in text
    _one_expression(text)
    namespace: dict[str, Any] = {name: "the entry"}
    assert eval(compile(text, "<expr>", "eval"), namespace) == "the entry"


# --- the wire ---------------------------------------------------------------------------------


def test_wire_safe_replaces_only_lone_surrogates() -> None:
    assert safe_text(HTML + BIDI + NEWLINE) == HTML + BIDI + NEWLINE
    assert safe_text(LONE) == "\ufffdx"
    assert safe_text("\ud83d\ude00") == "\U0001f600"  # a valid pair is its character
    value = {LONE: [LONE, {"k": LONE}], "n": 1, "t": (LONE,)}
    safe = wire_safe(value)
    assert safe == {"\ufffdx": ["\ufffdx", {"k": "\ufffdx"}], "n": 1, "t": ["\ufffdx"]}
    json.dumps(safe, ensure_ascii=False).encode("utf-8")  # encodable as strict UTF-8


# --- a real kernel ----------------------------------------------------------------------------

BUILD = """\
import torch, vramscope
names = {names!r}
model = torch.nn.Sequential()
for i, n in enumerate(names):
    model.add_module(n, torch.nn.Linear(64, 64))
    globals()["h_" + n] = torch.ones(512 * 1024)  # a 2 MiB holder under a hostile name
out = model(torch.randn(8, 64)).sum()
out.backward()
"""


@pytest.fixture(scope="module")
def s() -> Iterator[Session]:
    session = Session()
    try:
        yield session
    finally:
        session.close()


@pytest.fixture(scope="module")
def insight(s: Session) -> dict[str, Any]:
    s.cell(BUILD.format(names=NAMES), "build")
    data = s.next_of("insight", timeout=60)
    validate_kernel_message(data)
    return data["insight"]  # type: ignore[no-any-return]


def _expected(name: str) -> str:
    return safe_text(name)


@pytest.mark.kernel
def test_insight_carries_every_name_as_the_same_text(insight: dict[str, Any]) -> None:
    paths = [row["path"] for row in insight["layers"]]
    assert paths[1:] == [_expected(n) for n in NAMES]
    holders = {h["name"] for h in insight["holders"]}
    assert {"h_" + _expected(n) for n in NAMES} <= holders


@pytest.mark.kernel
def test_cell_sources_with_hostile_text_are_recorded(s: Session, insight: dict[str, Any]) -> None:
    for i, head in enumerate([HTML, SCRIPT, BIDI, LONG]):
        cell_id = f"src-{i}"
        data = s.cell(f"# {head}\nvalue_{i} = {head[:50]!r}", cell_id)
        validate_kernel_message(data)
        assert data["record"]["code_head"] == f"# {head}"[:120]
    # an exception class named by a lone surrogate (Jupyter cannot carry one in a cell's
    # source, but code can make one; ipykernel itself then fails to report it): recorded
    data = s.cell("raise type(chr(0xD800), (Exception,), {})()", "surrogate-error", ok=False)
    validate_kernel_message(data)
    assert data["record"]["ok"] is False


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


NOTEBOOK = f"dir/{HTML}{BIDI}.ipynb"


@pytest.mark.kernel
def test_every_export_format_keeps_names_inert(s: Session, insight: dict[str, Any]) -> None:
    results = {
        fmt: s.result("export_report", {"format": fmt, "notebook": NOTEBOOK})
        for fmt in ("json", "csv", "markdown", "html")
    }
    for fmt, result in results.items():
        name = result["filename"]  # a plain name: letters kept, nothing a path or bidi needs
        assert not set(name) & set('<>:"/\\|?*\u202e') and name[0] != ".", (fmt, name)
    # JSON: the names come back exactly (the lone surrogate as U+FFFD)
    report = json.loads(results["json"]["content"])
    paths = [row["path"] for row in report["layers"]]
    assert paths[1:] == [_expected(n) for n in NAMES]
    # CSV: newlines and commas in a user string stay inside their field
    rows = list(csv.reader(io.StringIO(results["csv"]["content"])))
    assert rows and len({len(r) for r in rows}) == 1, {len(r) for r in rows}
    # Markdown: no raw HTML, and every table row keeps its column count
    md = results["markdown"]["content"]
    assert "<img" not in md and "<script" not in md
    assert "&lt;img src=x onerror=alert(1)&gt;" in md
    # HTML: no element from a user string, only the page's own three scripts
    page = results["html"]["content"]
    parser = _Page()
    parser.feed(page)
    assert "img" not in parser.tags and parser.tags.count("script") == 3
    assert page.count("</script>") == 3
    assert HTML in "".join(parser.text)


@pytest.mark.kernel
def test_export_to_files_writes_valid_utf8(
    s: Session, insight: dict[str, Any], tmp_path: Path
) -> None:
    for suffix in ("json", "csv", "md", "html"):
        target = tmp_path / f"hostile.{suffix}"
        s.k.run_ok(f"vramscope.export({str(target)!r})")
        target.read_bytes().decode("utf-8")  # strict: raises on anything invalid
    json.loads((tmp_path / "hostile.json").read_text(encoding="utf-8"))
    errors = [
        m["content"]["data"]
        for m in s.k.iopub
        if m["msg_type"] == "comm_msg" and m["content"]["data"].get("type") == "error"
    ]
    assert errors == [], errors

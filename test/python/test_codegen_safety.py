"""No name that is not a valid identifier reaches generated code, comments included: a block
class named with a newline and a statement, submodules and namespace names with newlines,
quotes and unicode. Every generated cell compiles, runs without creating the file its
injected statement would write, and carries such names only as string literals (``repr``)
or not at all. The advisor runs in-process (advise_cells); the cells run with ``exec``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from advise_cells import Cells
from vramscope.optimize.codegen import safe_word
from vramscope.optimize.techniques.attention import _enable_cells, _template
from vramscope.optimize.techniques.checkpointing import block_cells
from vramscope.optimize.techniques.optimizer import adafactor_cells

EVIL = "Blk\nopen('PWNED','w').write('ran')\n#"
NAMES = [EVIL, "a'b\"c", "bloc\u2028é", "x\ry", "class", "ok_name"]


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    here = Path.cwd()
    os.chdir(tmp_path)
    try:
        yield tmp_path
    finally:
        os.chdir(here)


def _assert_safe(code: str, name: str) -> None:
    """Compiles; a name with line breaks or quotes appears only as its repr (or not at all);
    no injected statement starts a line."""
    compile(code, "<generated>", "exec")
    if any(c in name for c in "\n\r\u2028'\""):
        assert name not in code.replace(repr(name), "")
    assert not any(line.lstrip().startswith("open(") for line in code.splitlines())


@pytest.mark.parametrize("name", NAMES)
def test_safe_word_keeps_identifiers_and_quotes_anything_else(name: str) -> None:
    word = safe_word(name)
    if name.isidentifier() and name != "class":
        assert word == name
    else:
        assert word == repr(name) and "\n" not in word and "\r" not in word
        assert eval(word) == name  # a literal of the very name


@pytest.mark.parametrize("name", NAMES)
def test_block_and_attention_cells_quote_the_class_name(name: str, workdir: Path) -> None:
    code, undo = block_cells("checkpoint:blocks", ["model.layers"], 2, name)
    for cell in (code, undo):
        _assert_safe(cell, name)
    cls = type(name, (torch.nn.Module,), {})
    enable, undo = _enable_cells("attention:sdpa", name, "model.attn", "model", "")
    for cell in (enable, undo, _template("attention:sdpa", [(cls, "attn", None)])):
        _assert_safe(cell, name)


@pytest.mark.parametrize("name", NAMES)
def test_optimizer_cells_quote_the_class_name_and_run(name: str, workdir: Path) -> None:
    net = torch.nn.Linear(4, 4)
    cls = type(name, (torch.optim.Adam,), {})
    opt = cls(net.parameters(), lr=1e-3)
    net(torch.randn(2, 4)).sum().backward()
    opt.step()
    code, undo = adafactor_cells("optimizer:adafactor", "opt", opt, torch)
    ns: dict[str, Any] = {"opt": opt, "torch": torch}
    for cell in (code, undo):
        _assert_safe(cell, name)
        exec(cell, ns)
    assert ns["opt"] is opt
    assert not (workdir / "PWNED").exists()


SETUP = """
class Inner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ff = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(),
                                      torch.nn.Linear(64, 32))

    def forward(self, h):
        return h + self.ff(h)


Evil = type({evil!r}, (Inner,), {{}})


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.stack = torch.nn.Sequential()
        for i in range(3):
            self.stack.add_module({path!r} + str(i), Evil())
        self.out = torch.nn.Linear(32, 4)

    def forward(self, h):
        return self.out(self.stack(h))


globals()[{key!r}] = Net()
net = globals()[{key!r}]
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
x = torch.randn(256, 32)
"""
TRAIN = """for _ in range(2):
    opt.zero_grad()
    loss = net(x).pow(2).mean()
    loss.backward()
    opt.step()"""


@pytest.mark.parametrize(
    ("path", "key"),
    [
        ("blk\n#'\"", "net_main"),
        ("bloc_é", "modèle"),
        ("blk\n#'\"", "model\nopen('PWNED','w').write('ran')"),
        ("bloc", "modèle 'x'"),
    ],
)
def test_advice_for_a_model_with_hostile_names_compiles_and_runs_safely(
    path: str, key: str, workdir: Path
) -> None:
    cells = Cells()
    try:
        cells.run(SETUP.format(evil=EVIL, path=path, key=key))
        cells.run(TRAIN)
        cells.advisor.advise()
        cells.run(TRAIN)
        suggestions = cells.advisor.advise()["suggestions"]
        assert suggestions
        for s in suggestions:
            for cell in (s["code"], s["undo_code"]):
                if cell is None:
                    continue
                for name in (EVIL, path, key):
                    _assert_safe(cell, name)
                exec(compile(cell, s["id"], "exec"), dict(cells.ns))
        assert not (workdir / "PWNED").exists()
        if key.isidentifier():
            ck = next(s for s in suggestions if s["technique"] == "checkpointing")
            assert repr(EVIL) in ck["code"]  # the class named as a literal, in its comment
            assert {"autocast", "accumulation"} <= {s["technique"] for s in suggestions}
    finally:
        cells.close()

"""Generated cells for several sets of user names: every cell compiles, uses the user's own
expressions (attributes, subscripts, non-ASCII identifiers, a tuple loop target), and runs
in a namespace without vramscope. The advisor runs in-process here (an InsightEngine over a
plain namespace, like a kernel's); test_advise*.py cover the real kernel."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch

from advise_cells import Cells
from vramscope.optimize.codegen import CannotRewrite, rewrite_accumulation
from vramscope.optimize.names import parse, step_region

BLOCKS = """
class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        layers = [torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 32)]
        self.ff = torch.nn.Sequential(*layers)

    def forward(self, h):
        return h + self.ff(h)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block() for _ in range(3)])
        self.out = torch.nn.Linear(32, 4)

    def forward(self, h):
        for block in self.blocks:
            h = block(h)
        return self.out(h)
"""

# (setup, training cell, expected names)
CASES = [
    (
        "class Trainer: pass\ntrainer = Trainer()\ntrainer.model = Net()\n"
        "trainer.opt = torch.optim.SGD(trainer.model.parameters(), lr=0.1)\n"
        "data = [(torch.randn(512, 32), torch.randint(0, 4, (512,))) for _ in range(2)]",
        "for step, (inp, tgt) in enumerate(data):\n"
        "    trainer.opt.zero_grad()  # reset\n"
        "    loss = torch.nn.functional.cross_entropy(trainer.model(inp), tgt)\n"
        "    loss.backward()\n"
        "    trainer.opt.step()",
        {"model": "trainer.model", "optimizer": "trainer.opt", "data": "enumerate(data)"},
    ),
    (
        'models = {"main": Net()}\nopts = [torch.optim.Adam(models["main"].parameters())]\n'
        "x = torch.randn(512, 32)",
        "for _ in range(2):\n"
        "    opts[0].zero_grad()\n"
        '    out = models["main"](x)\n'
        "    loss = out.pow(2).mean()\n"
        "    loss.backward()\n"
        "    opts[0].step()",
        {"model": 'models["main"]', "optimizer": "opts[0]", "batch": "x"},
    ),
    (
        "modèle = Net()\noptimiseur = torch.optim.SGD(modèle.parameters(), lr=0.01)\n"
        "critère = torch.nn.MSELoss()\nlot = torch.randn(512, 32)\ncible = torch.randn(512, 4)",
        "optimiseur.zero_grad()\n"
        "perte = critère(modèle(lot), cible)  # une étape\n"
        "perte.backward()\n"
        "optimiseur.step()",
        {"model": "modèle", "optimizer": "optimiseur", "loss_fn": "critère", "batch": "lot"},
    ),
]


@pytest.mark.parametrize(("setup", "train", "expected"), CASES)
def test_cells_in_the_users_names_compile_and_run(
    setup: str, train: str, expected: dict[str, str]
) -> None:
    cells = Cells()
    try:
        cells.run(BLOCKS + setup)
        cells.run(train)
        advice = cells.advisor.advise()
        # a model without a namespace name (trainer.model, models["main"]) is measured as the
        # module that ran: advice has its layers from the first run, as for a name
        assert not any("was not measured" in note for note in advice["notes"]), advice["notes"]
        for key, name in expected.items():
            assert advice["names"][key] == name, advice["names"]
        techniques = {s["technique"] for s in advice["suggestions"]}
        assert {"checkpointing", "autocast"} <= techniques, advice["notes"]
        model = expected["model"]
        for s in advice["suggestions"]:
            code = s["code"]
            compile(code, s["id"], "exec")
            assert code.splitlines()[0] == f"# vramscope: {s['id']}"
            code_lines = [ln for ln in code.splitlines() if not ln.lstrip().startswith("#")]
            assert not [ln for ln in code_lines if "vramscope" in ln], code
            if s["kind"] == "rewrite":
                # the user's own lines and comments are all there
                kept = [ln.strip() for ln in train.splitlines() if "backward" not in ln]
                same = code.replace("_micro", "")  # accumulation renames the batch
                assert all(line in same for line in kept), (s["id"], code)
        ck = next(s for s in advice["suggestions"] if s["technique"] == "checkpointing")
        assert f"{model}.blocks" in ck["code"]
        # run without vramscope: enable, train, undo, train (a namespace with no vramscope)
        bare = dict(cells.ns)
        bare.pop("vramscope", None)
        loss_before = _loss(bare, model)
        exec(ck["code"], bare)
        exec(ck["code"], bare)  # re-running is harmless
        blocks = eval(f"{model}.blocks", bare)
        assert all("forward" in vars(b) for b in blocks)
        assert _loss(bare, model) == pytest.approx(loss_before, rel=1e-6)
        exec(train, bare)
        assert ck["undo_code"] is not None
        exec(ck["undo_code"], bare)
        assert all("forward" not in vars(b) for b in blocks)
        for s in advice["suggestions"]:
            if s["kind"] == "rewrite":
                exec(s["code"], dict(bare))
    finally:
        cells.close()


def _loss(ns: dict[str, Any], model: str) -> float:
    torch.manual_seed(0)
    h = torch.randn(4, 32)
    with torch.no_grad():
        return float(eval(model, ns)(h).pow(2).mean())


def test_fp16_rewrite_uses_grad_scaler_and_the_torch_amp_api() -> None:
    from vramscope.optimize.codegen import rewrite_autocast

    source = (
        "for x, y in loader:\n"
        "    opt.zero_grad()\n"
        "    loss = crit(net(x), y)  # forward\n"
        "    loss.backward()\n"
        "    opt.step()\n"
    )
    tree = parse(source)
    assert tree is not None
    region = step_region(tree)
    assert region is not None
    code = rewrite_autocast(source, region, "cuda", "torch.float16", scaler=True)
    compile(code, "fp16", "exec")
    assert 'scaler = torch.amp.GradScaler("cuda")\nfor x, y in loader:' in code
    assert "scaler.scale(loss).backward()" in code
    assert "scaler.step(opt)\n    scaler.update()" in code
    assert 'with torch.autocast(device_type="cuda", dtype=torch.float16):' in code
    assert "torch.cuda.amp" not in code
    assert "# forward" in code


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("opt.zero_grad(); loss = f(x)\nloss.backward()\nopt.step()", "shares its line"),
        ("for x in data:\n    x = x * 2\n    loss = f(x)\n    loss.backward()\n", "reassigned"),
        ("for b in data:\n    f(b).backward()\n", "on the .backward() line"),
    ],
)
def test_loops_it_cannot_rewrite_say_why(source: str, reason: str) -> None:
    tree = parse(source)
    assert tree is not None
    region = step_region(tree)
    assert region is not None
    with pytest.raises(CannotRewrite, match=re.escape(reason)):
        rewrite_accumulation(source, region, ["x"] if "x" in source else ["b"], 2)

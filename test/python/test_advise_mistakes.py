"""Mistake checks seen in real training code, shown with the suggestions: a reentrant
checkpoint (the checkpointed layers may silently get no gradients), the deprecated
torch.cuda.amp API, a loss kept across steps, zero_grad() never called, and evaluation run
with autograd on. Each is found in the cells that were run, with a fix that compiles; and
clean code gives none (in-process cells, see advise_cells)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch

from advise_cells import Cells

MODEL = """
model = torch.nn.Sequential(
    torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(),
    torch.nn.Linear(256, 1),
)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(2048, 64)
"""
CLEAN = """for _ in range(2):
    opt.zero_grad()
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()"""


@pytest.fixture
def cells() -> Iterator[Cells]:
    c = Cells()
    c.run(MODEL)
    yield c
    c.close()


def mistakes(cells: Cells) -> dict[str, dict[str, Any]]:
    found = {m["id"].split(":")[0]: m for m in cells.advisor.advise()["mistakes"]}
    for m in found.values():
        if m["fix_code"]:
            compile(m["fix_code"], m["id"], "exec")
    return found


def test_clean_training_code_has_none(cells: Cells) -> None:
    cells.run(CLEAN)
    cells.run("del loss")
    assert mistakes(cells) == {}


def test_zero_grad_never_called(cells: Cells) -> None:
    cells.run(CLEAN.replace("    opt.zero_grad()\n", ""))
    found = mistakes(cells)["zero_grad_missing"]
    assert found["execution_count"] == 2
    assert found["fix_code"] == "opt.zero_grad(set_to_none=True)  # first line of the loop body"


@pytest.mark.filterwarnings("ignore:None of the inputs have requires_grad")  # torch's hint
def test_reentrant_checkpoint(cells: Cells) -> None:
    cells.run(
        "from torch.utils.checkpoint import checkpoint\n"
        "for _ in range(2):\n"
        "    opt.zero_grad()\n"
        "    # x does not require grad: model[:2] silently gets no gradients\n"
        "    loss = model[2:](checkpoint(model[:2], x, use_reentrant=True)).pow(2).mean()\n"
        "    loss.backward()\n"
        "    opt.step()"
    )
    found = mistakes(cells)["reentrant_checkpoint"]
    assert "no gradients" in found["why"]
    assert found["fix_code"] == "checkpoint(model[:2], x, use_reentrant=False)"
    # the same call, non-reentrant: no mistake
    cells.run(
        "loss = model[2:](checkpoint(model[:2], x, use_reentrant=False)).pow(2).mean()\n"
        "loss.backward()\nopt.step()\nopt.zero_grad()\ndel loss"
    )
    assert "reentrant_checkpoint" in mistakes(cells)  # the earlier cell is still recorded
    assert mistakes(cells)["reentrant_checkpoint"]["execution_count"] == 2


@pytest.mark.filterwarnings("ignore:.*torch.cuda.amp.GradScaler.*is deprecated")
def test_deprecated_cuda_amp(cells: Cells) -> None:
    cells.run(
        "scaler = torch.cuda.amp.GradScaler(enabled=False)\n"
        "with torch.autocast('cpu', dtype=torch.bfloat16):\n"
        "    y = 1"
    )
    found = mistakes(cells)["cuda_amp"]
    assert "deprecated" in found["why"]
    # the user's arguments kept: a scaler they turned off stays off
    assert found["fix_code"] == 'torch.amp.GradScaler("cuda", enabled=False)'


@pytest.mark.filterwarnings("ignore:.*torch.cuda.amp.*is deprecated")
@pytest.mark.filterwarnings("ignore:CUDA is not available")
@pytest.mark.parametrize(
    ("imports", "call", "what"),
    [
        ("from torch.cuda.amp import autocast", "autocast()", "autocast"),
        ("from torch.cuda.amp import GradScaler as Scaler", "Scaler(enabled=False)", "GradScaler"),
        ("from torch.cuda import amp", "amp.autocast()", "autocast"),
        ("import torch.cuda.amp as tca", "tca.autocast(enabled=False)", "autocast"),
    ],
)
def test_deprecated_cuda_amp_under_imported_names(
    cells: Cells, imports: str, call: str, what: str
) -> None:
    # the import in one cell, the call in the training cell (as notebooks usually have it)
    cells.run(imports)
    cells.run(f"with torch.no_grad():\n    _ctx = {call}\n" + CLEAN)
    found = mistakes(cells)["cuda_amp"]
    assert found["title"].startswith(f"Deprecated torch.cuda.amp.{what} in cell [")
    assert found["fix_code"].startswith(
        'torch.autocast("cuda", ' if what == "autocast" else 'torch.amp.GradScaler("cuda", '
    )
    assert ("enabled=False" in found["fix_code"]) == ("enabled=False" in call)


@pytest.mark.filterwarnings("ignore:.*torch.cuda.amp.*is deprecated")
@pytest.mark.filterwarnings("ignore:CUDA is not available")
def test_a_cell_run_twice_is_one_mistake_and_its_autocast_is_turned_off(cells: Cells) -> None:
    cells.run("from torch.cuda.amp import autocast")
    train = "for _ in range(2):\n    with autocast(enabled=False):\n" + "\n".join(
        "    " + line for line in CLEAN.splitlines()[1:]
    )
    cells.run(train, cell_id="train")
    cells.run(train, cell_id="train")
    advice = cells.advisor.advise()
    amp = [m for m in advice["mistakes"] if m["id"].startswith("cuda_amp")]
    assert [(m["id"], m["cell_id"]) for m in amp] == [("cuda_amp:4", "train")]  # the newest run
    # autocast(enabled=False) is not mixed precision in use: the note says it is turned off
    assert any("autocast is turned off (enabled=False)" in n for n in advice["notes"])
    assert not any("already uses autocast" in n for n in advice["notes"])


def test_a_name_imported_from_torch_amp_is_not_the_deprecated_one(cells: Cells) -> None:
    # rebound later by the current API: the same call is no longer the deprecated one
    cells.run("from torch.cuda.amp import autocast")
    cells.run("from torch import autocast")
    cells.run("with autocast('cpu', dtype=torch.bfloat16):\n    y = 1\n" + CLEAN)
    assert "cuda_amp" not in mistakes(cells)


@pytest.mark.filterwarnings("ignore:.*torch.cuda.amp.autocast.*is deprecated")
@pytest.mark.filterwarnings("ignore:CUDA is not available")
@pytest.mark.parametrize(
    ("call", "fix"),
    [
        ("torch.cuda.amp.autocast()", 'torch.autocast("cuda", dtype=torch.float16)'),
        (
            "torch.cuda.amp.autocast(enabled=False)",
            'torch.autocast("cuda", dtype=torch.float16, enabled=False)',
        ),
        (  # positional: torch.autocast takes the device first, so they are named
            "torch.cuda.amp.autocast(use_amp, torch.bfloat16)",
            'torch.autocast("cuda", enabled=use_amp, dtype=torch.bfloat16)',
        ),
    ],
)
def test_deprecated_cuda_autocast_keeps_the_arguments(cells: Cells, call: str, fix: str) -> None:
    cells.run(f"use_amp = False\nwith {call}:\n    y = model(x[:2])")
    found = mistakes(cells)["cuda_amp"]
    assert found["fix_code"] == fix
    # the fix takes the user's arguments and sets the autocast state the call set (where
    # CUDA is missing, both turn it off with a warning: then only the arguments are checked)
    with eval(call, {"torch": torch, "use_amp": False}):
        before = (torch.is_autocast_enabled("cuda"), torch.get_autocast_dtype("cuda"))
    with eval(fix, {"torch": torch, "use_amp": False}):
        after = (torch.is_autocast_enabled("cuda"), torch.get_autocast_dtype("cuda"))
    assert after == before


def test_loss_kept_across_steps(cells: Cells) -> None:
    cells.run(CLEAN)
    cells.run(
        "losses = []\n"
        "for _ in range(3):\n"
        "    opt.zero_grad()\n"
        "    loss = model(x).pow(2).mean()\n"
        "    loss.backward(retain_graph=True)\n"
        "    opt.step()\n"
        "    losses.append(loss)  # keeps every step's graph\n"
        "del loss"
    )
    found = mistakes(cells)["kept_graph"]
    assert found["id"] == "kept_graph:losses"
    assert found["fix_code"] is not None
    assert "losses.append(loss.item())" in found["fix_code"]


def test_evaluation_with_autograd_on(cells: Cells) -> None:
    cells.run(CLEAN)
    cells.run("preds = model(x)  # evaluation")
    found = mistakes(cells)["eval_with_grad"]
    assert found["execution_count"] == 3
    fix = next(
        s for s in cells.advisor.advise()["suggestions"] if s["technique"] == "inference_mode"
    )
    assert "with torch.inference_mode():\n    preds = model(x)  # evaluation" in fix["code"]
    bare = dict(cells.ns)
    exec(fix["code"], bare)
    assert bare["preds"].grad_fn is None


def test_an_eval_cell_is_not_charged_with_graphs_kept_before_it(cells: Cells) -> None:
    """Insight's peaks start from what is still saved when a cell starts: a cell after one
    that kept three graphs (a leak, not an evaluation) must not be charged with them."""
    cells.run(CLEAN)
    cells.run("one = model(x).sum()  # an evaluation: one graph kept")
    cells.run("kept = [model(x).sum() for _ in range(3)]  # three graphs kept: a leak")
    cells.run("value = model(x).sum().item()  # one graph, freed at once")
    advice = cells.advisor.advise()
    found = {m["execution_count"] for m in advice["mistakes"] if m["id"].startswith("eval")}
    modes = {
        s["target_cell"]["execution_count"]: s
        for s in advice["suggestions"]
        if s["technique"] == "inference_mode"
    }
    assert 3 in found and 4 not in found and 4 not in modes, (found, modes)
    # its own graph only (on top of the four still kept): cell [3]'s one graph but for the
    # input x, which those graphs hold already
    one = modes[3]["predicted"]["saving_bytes"]
    x_bytes = cells.ns["x"].nbytes
    assert one > 2 * x_bytes
    assert modes[5]["predicted"]["saving_bytes"] == one - x_bytes


NET_M = """
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = torch.nn.LayerNorm(64)  # 'LayerNorm(' ends in the model's name + '('
        self.fc = torch.nn.Linear(64, 1)

    def forward(self, x):
        return self.fc(torch.relu(self.ln(x)))


m = Net()
opt = torch.optim.SGD(m.parameters(), lr=0.01)
x = torch.randn(2048, 64)
"""


class QuickCells(Cells):
    """Cells run faster than insight (shift-enter, Run All): a quick cell gets no insight of
    its own, and the next insight is shared with it, as the kernel's coalesced insight is."""

    def run_quick(self, code: str) -> None:
        last, self.engine.after_cell = self.engine.after_cell, lambda *_: None
        try:
            self.run(code)
        finally:
            self.engine.after_cell = last


def evals(cells: Cells) -> list[int | None]:
    advice = cells.advisor.advise()
    found = [m["execution_count"] for m in advice["mistakes"] if m["id"].startswith("eval")]
    modes = [s for s in advice["suggestions"] if s["technique"] == "inference_mode"]
    assert len(modes) == len(found)
    return found


@pytest.mark.parametrize("check", ["", "print(m(x[:4]).shape)  # a quick look\n"])
def test_a_cell_sharing_the_training_insight_is_not_an_evaluation(check: str) -> None:
    """The model's cell (a model named m, a LayerNorm in it; or a quick look at an output),
    then the training cell, before insight ran in between: their one insight holds the
    training's graph, which is not the first cell's evaluation."""
    c = QuickCells()
    try:
        c.run_quick(NET_M + check)
        c.run(CLEAN.replace("model(", "m("))
        assert c.advisor.log.recent[0].insight is c.advisor.log.recent[1].insight  # shared
        assert evals(c) == []
        c.run("preds = m(x)  # evaluation")  # its own insight: found
        assert evals(c) == [3]
    finally:
        c.close()


def test_calls_the_model() -> None:
    from vramscope.optimize.techniques.simple import calls

    assert calls("y = m(x)", "m") and calls("y = m (x)", "m")
    assert not calls("ln = nn.LayerNorm(4)", "m") and not calls("y = self.m(x)", "m")
    assert calls("out = trainer.model(x)", "trainer.model")
    assert not calls("out = trainer.model_b(x)", "trainer.model")
    assert calls("out = models['main'](x)", "models['main']")
    assert calls("sortie = modèle(x)", "modèle") and not calls("sous_modèle(x)", "modèle")


def test_a_cell_that_keeps_its_graphs_in_a_list_is_a_leak_not_an_evaluation(
    cells: Cells,
) -> None:
    """The demo's leak cell (losses.append(loss), no backward): named by the holders and the
    kept-graph mistake, never "Evaluation with autograd on" (issue 22 item 4)."""
    cells.run(CLEAN)
    cells.run("losses = []\nfor _ in range(3):\n    losses.append(model(x).sum())  # leak")
    advice = cells.advisor.advise()
    ids = [m["id"] for m in advice["mistakes"]]
    assert "kept_graph:losses" in ids and not [i for i in ids if i.startswith("eval")], ids
    assert not [s for s in advice["suggestions"] if s["technique"] == "inference_mode"]
    assert "free:losses" in [s["id"] for s in advice["suggestions"]]


def test_a_leak_cell_is_known_by_what_it_kept_not_by_the_holders_scan(cells: Cells) -> None:
    """Run All: the leak cell and `del losses` run before any insight (one covers both), so
    no holders scan ever saw `losses`; the tracker saw, at the leak cell's end, that it kept
    the graph of each of its forwards: still a leak, never an evaluation (issue 22)."""
    cells.run(CLEAN)
    leak = "losses = []\nfor _ in range(3):\n    losses.append(model(x).sum())  # leak"
    cells.run(leak, insight=False)
    assert cells.engine.tracker.kept_forwards() == 3
    cells.run("del losses")
    advice = cells.advisor.advise()
    assert not [s for s in advice["suggestions"] if s["technique"] == "inference_mode"]


def test_kept_forwards_counts_the_graphs_a_cell_left_alive(cells: Cells) -> None:
    """One per forward whose saved tensors outlive the cell: none after training, one for
    an evaluation loop that rebinds its result, one per forward for a list of graphs."""
    tracker = cells.engine.tracker
    cells.run(CLEAN)
    assert tracker.kept_forwards() == 0
    cells.run("for _ in range(3):\n    out = model(x)")
    assert tracker.kept_forwards() == 1
    cells.run("kept = [model(x * (i + 1)) for i in range(4)]")
    assert tracker.kept_forwards() == 4
    cells.run("del out, kept\nprint(1)")
    assert tracker.kept_forwards() == 0
    suggested = [s["id"] for s in cells.advisor.advise()["suggestions"]]
    assert "inference_mode:3" in suggested and "inference_mode:4" not in suggested, suggested

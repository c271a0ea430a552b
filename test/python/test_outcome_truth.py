"""Outcomes stay right in the flows users follow (issue 20 item 3, issue 22 item 2).

In process, no kernel: the cell log is fed what the runtime feeds it (the cell's source, its
record, its measured step, then the insight that followed it), and the outcome is compared
with the figures those runs carry."""

from __future__ import annotations

from typing import Any

from vramscope.optimize.names import CellSource
from vramscope.optimize.outcomes import CellLog
from vramscope.optimize.roles import training_text
from vramscope.optimize.stepwatch import StepFigures

MIB = 2**20
TRAIN = (
    "for x in data:\n    opt.zero_grad()\n    loss = model(x).sum()\n"
    "    loss.backward()\n    opt.step()\n"
)
REBUILDS = "opt = torch.optim.Adam(model.parameters(), lr=1e-3)\n" + TRAIN


def suggestion(sid: str, kind: str, saving: int, peak: int | None, code: str) -> dict[str, Any]:
    return {
        "id": sid,
        "technique": sid.split(":")[0],
        "title": sid,
        "kind": kind,
        "code": code,
        "predicted": {
            "activation_bytes_before": 30 * MIB,
            "activation_bytes_after": 30 * MIB - saving,
            "saving_bytes": saving,
            "step_peak_saving_bytes": peak,
            "saving_fraction": saving / (30 * MIB),
        },
    }


CHECKPOINT = suggestion("checkpoint:model.blocks", "rewrite", 24 * MIB, 20 * MIB, "")
AUTOCAST = suggestion("autocast:bf16", "rewrite", 10 * MIB, None, "")
ACCUMULATE = suggestion("accumulate:2", "rewrite", 12 * MIB, None, "")
ADAFACTOR = suggestion(
    "optimizer:adafactor",
    "enable",
    0,
    None,
    "# vramscope: optimizer:adafactor\nopt = torch.optim.Adafactor("
    "[p for p in model.parameters()], lr=opt.param_groups[0]['lr'])\n",
)
SDPA = suggestion(
    "attention:blocks", "template", 8 * MIB, None, "# vramscope: attention:blocks\nimport torch\n"
)


def step(peak: int) -> StepFigures:
    return StepFigures(peak=peak, grads=0, frontier=((0, peak),), forwards=1)


def insight(peak_saved: int, saved_now: int = 0) -> dict[str, Any]:
    return {
        "model": "model",
        "layers": [{"path": "blocks", "peak_saved_bytes": peak_saved, "saved_bytes": saved_now}],
    }


class Flow:
    def __init__(self, *offered: dict[str, Any]) -> None:
        self.log = CellLog()
        self.n = 0
        self.offered = offered

    def run(
        self,
        source: str,
        peak_saved: int = 0,
        saved_now: int = 0,
        peak: int | None = None,
        ok: bool = True,
        delta: int = 0,
    ) -> int:
        self.n += 1
        self.log.add(
            CellSource(self.n, f"c{self.n}", source),
            {"ok": ok, "duration": 1.0, "devices": {"cpu": {"delta_bytes": delta}}},
            step(peak) if peak is not None else None,
            {},
        )
        self.log.attach(insight(peak_saved, saved_now))
        if self.n == 1:
            self.log.activate(self.log.recent[-1], list(self.offered))
        return self.n

    def outcome(self, sid: str) -> dict[str, Any]:
        found = {o["suggestion_id"]: o for o in self.log.outcomes()}
        return dict(found[sid])


def marked(sid: str, body: str = TRAIN) -> str:
    return f"# vramscope: {sid}\n{body}"


def test_rerunning_a_rewritten_cell_keeps_its_outcome() -> None:
    f = Flow(ACCUMULATE)
    f.run(TRAIN, 30 * MIB, peak=60 * MIB)
    f.run(TRAIN, 30 * MIB, peak=60 * MIB)
    f.run(marked("accumulate:2"), 18 * MIB, peak=48 * MIB)
    first = f.outcome("accumulate:2")
    assert (first["before"]["execution_count"], first["after"]["execution_count"]) == (2, 3)
    assert first["miss_fraction"] == 0.0 and first["verdict"] == "met"
    f.run(marked("accumulate:2"), 18 * MIB, peak=48 * MIB)  # the same rewritten cell again
    f.run(TRAIN, 30 * MIB, peak=60 * MIB)  # and the old cell
    assert f.outcome("accumulate:2") == first


def test_a_stacked_rewrite_is_scored_against_its_own_prediction() -> None:
    f = Flow(AUTOCAST, ACCUMULATE)
    f.run(TRAIN, 30 * MIB)
    f.run(marked("autocast:bf16"), 20 * MIB)
    autocast = f.outcome("autocast:bf16")
    assert autocast["miss_fraction"] == 0.0
    # the accumulation rewrite of the autocast cell keeps the autocast marker
    f.run(marked("accumulate:2", marked("autocast:bf16")), 8 * MIB)
    assert f.outcome("autocast:bf16") == autocast
    accumulate = f.outcome("accumulate:2")
    assert accumulate["before"]["execution_count"] == 2
    assert accumulate["before"]["activation_bytes"] - accumulate["after"]["activation_bytes"] == (
        12 * MIB
    )
    assert accumulate["miss_fraction"] == 0.0


def test_a_template_run_as_generated_is_not_applied() -> None:
    f = Flow(SDPA)
    f.run(TRAIN, 30 * MIB)
    f.run(SDPA["code"])
    f.run(TRAIN, 30 * MIB)
    assert "attention:blocks" not in f.log.applied
    f.run(SDPA["code"] + "Block.forward = fast_forward\n")  # edited: applied
    assert "attention:blocks" in f.log.applied


def test_an_undo_cell_ends_the_outcome_and_applying_again_starts_anew() -> None:
    f = Flow(CHECKPOINT)
    f.run(TRAIN, 30 * MIB)
    f.run("# vramscope: checkpoint:model.blocks\nmodel.gradient_checkpointing_enable()\n")
    f.run(TRAIN, 6 * MIB)
    assert f.outcome("checkpoint:model.blocks")["after"]["execution_count"] == 3
    f.run("# vramscope: undo checkpoint:model.blocks\nmodel.gradient_checkpointing_disable()\n")
    assert "checkpoint:model.blocks" not in f.log.applied
    f.run(TRAIN, 30 * MIB)
    f.run("# vramscope: checkpoint:model.blocks\nmodel.gradient_checkpointing_enable()\n")
    f.run(TRAIN, 6 * MIB)
    again = f.outcome("checkpoint:model.blocks")
    assert (again["before"]["execution_count"], again["after"]["execution_count"]) == (5, 7)


def test_a_training_cell_that_recreates_the_optimizer_says_so() -> None:
    f = Flow(ADAFACTOR)
    f.run(REBUILDS, 30 * MIB)
    f.run(ADAFACTOR["code"])
    f.run(REBUILDS, 30 * MIB)
    o = f.outcome("optimizer:adafactor")
    assert o["verdict"] == "undone" and not o["missed"]
    assert "re-created `opt`" in o["note"] and "[3]" in o["note"]
    # a training cell that keeps the optimizer: measured as usual
    g = Flow(ADAFACTOR)
    g.run(TRAIN, 30 * MIB)
    g.run(ADAFACTOR["code"])
    g.run(TRAIN, 30 * MIB)
    assert g.outcome("optimizer:adafactor")["verdict"] == "met"
    assert g.outcome("optimizer:adafactor")["note"] is None


def test_a_graph_kept_by_another_cell_is_not_in_before_or_after() -> None:
    """The demo's cell [8] keeps a loss graph (26 MiB saved) alive: the training runs after
    it peak at 26 MiB more than they save themselves; the outcome leaves that out."""
    f = Flow(CHECKPOINT)
    f.run(TRAIN, 26 * MIB)
    f.run("kept = model(x).sum()", 26 * MIB, saved_now=26 * MIB)  # the leak cell
    f.run(TRAIN, 52 * MIB, saved_now=26 * MIB)
    f.run(marked("checkpoint:model.blocks"), 28 * MIB, saved_now=26 * MIB)
    o = f.outcome("checkpoint:model.blocks")
    assert (o["before"]["activation_bytes"], o["after"]["activation_bytes"]) == (26 * MIB, 2 * MIB)
    assert o["miss_fraction"] == 0.0 and o["verdict"] == "met"


def test_missed_is_judged_on_the_step_peak_too() -> None:
    f = Flow(CHECKPOINT)
    f.run(TRAIN, 30 * MIB, peak=60 * MIB)
    f.run(TRAIN, 30 * MIB, peak=60 * MIB)
    f.run(marked("checkpoint:model.blocks"), 6 * MIB, peak=50 * MIB)  # peak: -10, not -20
    o = f.outcome("checkpoint:model.blocks")
    assert o["miss_fraction"] == 0.0
    assert o["step_peak_miss_fraction"] == 0.5
    assert o["missed"] and o["verdict"] == "missed"


def test_the_cell_that_ran_the_step_is_the_training_cell() -> None:
    helper = (
        "class Accumulate:\n"
        "    def backward(self, loss):\n"
        "        loss.backward()\n"
        "        self.opt.step()\n"
    )
    loop = "for x in data:\n    acc.backward(model(x).sum())\n"
    assert not training_text(helper)  # only defines the step
    f = Flow(CHECKPOINT)
    f.run(TRAIN, 30 * MIB)
    f.run(helper)
    assert f.log.last_training is not None and f.log.last_training.cell.execution_count == 1
    f.run("for x in data:\n    acc.fit(x)\n", 30 * MIB, peak=60 * MIB)  # its step measured
    assert f.log.last_training.cell.execution_count == 3
    assert training_text(loop)  # calls backward itself
    assert training_text("@torch.no_grad()\ndef f(): pass\nloss.backward()\n")
    assert not training_text("def train():\n    loss.backward()\n    opt.step()\n")


FREE_TB = suggestion("free:traceback", "free", 256 * MIB, None, "")


def test_a_free_card_is_checked_against_what_its_cell_freed() -> None:
    """A "free" suggestion (a kept traceback here) is measured by its own cell: the bytes the
    cell gave back against the bytes predicted; the training runs around it do not count."""
    f = Flow(FREE_TB)
    f.run(TRAIN, 30 * MIB)
    f.run("# vramscope: free:traceback\nimport sys\nsys.last_traceback = None\n", delta=-(2**28))
    o = f.outcome("free:traceback")
    assert (o["freed_bytes"], o["miss_fraction"], o["verdict"]) == (2**28, 0.0, "met")
    f.run(TRAIN, 30 * MIB)
    assert f.outcome("free:traceback") == o
    g = Flow(FREE_TB)
    g.run(TRAIN, 30 * MIB)
    g.run("# vramscope: free:traceback\n", delta=-17 * 1024)  # freed nothing (the old cell)
    o = g.outcome("free:traceback")
    assert o["freed_bytes"] == 17 * 1024 and o["missed"] and o["verdict"] == "missed"

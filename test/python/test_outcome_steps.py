"""Predicted vs measured compares like with like (in process, no kernel, no torch).

The usual flow: the training cell ran before advice was asked for (no step measured: the
stepwatch is installed only then, and that run's cell peak includes creating the optimizer's
state), a suggestion's cell ran, then the training cell again (its step measured). The step
peak of such an outcome is null, not the first cell's peak rise against a measured step; once
both runs had a measured step, it is their difference. The reports compare the saved
activations with the activation prediction, and the step peak with the step-peak one."""

from __future__ import annotations

from typing import Any

from vramscope.exports.summary import advice_items
from vramscope.optimize.names import CellSource
from vramscope.optimize.outcomes import CellLog
from vramscope.optimize.stepwatch import StepFigures

MIB = 2**20
TRAIN = "for x in data:\n    loss = model(x).sum()\n    loss.backward()\n    opt.step()\n"
SUGGESTION = {
    "id": "checkpoint:model.blocks",
    "technique": "checkpointing",
    "title": "Checkpoint model.blocks",
    "predicted": {
        "activation_bytes_before": 30 * MIB,
        "activation_bytes_after": 6 * MIB,
        "saving_bytes": 24 * MIB,
        "step_peak_saving_bytes": 20 * MIB,
        "saving_fraction": 0.8,
    },
}


def step(peak: int) -> StepFigures:
    return StepFigures(peak=peak, grads=0, frontier=((0, peak),), forwards=1)


def insight(saved: int) -> dict[str, Any]:
    return {"layers": [{"peak_saved_bytes": saved}]}


def record(peak_rise: int) -> dict[str, Any]:
    return {"ok": True, "duration": 2.0, "devices": {"cpu": {"peak_delta_bytes": peak_rise}}}


def run(log: CellLog, n: int, source: str, saved: int, rise: int, s: StepFigures | None) -> None:
    log.add(CellSource(n, f"c{n}", source), record(rise), s)
    log.attach(insight(saved))


def test_a_run_without_a_measured_step_gives_no_step_peak() -> None:
    log = CellLog()
    # the first run: 200 MiB rise (Adam state created), no step measured (advice not asked)
    run(log, 1, TRAIN, 30 * MIB, 200 * MIB, None)
    log.activate(log.recent[-1], [SUGGESTION])
    run(log, 2, "# vramscope: checkpoint:model.blocks\n", 0, 0, None)
    run(log, 3, TRAIN, 6 * MIB, 40 * MIB, step(38 * MIB))
    (outcome,) = log.outcomes()
    assert outcome["before"] is not None and outcome["after"] is not None
    assert outcome["before"]["step_peak_bytes"] is None
    assert outcome["after"]["step_peak_bytes"] is None
    assert outcome["before"]["activation_bytes"] - outcome["after"]["activation_bytes"] == (
        24 * MIB
    )
    assert outcome["miss_fraction"] == 0.0 and not outcome["missed"]
    (item,) = advice_items({"advice": {"outcomes": [outcome]}})
    assert item == (
        "Checkpoint model.blocks",
        "applied: saved activations predicted 24.0 MiB, measured 24.0 MiB; "
        "step peak predicted 20.0 MiB, measured n/a",
    )


def test_both_runs_measured_compare_their_steps() -> None:
    log = CellLog()
    run(log, 1, TRAIN, 30 * MIB, 200 * MIB, None)
    log.activate(log.recent[-1], [SUGGESTION])
    run(log, 2, TRAIN, 30 * MIB, 60 * MIB, step(58 * MIB))  # once more, advice open
    run(log, 3, "# vramscope: checkpoint:model.blocks\n", 0, 0, None)
    run(log, 4, TRAIN, 7 * MIB, 40 * MIB, step(37 * MIB))
    (outcome,) = log.outcomes()
    assert outcome["before"] is not None and outcome["after"] is not None
    assert outcome["before"]["execution_count"] == 2
    assert (outcome["before"]["step_peak_bytes"], outcome["after"]["step_peak_bytes"]) == (
        58 * MIB,
        37 * MIB,
    )
    assert outcome["miss_fraction"] == round(1 / 24, 4)
    (item,) = advice_items({"advice": {"outcomes": [outcome]}})
    assert item[1] == (
        "applied: saved activations predicted 24.0 MiB, measured 23.0 MiB; "
        "step peak predicted 20.0 MiB, measured 21.0 MiB"
    )

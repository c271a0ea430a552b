"""Advice for a ``transformers.Trainer`` in its own terms (issue 20, item 2), in process.

A tiny GPT-2 from a config (no download) trains through ``trainer.train()`` (CPU, one step).
After advice, the cards are ``TrainingArguments`` changes whose cells run on the user's
``trainer``; applied, the next ``trainer.train()`` runs with them and the outcome compares
its measured step with the one before, as for a manual loop."""

from __future__ import annotations

import ast
from typing import Any

import pytest
import torch

from advise_cells import Cells
from requires import requires

pytestmark = requires("transformers", "accelerate")

SETUP = """
import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments
torch.manual_seed(0)
lm = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=128, n_positions=64))
data = [
    {"input_ids": torch.randint(0, 128, (64,)), "labels": torch.randint(0, 128, (64,))}
    for _ in range(32)
]
"""
ARGS = """
args = TrainingArguments(
    output_dir=OUT, per_device_train_batch_size=8, max_steps=1, report_to=[],
    save_strategy="no", use_cpu=True, logging_strategy="no", disable_tqdm=True,
)
trainer = Trainer(model=lm, args=args, train_dataset=data)
"""
TRAIN = "trainer.train()"


def saved_bytes(model: Any, batch: dict[str, torch.Tensor]) -> int:
    """Ground truth: the bytes one forward leaves for backward (distinct storages that are
    not the model's own tensors), counted by saved-tensor hooks of the test's own."""
    own = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in own:
            seen[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(**batch)
    del out
    return sum(seen.values())


@pytest.fixture
def cells(tmp_path: Any) -> Any:
    c = Cells()
    c.ns["OUT"] = str(tmp_path)
    c.run(SETUP)
    c.run(ARGS, "args-cell")
    c.run(TRAIN, "train-cell")
    c.advisor.advise()  # advice asked for: the next run's step is measured
    c.run(TRAIN, "train-cell")
    yield c
    c.close()


def card(advice: Any, sid: str) -> Any:
    return next(s for s in advice["suggestions"] if s["id"] == sid)


def test_advice_after_train_is_in_training_arguments_terms(cells: Cells) -> None:
    advice = cells.advisor.advise()
    ids = [s["id"] for s in advice["suggestions"]]
    assert {"trainer:gradient_checkpointing", "trainer:accumulate:2", "trainer:bf16"} <= set(ids)
    # no loop to rewrite: no autocast/accumulation rewrite or template, no model switch
    assert not [s for s in advice["suggestions"] if s["kind"] in ("rewrite", "template")]
    assert "checkpoint:hf" not in ids
    assert advice["training_cell"]["cell_id"] == "train-cell"
    for s in advice["suggestions"]:
        if s["id"].startswith("trainer:"):
            assert s["target_cell"]["cell_id"] == "args-cell"  # below the cell that built it
            assert "TrainingArguments(...) in cell [2]" in s["why"][-1]
            ast.parse(s["code"])
            ast.parse(s["undo_code"])
    # the predictions are the manual techniques' own: half the activations for 2 micro-batches
    acc = card(advice, "trainer:accumulate:2")["predicted"]
    assert acc["activation_bytes_after"] == acc["activation_bytes_before"] // 2
    # ... which are what one forward of the batch saves, by the test's own count
    batch = {k: torch.stack([d[k] for d in cells.ns["data"][:8]]) for k in ("input_ids", "labels")}
    truth = saved_bytes(cells.ns["lm"], batch)
    assert acc["activation_bytes_before"] == pytest.approx(truth, rel=0.02)


def test_gradient_checkpointing_cell_takes_effect_and_meets_its_prediction(cells: Cells) -> None:
    s = card(cells.advisor.advise(), "trainer:gradient_checkpointing")
    cells.run(s["code"])
    cells.run(s["code"])  # re-running it is harmless
    assert cells.ns["trainer"].args.gradient_checkpointing is True
    assert cells.ns["trainer"].args is not cells.ns["args"]
    cells.run(TRAIN, "train-cell")
    assert cells.ns["lm"].is_gradient_checkpointing  # train() turned it on
    (outcome,) = cells.advisor.advise()["outcomes"]
    assert outcome["suggestion_id"] == s["id"] and outcome["verdict"] == "met"
    before, after = outcome["before"], outcome["after"]
    assert before["execution_count"] == 4 and after["execution_count"] == 7
    saved = before["activation_bytes"] - after["activation_bytes"]
    assert saved == pytest.approx(s["predicted"]["saving_bytes"], rel=0.05)
    got_peak = before["step_peak_bytes"] - after["step_peak_bytes"]
    assert got_peak == pytest.approx(s["predicted"]["step_peak_saving_bytes"], rel=0.2)
    # undo: the very TrainingArguments object back, the model's checkpointing off
    cells.run(s["undo_code"])
    assert cells.ns["trainer"].args is cells.ns["args"]
    assert not cells.ns["lm"].is_gradient_checkpointing
    cells.run(TRAIN, "train-cell")
    assert cells.last is not None
    rows = sum(int(r["peak_saved_bytes"]) for r in cells.last["layers"])
    assert rows == pytest.approx(before["activation_bytes"], rel=0.02)


def test_accumulation_cell_halves_the_micro_batch_and_meets_its_prediction(cells: Cells) -> None:
    s = card(cells.advisor.advise(), "trainer:accumulate:2")
    cells.run(s["code"])
    args = cells.ns["trainer"].args
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps) == (4, 2)
    cells.run(TRAIN, "train-cell")
    (outcome,) = cells.advisor.advise()["outcomes"]
    assert outcome["verdict"] == "met", outcome
    assert outcome["miss_fraction"] is not None and outcome["miss_fraction"] < 0.05
    assert outcome["step_peak_miss_fraction"] is not None
    assert outcome["step_peak_miss_fraction"] < 0.2
    cells.run(s["undo_code"])
    assert cells.ns["trainer"].args is cells.ns["args"]


def test_bf16_cell_takes_effect_and_undo_restores_the_forward(cells: Cells) -> None:
    s = card(cells.advisor.advise(), "trainer:bf16")
    cells.run(s["code"])
    cells.run(TRAIN, "train-cell")
    (outcome,) = cells.advisor.advise()["outcomes"]
    before, after = outcome["before"]["activation_bytes"], outcome["after"]["activation_bytes"]
    assert after < 0.8 * before  # autocast ran: 16-bit activations
    assert outcome["verdict"] in ("met", "missed") and outcome["miss_fraction"] < 0.3
    cells.run(s["undo_code"])
    lm = cells.ns["lm"]
    assert "forward" not in vars(lm) and "_original_forward" not in vars(lm)
    assert cells.ns["trainer"].args is cells.ns["args"]
    cells.run(TRAIN, "train-cell")
    assert cells.last is not None
    rows = sum(int(r["peak_saved_bytes"]) for r in cells.last["layers"])
    assert rows == pytest.approx(before, rel=0.02)  # full precision again

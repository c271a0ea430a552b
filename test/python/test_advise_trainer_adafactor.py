"""The Hugging Face ``Trainer``'s ``optim="adafactor"`` card end to end (issue 20), in a real
kernel with vramscope loaded.

A GPT-2 whose AdamW state outweighs what a step of small batches saves (2 layers of width
256, batches of 2 x 16 tokens) trains through ``trainer.train()``. The card is offered; its
cell, run as generated, makes the next ``train()`` build an Adafactor; the outcome compares
that run with the one before; the state the optimizer in use holds falls by the predicted
bytes (the test's own count of its state tensors); the undo cell puts back the very AdamW
with its state (hash of its ``state_dict``), which the next ``train()`` steps again."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from advise_helpers import advise, start_kernel, value
from kernel_harness import KernelHarness
from requires import requires

pytestmark = requires("transformers", "accelerate")

SETUP = """
import hashlib
import tempfile
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments
config = GPT2Config(n_layer=2, n_embd=256, n_head=4, vocab_size=1024, n_positions=64)
lm = GPT2LMHeadModel(config)
data = [
    {"input_ids": torch.randint(0, 1024, (16,)), "labels": torch.randint(0, 1024, (16,))}
    for _ in range(16)
]
OUT = tempfile.mkdtemp()
"""
ARGS = """
args = TrainingArguments(
    output_dir=OUT, per_device_train_batch_size=2, max_steps=1, report_to=[],
    save_strategy="no", use_cpu=True, logging_strategy="no", disable_tqdm=True,
    weight_decay=0.01,
)
trainer = Trainer(model=lm, args=args, train_dataset=data)
"""
TRAIN = "trainer.train()"
# the test's own figures: the optimizer the Trainer holds (inside accelerate's wrapper), the
# bytes of its state tensors, and a hash of its state_dict
PROBES = """
def _gt_inner():
    held = trainer.optimizer
    return getattr(held, "optimizer", held)


def _gt_state_bytes():
    return sum(
        t.untyped_storage().nbytes()
        for state in _gt_inner().state.values()
        for t in state.values()
        if torch.is_tensor(t) and t.dim() > 0
    )


def _gt_hash():
    h = hashlib.sha256()
    sd = _gt_inner().state_dict()
    for key in sorted(sd["state"]):
        for name, t in sorted(sd["state"][key].items()):
            h.update(f"{key}{name}".encode())
            h.update(t.detach().cpu().numpy().tobytes() if torch.is_tensor(t) else repr(t).encode())
    h.update(repr(sd["param_groups"]).encode())
    return h.hexdigest()
"""


@pytest.fixture(scope="module")
def k() -> Iterator[KernelHarness]:
    kernel = start_kernel()
    kernel.run_ok(SETUP, "setup-cell")
    kernel.run_ok(ARGS, "args-cell")
    kernel.run_ok(TRAIN, "train-cell")
    advise(kernel)  # advice asked for: the next run's step is measured
    kernel.run_ok(TRAIN, "train-cell")
    assert kernel.execute(PROBES, silent=True)["content"]["status"] == "ok"
    try:
        yield kernel
    finally:
        kernel.close()


def test_adafactor_card_runs_frees_the_predicted_state_and_undo_restores(
    k: KernelHarness,
) -> None:
    advice = advise(k)
    by_id = {s["id"]: s for s in advice["suggestions"]}
    assert "trainer:adafactor" in by_id, (list(by_id), advice["notes"])
    s = by_id["trainer:adafactor"]
    assert s["kind"] == "enable" and s["target_cell"]["cell_id"] == "args-cell"
    assert 'optim="adafactor"' in s["code"]
    adamw = value(k, "[type(_gt_inner()).__name__, id(_gt_inner()), _gt_state_bytes()]")
    assert adamw[0] == "AdamW"
    old_hash = value(k, "_gt_hash()")
    k.run_ok(s["code"])
    k.run_ok(s["code"])  # re-running it is harmless
    assert value(k, "[trainer.args.optim, trainer.args.weight_decay]") == ["adafactor", 0.01]
    k.run_ok(TRAIN, "train-cell")
    now = value(k, "[type(_gt_inner()).__name__, _gt_state_bytes()]")
    assert now[0] == "Adafactor"
    # the state in use fell by what the card predicted (the test's own count of tensors)
    freed = adamw[2] - now[1]
    assert freed == pytest.approx(s["predicted"]["saving_bytes"], rel=0.05)
    (outcome,) = advise(k)["outcomes"]
    assert outcome["suggestion_id"] == s["id"] and outcome["verdict"] == "met", outcome
    before, after = outcome["before"], outcome["after"]
    assert after["execution_count"] > before["execution_count"]
    assert after["step_peak_bytes"] is not None  # the step inside train() measured again
    # undo: the very AdamW back, its state unchanged; the next train() steps it
    k.run_ok(s["undo_code"])
    assert value(k, "[id(_gt_inner()), trainer.args is args]") == [adamw[1], True]
    assert value(k, "_gt_hash()") == old_hash
    k.run_ok(TRAIN, "train-cell")
    assert value(k, "[id(_gt_inner()), _gt_state_bytes()]") == [adamw[1], adamw[2]]
    assert value(k, "_gt_hash()") != old_hash  # stepped once more

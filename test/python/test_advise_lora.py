"""LoRA-style freezing with peft where the optimizer's state dominates, in a real kernel: a
Hugging Face GPT-2 built from a small config (random weights, no download) trained with
AdamW. The suggested cell is run as the user would, then the training cell; the ground truth
is the test's own count of the optimizer's state and the parameters' gradients after a step,
before and after. Skipped where peft is not installed (an optional test extra)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from advise_helpers import advise, by_technique, compiles, kernel_with, value
from kernel_harness import KernelHarness
from requires import requires

pytestmark = requires("peft")

GPT2 = """
from transformers import GPT2Config, GPT2LMHeadModel

config = GPT2Config(
    n_layer=2, n_embd=128, n_head=4, vocab_size=256, n_positions=32,
    resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
)
lm = GPT2LMHeadModel(config)
adam = torch.optim.AdamW(lm.parameters(), lr=1e-3)
tokens = torch.randint(0, 256, (2, 32))
"""
TRAIN = """for step in range(2):
    adam.zero_grad()
    loss = lm(tokens, labels=tokens).loss
    loss.backward()
    adam.step()"""
# the test's own count: every tensor in the optimizer's state, every parameter's gradient
PROBES = """
def _gt_held():
    state = sum(
        t.numel() * t.element_size()
        for s in adam.state.values() for t in s.values() if torch.is_tensor(t)
    )
    grads = sum(
        p.grad.numel() * p.grad.element_size() for p in lm.parameters() if p.grad is not None
    )
    return state, grads
"""


@pytest.fixture(scope="module")
def k() -> Iterator[KernelHarness]:
    yield from kernel_with(GPT2, TRAIN, PROBES)


def test_lora_frees_the_state_and_gradients_it_predicts(k: KernelHarness) -> None:
    lora = by_technique(advise(k), "lora")
    assert lora["kind"] == "enable" and lora["id"] == "lora:peft"
    code = lora["code"]
    assert "from peft import LoraConfig, get_peft_model" in code
    assert "except ImportError" in code  # the import check
    assert "lm = get_peft_model(" in code and "adam = torch.optim.AdamW(" in code
    compiles(code)
    compiles(str(lora["undo_code"]))
    state, grads = value(k, "_gt_held()")
    tensors = value(k, "len(list(lm.parameters()))")
    assert state == 2 * grads + 4 * tensors  # AdamW: two moments and a float32 step each
    loss = value(k, "lm(tokens, labels=tokens).loss.item()")

    k.run_ok(code, "apply-lora")
    k.run_ok(code, "apply-lora-again")  # re-running is harmless
    assert value(k, "type(lm).__name__") == "PeftModel"
    # the adapters start as a no-op (lora_B is zero): the model computes what it did
    assert value(k, "lm(tokens, labels=tokens).loss.item()") == pytest.approx(loss, rel=1e-5)
    k.run_ok(TRAIN, "train-lora")  # the user's own training cell, unchanged
    after_state, after_grads = value(k, "_gt_held()")
    measured = (state + grads) - (after_state + after_grads)
    # exact: from the layers' shapes and AdamW's measured state per parameter
    assert measured == pytest.approx(lora["predicted"]["saving_bytes"], rel=0.01)
    trainable = value(k, "sum(p.numel() for p in lm.parameters() if p.requires_grad)")
    assert after_grads == trainable * 4  # only the adapters have gradients

    k.run_ok(str(lora["undo_code"]), "undo-lora")
    assert value(k, "type(lm).__name__") == "GPT2LMHeadModel"
    assert value(k, "all(p.requires_grad for p in lm.parameters())") is True
    k.run_ok(TRAIN, "train-full")
    assert value(k, "_gt_held()")[0] == state  # the full state is back

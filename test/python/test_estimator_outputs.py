"""The Estimator reads measured activations of models whose output is not a tensor (a Hugging
Face ``ModelOutput`` with a scalar loss first, a dict, a tuple led by a scalar): batch and
sequence come from the first tensor with a dimension in the output, and a model measured in
fp32 without autocast defaults to ``32-true``.

Ground truth: the test's own saved-tensor counter (every storage autograd saves in one
forward, parameters and leaves left out, each once), run on a forward of its own.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import vramscope
from requires import requires
from vramscope.estimator import ActivationMemo, Measurement
from vramscope.estimator.entry import estimate_for
from vramscope.insight import InsightEngine

pytestmark = requires("transformers")

VOCAB = 1000


def gpt2() -> Any:
    import transformers

    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=2,
        n_embd=64,
        n_head=4,
        vocab_size=VOCAB,
        n_positions=64,
        bos_token_id=0,
        eos_token_id=0,
    )
    return transformers.GPT2LMHeadModel(config)


def ids(batch: int, seq: int = 32) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, seq), generator=torch.Generator().manual_seed(batch))


def saved_by_one_forward(model: torch.nn.Module, run: Any) -> int:
    """The test's own count of what autograd saves during ``run()`` (then freed)."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        key = t.untyped_storage().data_ptr()
        if key not in params and not (t.is_leaf and t.requires_grad):
            seen[key] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = run()
    del out
    return sum(seen.values())


def measured(ns: dict[str, Any], name: str, run: Any) -> Measurement:
    """One cell's forward + backward of ``ns[name]`` measured by model insight."""
    engine = InsightEngine(namespace=ns, min_holder_bytes=1)
    engine.install()
    try:
        out = run()
        loss = out["loss"] if isinstance(out, dict) else out[0]
        loss.backward()
        memo = ActivationMemo()
        found = memo.observe(engine.after_cell(1000))
        assert found is not None and found.model == name
        return found
    finally:
        engine.uninstall()


def test_a_gpt2_model_output_is_read_and_fp32_stays_32_true() -> None:
    lm = gpt2()
    ns: dict[str, Any] = {"lm": lm}
    found = measured(ns, "lm", lambda: lm(input_ids=ids(4), labels=ids(4)))
    # the output's first tensor with a dimension: the logits [4, 32, vocab] (loss is first)
    assert (found.batch_size, found.seq_len) == (4, 32)
    truth = saved_by_one_forward(lm, lambda: lm(input_ids=ids(4), labels=ids(4)))
    assert abs(found.saved_bytes - truth) <= 0.01 * truth
    memo = ActivationMemo()
    memo._by_model["lm"] = found
    est = estimate_for(lm, ns, memo, defaults_from_setup=True, batch_size=8)
    assert est.activation_source == "measured"
    assert est.precision == "32-true" and est.activation_scale == 1.0
    assert est.measured is not None and est.measured.precision == "32-true"
    # twice the batch, against the test's own count at batch 8
    truth8 = saved_by_one_forward(lm, lambda: lm(input_ids=ids(8), labels=ids(8)))
    assert abs(est.activations - truth8) <= 0.02 * truth8
    # vramscope.estimate defaults the same way (before: bf16-mixed whatever was measured)
    assert vramscope.estimate(lm).precision == "32-true"
    assert vramscope.estimate(1000).precision == "bf16-mixed"  # a bare count: the default


class DictOut(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(16, 64)

    def forward(self, x: torch.Tensor) -> Any:
        h = torch.relu(self.fc(x))
        return {"loss": h.square().mean(), "hidden": h}


class TupleOut(DictOut):
    def forward(self, x: torch.Tensor) -> Any:
        out = super().forward(x)
        return out["loss"], out["hidden"]


@pytest.mark.parametrize("cls", [DictOut, TupleOut], ids=["dict", "tuple-scalar-first"])
def test_dict_and_tuple_outputs_give_the_batch(cls: type) -> None:
    torch.manual_seed(0)
    model = cls()
    x = torch.randn(6, 10, 16)
    found = measured({"model": model}, "model", lambda: model(x))
    assert (found.batch_size, found.seq_len) == (6, 10)
    assert found.saved_bytes == saved_by_one_forward(model, lambda: model(x))

"""Advice says why a technique is not offered: a training cell whose batch size cannot be
found gets a note instead of a silently missing gradient-accumulation suggestion; a batch
given as a dict or as keywords (model(**batch), model(x=x), as Hugging Face batches are) is
split key by key. In-process cells, see advise_cells."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from advise_cells import Cells

MODEL = """
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(64, 256)
        self.out = torch.nn.Linear(256, 1)

    def forward(self, x):
        return self.out(torch.relu(self.fc(x)))


net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.01)
x = torch.randn(1024, 64)
inputs = {"x": x}
"""
TRAIN = """for _ in range(2):
    opt.zero_grad()
    loss = net({call}).pow(2).mean()
    loss.backward()
    opt.step()"""


def advice_for(call: str, model: str = MODEL) -> dict[str, Any]:
    c = Cells()
    try:
        c.run(model)
        c.run(TRAIN.format(call=call))
        return dict(c.advisor.advise())
    finally:
        c.close()


def test_unknown_batch_size_is_said() -> None:
    advice = advice_for("make()", MODEL + "\ndef make():\n    return x\n")
    techniques = [s["technique"] for s in advice["suggestions"]]
    assert "accumulation" not in techniques
    notes = [n for n in advice["notes"] if n.startswith("gradient accumulation")]
    assert notes == [
        "gradient accumulation: not offered, the batch size of training cell [2] was not "
        "found: the model's input is not a variable holding a tensor, a dict of tensors "
        "(model(**batch)) or a sequence of tensors, nor a DataLoader named in the cell"
    ]


@pytest.mark.parametrize("call", ["**inputs", "x=x"], ids=["dict", "keyword"])
def test_accumulation_for_a_dict_or_keyword_batch(call: str) -> None:
    """Hugging Face style calls (model(**batch), model(input_ids=ids)): split into micro-
    batches, key by key; the rewritten cell's step is the original's (same parameters)."""
    c = Cells()
    try:
        c.run(MODEL)
        start = {k: v.clone() for k, v in c.ns["net"].state_dict().items()}
        c.run(TRAIN.format(call=call))
        want = {k: v.clone() for k, v in c.ns["net"].state_dict().items()}
        advice = c.advisor.advise()
        (acc,) = [s for s in advice["suggestions"] if s["technique"] == "accumulation"]
        assert advice["finder_code"] is not None  # the batch-size finder draws from it too
        assert acc["kind"] == "rewrite" and acc["id"] == "accumulate:2"
        if call == "**inputs":
            assert "for key, value in inputs.items()" in acc["code"]
            assert "net(**inputs_micro)" in acc["code"]
            assert (
                "inputs_bs = {\n        key: value[torch.arange(batch_size)"
                in advice["finder_code"]
            )
            assert max(map(len, advice["finder_code"].splitlines())) <= 88
        else:
            assert "net(x=x_micro)" in acc["code"]
        c.ns["net"].load_state_dict(start)
        c.ns["opt"] = torch.optim.SGD(c.ns["net"].parameters(), lr=0.01)
        c.run(acc["code"])
        got = c.ns["net"].state_dict()
        for key, value in want.items():
            torch.testing.assert_close(got[key], value, rtol=1e-5, atol=1e-6)
    finally:
        c.close()


def test_known_batch_size_has_no_such_note() -> None:
    advice = advice_for("x")
    techniques = [s["technique"] for s in advice["suggestions"]]
    notes = [n for n in advice["notes"] if "batch size" in n]
    assert "accumulation" in techniques and notes == []


def test_accumulation_says_batchnorm_sees_micro_batches() -> None:
    # BatchNorm normalizes each micro-batch on its own: the suggestion says training changes
    bn = MODEL.replace(
        "self.out = torch.nn.Linear(256, 1)",
        "self.out = torch.nn.Linear(256, 1)\n        self.bn = torch.nn.BatchNorm1d(256)",
    ).replace("torch.relu(self.fc(x))", "torch.relu(self.bn(self.fc(x)))")
    (acc,) = [s for s in advice_for("x", bn)["suggestions"] if s["technique"] == "accumulation"]
    k = int(acc["id"].split(":")[1])
    assert (
        f"the model has BatchNorm (bn): it normalizes each micro-batch of {1024 // k} on its "
        f"own and updates its running statistics {k} times a step, so training changes slightly"
    ) in acc["why"]
    (plain,) = [s for s in advice_for("x")["suggestions"] if s["technique"] == "accumulation"]
    assert not any("BatchNorm" in line for line in plain["why"])


HELD = MODEL.replace(
    "net = Net()", "class Holder:\n    pass\n\n\nholder = Holder()\nholder.net = Net()\nnet = None"
).replace("opt = torch.optim.SGD(net.parameters()", "opt = torch.optim.SGD(holder.net.parameters()")


def test_a_model_named_by_attribute_path_is_advised_and_does_not_stick() -> None:
    """advise("holder.net") reaches the module through the attribute; a name that reaches no
    module says so; later advise() calls without a name still advise on that model."""
    c = Cells()
    try:
        c.run(HELD)
        c.run(TRAIN.format(call="x").replace("net(", "holder.net("))
        advice = c.advisor.advise("holder.net")
        assert advice["model"] == "holder.net"
        assert advice["suggestions"], advice["notes"]
        missing = c.advisor.advise("holder.nope")
        assert missing["suggestions"] == [] and missing["notes"][0].startswith(
            "no module is found at 'holder.nope'"
        )
        c.run(TRAIN.format(call="x").replace("net(", "holder.net("))
        again = c.advisor.advise()
        assert again["model"] == "holder.net" and again["suggestions"], again["notes"]
    finally:
        c.close()

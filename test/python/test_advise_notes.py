"""Advice says why a technique is not offered: a training cell whose batch size cannot be
found (the model called with a dict, as Hugging Face batches are) gets a note instead of a
silently missing gradient-accumulation suggestion (in-process cells, see advise_cells)."""

from __future__ import annotations

from typing import Any

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
    advice = advice_for("**inputs")
    techniques = [s["technique"] for s in advice["suggestions"]]
    assert "accumulation" not in techniques
    notes = [n for n in advice["notes"] if n.startswith("gradient accumulation")]
    assert notes == [
        "gradient accumulation: not offered, the batch size of training cell [2] was not "
        "found: the model is called with keyword arguments or a dict (model(**batch)), or "
        "its input is not a tensor, a sequence of tensors or a DataLoader named in the cell; "
        "a positional tensor input (model(input_ids, ...)) can be split into micro-batches"
    ]


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

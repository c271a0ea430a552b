"""Optimize on models the advisor was not written against, each in its own real kernel: a
Hugging Face GPT-2 built from a small config (random weights, no download), a ResNet-style
conv net with BatchNorm and in-place ReLU, and a plain MLP. Every suggested cell that is run
is measured against the test's own ground truth (``_gt_measure``, advise_helpers)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from advise_helpers import advise, by_technique, compiles, kernel_with, value
from kernel_harness import KernelHarness

GPT2 = """
from transformers import GPT2Config, GPT2LMHeadModel

config = GPT2Config(
    n_layer=3, n_embd=64, n_head=4, vocab_size=128, n_positions=64,
    resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
)
gpt = GPT2LMHeadModel(config)
opt = torch.optim.AdamW(gpt.parameters(), lr=1e-3)
ids = torch.randint(0, 128, (8, 64))
"""
GPT2_TRAIN = """for step in range(2):
    opt.zero_grad()
    out = gpt(ids, labels=ids)  # the LM loss
    out.loss.backward()
    opt.step()"""
GPT2_PROBES = """
def _gt_forward():
    return gpt(ids, labels=ids).loss


def _gt_step():
    opt.zero_grad()
    _gt_forward().backward()


def _gt_forward_bf16():
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return _gt_forward()
"""

RESNET = """
from torch import nn


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + x)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(inplace=True)
        )
        self.stage = nn.Sequential(Block(16), Block(16), Block(16))
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        return self.head(self.stage(self.stem(x)).mean((2, 3)))


net = Net()
sgd = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
criterion = nn.CrossEntropyLoss()
images, labels = torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))
"""
RESNET_TRAIN = """for _ in range(2):
    sgd.zero_grad()
    logits = net(images)
    loss = criterion(logits, labels)
    loss.backward()
    sgd.step()"""
RESNET_PROBES = """
def _gt_forward():
    return criterion(net(images), labels)


def _gt_step():
    sgd.zero_grad()
    _gt_forward().backward()
"""


@pytest.fixture(scope="module")
def gpt() -> Iterator[KernelHarness]:
    yield from kernel_with(GPT2, GPT2_TRAIN, GPT2_PROBES)


@pytest.fixture(scope="module")
def resnet() -> Iterator[KernelHarness]:
    yield from kernel_with(RESNET, RESNET_TRAIN, RESNET_PROBES)


def truth(k: KernelHarness) -> dict[str, float]:
    return {
        "kept": value(k, "_gt_measure(_gt_forward)[0]"),
        "peak": value(k, "_gt_measure(_gt_step)[1]"),
        "loss": value(k, "_gt_forward().item()"),
    }


def check_checkpointing(k: KernelHarness, suggestion: dict[str, object]) -> None:
    before = truth(k)
    k.run_ok(str(suggestion["code"]), "apply-checkpointing")
    after = truth(k)
    pred = suggestion["predicted"]
    assert isinstance(pred, dict)
    assert after["loss"] == pytest.approx(before["loss"], rel=1e-6)
    assert before["kept"] - after["kept"] == pytest.approx(pred["saving_bytes"], rel=0.2)
    assert before["peak"] - after["peak"] == pytest.approx(pred["step_peak_saving_bytes"], rel=0.2)
    k.run_ok(str(suggestion["undo_code"]), "undo-checkpointing")
    assert truth(k)["kept"] == pytest.approx(before["kept"], rel=0.02)
    # the probes' forwards ran outside cells: a cell's insight takes their peaks with it
    k.run_ok("pass", "after-probes")
    advise(k)  # its insight runs now (it would wait for an idle kernel): the peaks start over


def test_gpt2_names_and_hf_checkpointing(gpt: KernelHarness) -> None:
    advice = advise(gpt)
    assert advice["model"] == "gpt"
    assert advice["names"]["model"] == "gpt" and advice["names"]["optimizer"] == "opt"
    assert advice["names"]["batch"] == "ids"
    ck = by_technique(advice, "checkpointing")
    assert "gpt.gradient_checkpointing_enable(" in ck["code"]
    assert '"use_reentrant": False' in ck["code"]
    assert ck["undo_code"] and "gradient_checkpointing_disable()" in ck["undo_code"]
    check_checkpointing(gpt, ck)


def test_gpt2_bf16_autocast_lowers_saved_activations(gpt: KernelHarness) -> None:
    advice = advise(gpt)
    amp = by_technique(advice, "autocast")
    assert amp["kind"] == "rewrite" and amp["id"] == "autocast:bf16"
    code = amp["code"]
    assert "# the LM loss" in code  # the user's lines and comments are kept
    assert 'with torch.autocast(device_type="cpu", dtype=torch.bfloat16):' in code
    assert "torch.cuda.amp" not in code
    compiles(code)
    gpt.run_ok(code, "apply-autocast")  # the rewritten training cell, run as the user would
    outcome = next(o for o in advise(gpt)["outcomes"] if o["suggestion_id"] == "autocast:bf16")
    assert outcome["after"]["cell_id"] == "apply-autocast"
    # vramscope's own numbers: the model's saved activations, before and after
    assert outcome["after"]["activation_bytes"] < outcome["before"]["activation_bytes"]
    # the ground truth (probes run after vramscope's measurement: they would add to its peaks)
    kept_fp32 = value(gpt, "_gt_measure(_gt_forward)[0]")
    kept_bf16 = value(gpt, "_gt_measure(_gt_forward_bf16)[0]")
    assert kept_bf16 < 0.8 * kept_fp32


def test_resnet_checkpointing_with_batchnorm_and_inplace_relu(resnet: KernelHarness) -> None:
    advice = advise(resnet)
    assert advice["names"]["loss_fn"] == "criterion"
    ck = by_technique(advice, "checkpointing")
    assert ck["id"] == "checkpoint:stage" and "net.stage" in ck["code"]
    assert any("BatchNorm" in line for line in ck["why"])
    check_checkpointing(resnet, ck)

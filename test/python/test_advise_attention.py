"""Hand-written attention keeping its n x n scores, in a real kernel: a model written here
(two self-attention blocks computing softmax(q @ k^T / sqrt(d)) @ v by hand) is trained; once
its step was measured, the advisor suggests scaled_dot_product_attention with the saving
predicted from the measured score matrices, as an enable cell that swaps the blocks' forward.
Run as the user would; the saved activations drop as predicted by vramscope's own numbers
and by the test's own saved-tensor-hook count, and the loss is unchanged."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from advise_helpers import advise, by_technique, compiles, kernel_with, value
from kernel_harness import KernelHarness
from vramscope.optimize.techniques.attention import rewrite_forward

SETUP = """
import math

from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-2, -1) / math.sqrt(c // self.heads)
        weights = scores.softmax(dim=-1)  # n x n, kept for backward
        out = weights @ v
        return self.proj(out.transpose(1, 2).reshape(b, t, c))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(16, 64)
        self.blocks = nn.ModuleList([SelfAttention(64, 4) for _ in range(2)])
        self.head = nn.Linear(64, 1)

    def forward(self, x):
        h = self.embed(x)
        for block in self.blocks:
            h = h + block(h)
        return self.head(h)


net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.01)
seq = torch.randn(4, 128, 16)
"""
TRAIN = """for _ in range(2):
    opt.zero_grad()
    loss = net(seq).pow(2).mean()
    loss.backward()
    opt.step()"""
# the test's own count: the storages autograd saves in a forward (parameters left out)
PROBES = """
def _gt_saved():
    params = {p.untyped_storage().data_ptr() for p in net.parameters()}
    seen = {}

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in params:
            seen[s.data_ptr()] = s.nbytes()
        return t.detach()

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = net(seq).pow(2).mean()
    return sum(seen.values()), loss.item()
"""


@pytest.fixture(scope="module")
def k() -> Iterator[KernelHarness]:
    yield from kernel_with(SETUP, TRAIN, PROBES)


def test_sdpa_swaps_the_forward_and_drops_the_scores(k: KernelHarness) -> None:
    advise(k)  # from now on the training steps are measured
    k.run_ok(TRAIN, "train-measured")
    sdpa = by_technique(advise(k), "attention")
    assert sdpa["kind"] == "enable" and sdpa["id"] == "attention:sdpa"
    code = sdpa["code"]
    compiles(code)
    assert "scaled_dot_product_attention(q, k, v, scale=1 / (math.sqrt(c // self.heads)))" in code
    assert "type(net.blocks[0])" in code
    # the scores: 2 blocks x (4 x 4 heads x 128 x 128) float32 = 2 MiB, measured
    assert any("2.0 MiB of n x n attention scores" in w for w in sdpa["why"])
    saved, loss = value(k, "_gt_saved()")

    k.run_ok(code, "apply-sdpa")
    k.run_ok(code, "apply-sdpa-again")  # re-running is harmless
    saved_after, loss_after = value(k, "_gt_saved()")
    assert loss_after == pytest.approx(loss, rel=1e-5)  # the same result
    predicted = sdpa["predicted"]["saving_bytes"]
    assert saved - saved_after == pytest.approx(predicted, rel=0.02)  # the ground truth

    k.run_ok("pass", "after-probes")  # the probes ran outside cells: a cell takes their peaks
    advise(k)
    k.run_ok(TRAIN, "train-sdpa")
    outcome = next(o for o in advise(k)["outcomes"] if o["suggestion_id"] == "attention:sdpa")
    measured = outcome["before"]["activation_bytes"] - outcome["after"]["activation_bytes"]
    assert measured == pytest.approx(predicted, rel=0.02)  # vramscope's own numbers
    assert outcome["missed"] is False

    k.run_ok(str(sdpa["undo_code"]), "undo-sdpa")
    assert value(k, "all('forward' not in vars(b) for b in net.blocks)") is True
    assert value(k, "_gt_saved()")[0] == pytest.approx(saved, rel=0.01)


def test_forwards_that_are_not_exactly_the_pattern_are_left_alone() -> None:
    plain = (
        "def forward(self, q, k, v):\n"
        "    s = torch.matmul(q, k.mT) * self.scale\n"
        "    p = torch.softmax(s, dim=-1)\n"
        "    return_value = p @ v\n"
        "    return return_value\n"
    )
    rewritten = rewrite_forward(plain)
    assert rewritten is not None and "def _sdpa_forward(self, q, k, v):" in rewritten
    assert "scaled_dot_product_attention(q, k, v, scale=self.scale)" in rewritten
    compile(rewritten, "<forward>", "exec")
    masked = plain.replace("    p = ", "    s = s.masked_fill(self.mask, float('-inf'))\n    p = ")
    returned = plain.replace("return return_value", "return return_value, p")
    other_dim = plain.replace("dim=-1", "dim=1")
    for source in (masked, returned, other_dim):
        assert rewrite_forward(source) is None

"""A batch-size search cannot exhaust the machine: off CUDA the finder stops a trial at the op
whose result takes its live bytes past the limit, frees it, bounds the search's time, and its
trials never reach model insight or the Estimator.

The bytes are the test's own: the ground-truth follower from advise_helpers (a dispatch mode
recording every op's new storages until they are freed), pushed around the whole search.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from advise_cells import Cells
from advise_helpers import GROUND_TRUTH
from test_finder_restore import one_thread  # noqa: F401  (autouse: one intra-op thread)
from vramscope.estimator import ActivationMemo
from vramscope.optimize.finder import find_batch_size

_GT: dict[str, Any] = {}
exec(GROUND_TRUTH, _GT)

MACHINE = 24 * 2**30


class Deep(torch.nn.Module):
    """16 KiB per sample per activation, 33 of them saved for backward: over 0.5 MiB per
    sample."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = torch.nn.Linear(32, 4096)
        self.out = torch.nn.Linear(4096, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for _ in range(32):
            h = torch.tanh(h * 1.01)
        out: torch.Tensor = self.out(h)
        return out


def deep_step() -> Any:
    torch.manual_seed(0)
    model = Deep()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.randn(16, 32)

    def step(batch_size: int) -> None:
        x = data[torch.arange(batch_size) % data.shape[0]]
        opt.zero_grad()
        model(x).mean().backward()
        opt.step()

    return step


def test_a_search_that_would_exhaust_the_machine_stays_under_its_budget() -> None:
    step = deep_step()
    # unbounded, the default max_batch (65,536) would need more than this machine has
    per_sample = _GT["_gt_measure"](lambda: step(64))[1] / 64
    assert per_sample * 65536 > MACHINE
    budget = 64 * 2**20
    began = time.monotonic()
    kept, peak, found = _GT["_gt_measure"](lambda: find_batch_size(step, budget=budget))
    seconds = time.monotonic() - began
    assert found["stopped"] and set(found["stopped"].values()) == {"budget"}
    assert peak <= budget  # the whole search, snapshot copies included, by the test's count
    assert kept <= 1 * 2**20  # the stopped trials were freed
    best = found["batch_size"]
    assert best is not None and _GT["_gt_measure"](lambda: step(best))[1] <= budget
    biggest = max(t["batch_size"] for t in found["tried"])
    assert biggest < 2 * budget / per_sample  # nothing near the sizes that need 24 GiB
    assert seconds < 60


def test_max_seconds_stops_the_search_and_a_trial_in_the_middle() -> None:
    x = torch.randn(4, 4)

    def slow(batch_size: int) -> None:  # ~2 s per trial, an op every 20 ms
        y = x.repeat(batch_size, 1)
        for _ in range(100):
            y = y + 1
            time.sleep(0.02)

    began = time.monotonic()
    found = find_batch_size(slow, budget="1GiB", max_seconds=0.3)
    seconds = time.monotonic() - began
    assert found["timed_out"] and found["tried"] == []  # stopped inside the first trial
    assert found["batch_size"] is None and "max_seconds=0.3" in found["message"]
    assert seconds < 1.5  # a trial alone takes 2 s

    def quick(batch_size: int) -> None:
        time.sleep(0.05)
        x.repeat(batch_size, 1).sum()

    found = find_batch_size(quick, budget="1GiB", max_seconds=0.4)
    assert found["timed_out"] and 2 <= len(found["tried"]) <= 9
    assert found["batch_size"] == max(t["batch_size"] for t in found["tried"])


MODEL = """
net = torch.nn.Sequential(
    torch.nn.Linear(64, 256), torch.nn.BatchNorm1d(256), torch.nn.ReLU(), torch.nn.Linear(256, 1)
)
opt = torch.optim.SGD(net.parameters(), lr=0.01)
x = torch.randn(32, 64)
"""
TRAIN = """for _ in range(2):
    opt.zero_grad()
    loss = net(x).pow(2).mean()
    loss.backward()
    opt.step()"""


def test_the_inserted_cell_starts_at_two_and_its_trials_reach_no_insight() -> None:
    c = Cells()
    try:
        c.run(MODEL)
        c.run(TRAIN)
        memo = ActivationMemo()
        trained = memo.observe(c.last or {})
        assert trained is not None and trained.batch_size == 32
        code = c.advisor.advise()["finder_code"]
        assert code is not None
        assert "start=2,  # BatchNorm needs at least 2 samples" in code
        assert 'budget=None,  # None: min(2 GiB, 25% of free RAM); or a size, e.g. "8GiB"' in code
        c.run(code.replace("budget=None,", 'budget="32MiB",'))  # as its comment says
        found = c.ns["found"]
        assert found["budget_bytes"] == 32 * 2**20 and found["batch_size"] >= 64
        assert found["tried"][0]["batch_size"] == 2 and found["stopped"]
        # the finder's cell measured no forward: the Estimator still reads the training's
        assert memo.observe(c.last or {}) is None
        kept = memo.get("net")
        assert kept is not None and (kept.batch_size, kept.saved_bytes) == (
            32,
            trained.saved_bytes,
        )
        assert "a vramscope.find_batch_size trial" in (c.engine.tracker.unmeasured or "")
    finally:
        c.close()

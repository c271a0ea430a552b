"""find_batch_size puts back everything its trials change, or says what it could not.

Each test hashes what the step changes (the model's state_dict, every buffer including the
non-persistent ones, the gradients, the train/eval flags, the optimizer's and the LR
scheduler's state_dicts, and the torch, Python and numpy random generators), first checks on
a deep copy that one plain step changes every one of them (so an equal hash means the finder
put it back), then runs the finder. The model and optimizer are reached only through an
attribute (``tr.model``), never passed. Ctrl-C is sent with ``_thread.interrupt_main`` (what
SIGINT does): at 40 random moments of whole searches, and deterministically inside a restore.
"""

from __future__ import annotations

import _thread
import copy
import functools
import hashlib
import io
import random
import signal
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any, Callable

import numpy as np
import pytest
import torch

from vramscope.optimize.finder import find_batch_size


@pytest.fixture(autouse=True)
def python_sigint_handler() -> Iterator[None]:
    """Python's own SIGINT handler, as in a kernel or a terminal. A process started in the
    background of a non-interactive shell (``cmd &``, as CI runners may) inherits SIGINT
    ignored; Python then installs no handler and ``_thread.interrupt_main`` does nothing."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """Tiny ops on a busy 2-core machine: one intra-op thread keeps them from contending."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


BUDGET = 96 * 2**10  # a budget stop at 128 or 256 samples: every search meets one
DATA = torch.randn(64, 8, generator=torch.Generator().manual_seed(1))


def build(scheduler: type | None = None) -> SimpleNamespace:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 32),
        torch.nn.BatchNorm1d(32),
        torch.nn.ReLU(),
        torch.nn.Dropout(0.2),
        torch.nn.Linear(32, 4),
    )
    model.register_buffer("calls", torch.zeros(1), persistent=False)
    model[3].eval()  # a mode of the user's own: the step's model.train() changes it
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    sched = (scheduler or torch.optim.lr_scheduler.StepLR)(opt, step_size=1, gamma=0.5)
    tr = SimpleNamespace(model=model, optimizer=opt, lr_scheduler=sched)
    make_step(tr)(4)  # the optimizer has state, the parameters gradients
    model[3].eval()
    return tr


def make_step(tr: SimpleNamespace) -> Callable[[int], None]:
    def step(batch_size: int) -> None:
        tr.model.train()
        x = DATA[torch.randint(0, DATA.shape[0], (batch_size,))]
        x = x + 0.01 * random.random() + 0.01 * float(np.random.rand())
        tr.model.calls += 1
        tr.optimizer.zero_grad()
        tr.model(x).pow(2).mean().backward()
        tr.optimizer.step()
        tr.lr_scheduler.step()

    return step


def _hash(obj: Any) -> str:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return hashlib.sha256(buf.getvalue()).hexdigest()


def digests(tr: SimpleNamespace) -> dict[str, str]:
    return {
        "model": _hash(tr.model.state_dict()),
        "buffers": _hash(dict(tr.model.named_buffers())),
        "grads": _hash([p.grad for p in tr.model.parameters()]),
        "modes": repr([m.training for m in tr.model.modules()]),
        "optimizer": _hash(tr.optimizer.state_dict()),
        "scheduler": _hash(tr.lr_scheduler.state_dict()),
        "torch rng": _hash(torch.get_rng_state()),
        "python rng": repr(random.getstate()),
        "numpy rng": repr(np.random.get_state()),
    }


def rng_states() -> tuple[Any, Any, Any]:
    return torch.get_rng_state(), random.getstate(), np.random.get_state()


def set_rng(states: tuple[Any, Any, Any]) -> None:
    torch.set_rng_state(states[0])
    random.setstate(states[1])
    np.random.set_state(states[2])


def assert_step_changes_everything(tr: SimpleNamespace) -> None:
    """The hashes can fail: one plain step (on a deep copy) changes every one of them."""
    before, rng = digests(tr), rng_states()
    twin = copy.deepcopy(tr)
    make_step(twin)(8)
    after = digests(twin)
    set_rng(rng)
    assert [k for k in before if before[k] == after[k]] == []


def test_everything_the_step_reaches_is_put_back() -> None:
    tr = build()
    assert_step_changes_everything(tr)
    before = digests(tr)
    found = find_batch_size(make_step(tr), budget=BUDGET, max_batch=4096)
    assert digests(tr) == before
    assert found["batch_size"] is not None and found["batch_size"] >= 2
    assert "budget" in found["stopped"].values()  # a trial stopped half-way was restored too
    assert found["restored"] == [
        "tr.model (Sequential)",
        "tr.optimizer (AdamW)",
        "tr.lr_scheduler (StepLR)",
        "random number generators: torch CPU, Python random, numpy",
    ]
    assert found["not_restored"] == []


def test_what_no_name_reaches_is_found_as_it_runs_and_said() -> None:
    """A model and optimizer behind an lru_cache (no name the step uses reaches them), with a
    scheduler stepped from an optimizer hook: all put back, and the result says how they were
    found; the gradients that changed before anything showed them (zero_grad before the
    model's forward; a parameter used without a module, found when its optimizer stepped)
    are listed as not restored."""
    hidden = build()
    free = torch.nn.Parameter(torch.randn(4, 4))
    free.grad = torch.ones(4, 4)
    extra = torch.optim.SGD([free], lr=0.1, momentum=0.9)
    hidden.optimizer.register_step_post_hook(lambda *_: hidden.lr_scheduler.step())
    holder = {"objects": (hidden.model, hidden.optimizer, free, extra)}

    @functools.cache
    def objects() -> Any:
        return holder.pop("objects")  # afterwards only the cache holds them

    objects()

    def step(batch_size: int) -> None:
        model, opt, w, sgd = objects()
        x = DATA[torch.arange(batch_size) % DATA.shape[0]]
        opt.zero_grad()
        (model(x).sum() + (x[:, :4] @ w).sum()).backward()
        opt.step()
        sgd.step()

    before, w_before = digests(hidden), free.detach().clone()
    found = find_batch_size(step, budget=BUDGET, max_batch=64)
    after = digests(hidden)
    # the model's gradients: zero_grad() ran before its forward showed it (said below)
    assert [k for k in before if before[k] != after[k]] == ["grads"]
    assert torch.equal(free.detach(), w_before)
    assert found["restored"][-4:] == [
        "a model found as it ran (Sequential)",
        "an optimizer found as it stepped (AdamW)",
        "an LR scheduler found as its optimizer stepped (StepLR)",
        "an optimizer found as it stepped (SGD)",
    ]
    model_grads, free_grad = found["not_restored"]
    assert model_grads.startswith("the gradients of a model found as it ran (Sequential): ")
    assert free_grad.startswith(
        "the gradients of 1 parameter(s) of an optimizer found as it stepped (SGD): "
    )
    assert "found only as the step ran" in found["message"]
    assert "not restored: the gradients of a model found as it ran" in found["message"]


class ArmedStepLR(torch.optim.lr_scheduler.StepLR):
    """Its ``load_state_dict`` runs only in the finder's restore, first there: on the
    ``arm_at``-th call it sends Ctrl-C after ``delay`` s (0: at once, from inside it)."""

    arm_at = 0
    delay = 0.0
    calls = 0
    timer: threading.Timer | None = None

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        ArmedStepLR.calls += 1
        if ArmedStepLR.calls == ArmedStepLR.arm_at:
            if ArmedStepLR.delay == 0:
                _thread.interrupt_main()  # handled at the next bytecode: inside the restore
            else:
                ArmedStepLR.timer = threading.Timer(ArmedStepLR.delay, _thread.interrupt_main)
                ArmedStepLR.timer.start()
        super().load_state_dict(state_dict)


def arm(at: int, delay: float) -> None:
    ArmedStepLR.arm_at, ArmedStepLR.delay, ArmedStepLR.calls = at, delay, 0
    ArmedStepLR.timer = None


def search_interrupted(tr: SimpleNamespace, timer: threading.Timer | None) -> bool:
    """One search; whether a KeyboardInterrupt came out of it."""
    hit = False
    try:
        find_batch_size(make_step(tr), budget=BUDGET, max_batch=4096)
    except KeyboardInterrupt:
        hit = True
    while True:  # an interrupt that came after the search lands here, not in the next one
        try:
            for t in (timer, ArmedStepLR.timer):
                if t is not None:
                    t.join()
            time.sleep(0.005)
            return hit
        except KeyboardInterrupt:
            pass


def test_forty_interrupts_at_random_moments_leave_nothing_changed() -> None:
    """Ctrl-C at 40 random moments (seeded): 20 after a delay spread over a whole search,
    20 a random 0-2 ms after a random trial's restore began (without finder_guard's
    deferral, most of those land in a restore and leave a change)."""
    tr = build(ArmedStepLR)
    before = digests(tr)
    arm(0, 0)
    spans = []
    for _ in range(3):  # the first search may pay for imports: the median
        began = time.monotonic()
        trials = len(find_batch_size(make_step(tr), budget=BUDGET, max_batch=4096)["tried"])
        spans.append(time.monotonic() - began)
    span = sorted(spans)[1]
    rnd = random.Random(20)
    changed, hits = [], 0
    for i in range(40):
        timer = None
        if i % 2:
            arm(rnd.randint(1, trials), rnd.uniform(0, 0.002))
        else:
            arm(0, 0)
            timer = threading.Timer(rnd.uniform(0, 1.1 * span), _thread.interrupt_main)
            timer.start()
        hits += search_interrupted(tr, timer)
        if digests(tr) != before:
            changed.append(i)
            tr = build(ArmedStepLR)
            before = digests(tr)
    assert changed == []
    assert hits >= 24  # most landed inside a search (some just after one)


def test_an_interrupt_inside_the_restore_waits_until_it_is_done() -> None:
    tr = build(ArmedStepLR)
    before = digests(tr)
    arm(1, 0)  # Ctrl-C from inside the first restore, at its start
    with pytest.raises(KeyboardInterrupt):
        find_batch_size(make_step(tr), budget=BUDGET, max_batch=4096)
    assert ArmedStepLR.calls == 1  # the search stopped after that trial
    assert digests(tr) == before  # the rest of the restore ran


def test_batchnorm_models_start_at_two() -> None:
    tr = build()
    sizes = [t["batch_size"] for t in find_batch_size(make_step(tr), budget=BUDGET)["tried"]]
    assert sizes[0] == 2 and 1 not in sizes
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        find_batch_size(make_step(tr), budget=BUDGET, start=1)

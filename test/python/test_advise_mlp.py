"""Optimize on a plain MLP fed from a list of (x, y) batches, in a real kernel: the names come
from the loop (``for x, y in loader``), gradient accumulation is a rewrite of the user's cell
that keeps the same update and lowers the step's peak (the test's own ground truth), and
freeing IPython's output cache releases the bytes it held."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from advise_helpers import advise, by_technique, compiles, kernel_with, value
from kernel_harness import KernelHarness

MLP = """
mlp = torch.nn.Sequential(
    torch.nn.Linear(256, 512), torch.nn.ReLU(),
    torch.nn.Linear(512, 512), torch.nn.ReLU(),
    torch.nn.Linear(512, 10),
)
sgd = torch.optim.SGD(mlp.parameters(), lr=0.05)
loss_fn = torch.nn.CrossEntropyLoss()
loader = [(torch.randn(2048, 256), torch.randint(0, 10, (2048,))) for _ in range(2)]
"""
TRAIN = """for x, y in loader:  # two batches of 2048
    sgd.zero_grad()
    loss = loss_fn(mlp(x), y)
    loss.backward()
    sgd.step()"""
# run a cell's code from the same weights; return the peak and the weights after
PROBES = """
import copy


def _gt_run(code):
    start = copy.deepcopy(mlp.state_dict())
    peak = _gt_measure(lambda: exec(code, globals()))[1]
    after = [p.detach().clone() for p in mlp.parameters()]
    mlp.load_state_dict(start)
    return peak, after
"""


@pytest.fixture(scope="module")
def k() -> Iterator[KernelHarness]:
    yield from kernel_with(MLP, TRAIN, PROBES)


def test_advise_in_the_cell_after_training(k: KernelHarness) -> None:
    """The usual flow: the training cell, then vramscope.advise() in the next cell (its
    insight is still queued for an idle kernel when that cell starts)."""
    k.run_ok(TRAIN, "train-again")
    k.run_ok("advice = vramscope.advise()", "ask")
    assert value(k, "advice['training_cell']['cell_id']") == "train-again"
    assert value(k, "advice['notes']") == [
        "the training step's peak is not measured yet (it is from the next run of the "
        "training cell on): step-peak savings are estimated from the per-layer figures; run "
        "the training cell once more before applying a suggestion, so that its step peak is "
        "compared before and after",
        "checkpointing: no repeated blocks (same class, repeated) found",
    ]
    assert value(k, "[s['id'] for s in advice['suggestions']][:1]") == ["accumulate:2"]
    # advice asked for: the next run of the training cell has its step measured
    k.run_ok(TRAIN, "train-measured")
    k.run_ok("advice = vramscope.advise()", "ask-again")
    assert value(k, "advice['notes']") == [
        "checkpointing: no repeated blocks (same class, repeated) found"
    ]
    assert any(
        "one training step measured" in w for w in value(k, "advice['suggestions'][0]['why']")
    )


def test_names_from_the_loop(k: KernelHarness) -> None:
    advice = advise(k)
    assert advice["names"] == {
        "model": "mlp",
        "optimizer": "sgd",
        "loss_fn": "loss_fn",
        "data": "loader",
        "batch": "x",
    }
    assert not [s for s in advice["suggestions"] if s["technique"] == "checkpointing"]
    assert any("no repeated blocks" in note for note in advice["notes"])


def test_accumulation_keeps_the_update_and_lowers_the_peak(k: KernelHarness) -> None:
    acc = by_technique(advise(k), "accumulation")
    code = acc["code"]
    assert acc["kind"] == "rewrite" and acc["id"] == "accumulate:2"
    assert "for x_micro, y_micro in zip(x.chunk(accum_steps), y.chunk(accum_steps)):" in code
    assert "(loss / accum_steps).backward()" in code
    assert "# two batches of 2048" in code  # the user's comment is kept
    compiles(code)
    k.execute(f"_gt_plain = _gt_run({TRAIN!r})\n_gt_acc = _gt_run({code!r})", silent=True)
    peak_plain, peak_acc = value(k, "[_gt_plain[0], _gt_acc[0]]")
    assert peak_acc < peak_plain  # the ground truth: accumulation lowers the step peak
    saving = acc["predicted"]["step_peak_saving_bytes"]
    assert peak_plain - peak_acc == pytest.approx(saving, rel=0.2)
    same = value(
        k,
        "all(torch.allclose(a, b, atol=1e-5) for a, b in zip(_gt_plain[1], _gt_acc[1]))",
    )
    assert same is True  # same effective batch: the same update
    # run as the user would: vramscope's own numbers show the saving (a cell first takes the
    # probes' peaks: they ran outside cells)
    k.run_ok("pass", "after-probes")
    advise(k)  # its insight runs now (it would wait for an idle kernel): the peaks start over
    k.run_ok(code, "apply-accumulation")
    outcome = next(o for o in advise(k)["outcomes"] if o["suggestion_id"] == "accumulate:2")
    assert outcome["after"]["activation_bytes"] < outcome["before"]["activation_bytes"]
    assert outcome["missed"] is False


def test_an_accumulating_cell_is_not_wrapped_again(k: KernelHarness) -> None:
    """Once the rewrite ran as the training cell, advice does not wrap it in a second
    micro-batch loop: no accumulation on it, a note saying it already accumulates."""
    k.run_ok(TRAIN, "train-plain")
    code = by_technique(advise(k), "accumulation")["code"]
    k.run_ok(code, "train-accumulating")
    advice = advise(k)
    assert advice["training_cell"]["cell_id"] == "train-accumulating"
    # offered no more; the applied one keeps its card (marked applied, with its undo)
    accumulation = [s for s in advice["suggestions"] if s["technique"] == "accumulation"]
    assert [(s["id"], s["applied"]) for s in accumulation] == [("accumulate:2", True)]
    count = advice["training_cell"]["execution_count"]
    assert (
        f"gradient accumulation: training cell [{count}] already runs 2 micro-batches per "
        "step: to split further, raise its accum_steps"
    ) in advice["notes"]
    for s in advice["suggestions"]:  # no other rewrite nests the loop either
        if s["applied"]:
            continue
        assert s["code"].count("# vramscope: accumulate:") <= 1
        assert "_micro_micro" not in s["code"]
    # the marker deleted, the loop kept: still recognised
    k.run_ok(code.replace("# vramscope: accumulate:2\n", ""), "train-unmarked")
    advice = advise(k)
    assert advice["training_cell"]["cell_id"] == "train-unmarked"
    offered = [s for s in advice["suggestions"] if not s["applied"]]
    assert not [s for s in offered if s["technique"] == "accumulation"]
    # the plain cell again: offered again
    k.run_ok(TRAIN, "train-plain-again")
    assert by_technique(advise(k), "accumulation")["id"] == "accumulate:2"


def test_freeing_the_output_cache_releases_its_bytes(k: KernelHarness) -> None:
    k.run_ok("torch.ones(4 * 2**20)  # 16 MiB, shown: IPython's Out keeps it", "show")
    count = value(k, "max(Out)")
    k.execute(f"import weakref\n_gt_ref = weakref.ref(Out[{count}])", silent=True)
    k.run_ok("pass", "next")
    free = by_technique(advise(k), "free_holders")
    assert free["id"] == "free:output_cache" and free["kind"] == "free"
    assert free["predicted"]["saving_bytes"] == pytest.approx(16 * 2**20, rel=0.01)
    compiles(free["code"])
    assert value(k, "_gt_ref() is not None") is True
    k.run_ok(free["code"], "free")
    assert value(k, "_gt_ref() is None") is True  # the tensor is gone

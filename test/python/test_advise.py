"""Optimize on the demo notebook's model (examples/demo.ipynb), in a real kernel: advice over
the protocol, the checkpointing cell run and measured against the test's own ground truth,
predicted vs measured after the training cell runs again, and the undo cell."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest

from advise_helpers import advise, by_technique, compiles, start_kernel, value
from kernel_harness import KernelHarness
from vramscope.protocol import validate_request

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo.ipynb"
# the demo's training loop, 2 steps instead of 15 (same model, optimizer and batch)
TRAIN = """batch = torch.randn(8, 32, 512)  # 8 sequences of 32 tokens: quick on a CPU
for _ in range(2):
    optimizer.zero_grad()
    loss = model(batch).pow(2).mean()
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.4f}")"""
# the test's own forward and step (defined silently: not recorded cells)
PROBES = """
def _gt_forward():
    torch.manual_seed(1)
    return model(batch).pow(2).mean()


def _gt_step():
    optimizer.zero_grad()
    _gt_forward().backward()
"""


def demo_model_cell() -> str:
    nb = nbformat.read(DEMO, as_version=4)
    cells = [c.source for c in nb.cells if "TransformerEncoder(" in c.source]
    assert len(cells) == 1
    return str(cells[0])


@pytest.fixture(scope="module")
def k() -> Iterator[KernelHarness]:
    kernel = start_kernel()
    kernel.run_ok(demo_model_cell(), "demo-model")
    kernel.run_ok("optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)", "demo-opt")
    kernel.run_ok(TRAIN, "demo-train")
    assert kernel.execute(PROBES, silent=True)["content"]["status"] == "ok"
    yield kernel
    kernel.close()


def cpu_has_bf16() -> bool:
    """This machine's x86 flags, read here: AVX512-BF16 or AMX-BF16 present."""
    flags = Path("/proc/cpuinfo").read_text().split("flags")[1].split("\n")[0].split()
    return "avx512_bf16" in flags or "amx_bf16" in flags


def ground_truth(k: KernelHarness) -> dict[str, float]:
    kept = value(k, "_gt_measure(_gt_forward)[0]")
    peak = value(k, "_gt_measure(_gt_step)[1]")
    loss = value(k, "_gt_forward().item()")
    return {"kept": kept, "peak": peak, "loss": loss}


def test_get_advice_over_the_protocol(k: KernelHarness) -> None:
    control = k.comm_open("control")
    validate_request({"type": "request", "id": "x", "method": "get_advice", "params": {}})
    reply = k.request(control, "get_advice", {"model": "model"})
    assert reply["type"] == "reply", reply
    advice = reply["result"]["advice"]
    assert advice["model"] == "model"
    assert advice["training_cell"] == {"cell_id": "demo-train", "execution_count": 4}
    assert advice["names"] == {
        "model": "model",
        "optimizer": "optimizer",
        "loss_fn": None,
        "data": None,
        "batch": "batch",
    }
    techniques = [s["technique"] for s in advice["suggestions"]]
    assert {"checkpointing", "autocast", "accumulation"} <= set(techniques)
    # bf16 on CPU is faster only with native bf16 instructions (the test reads the flags)
    amp_cost = by_technique(advice, "autocast")["cost"]["text"]
    assert amp_cost.startswith("usually faster" if cpu_has_bf16() else "slower on this CPU")
    peaks = [
        s["predicted"]["step_peak_saving_bytes"]
        if s["predicted"]["step_peak_saving_bytes"] is not None
        else s["predicted"]["saving_bytes"]
        for s in advice["suggestions"]
    ]

    assert peaks == sorted(peaks, reverse=True)  # ranked, best first
    for s in advice["suggestions"]:
        compiles(s["code"])
        assert s["code"].startswith(f"# vramscope: {s['id']}\n")
        assert "vramscope" not in s["code"].replace("# vramscope", "")  # runs without it
        assert s["why"] and s["predicted"]["saving_bytes"] > 0
    assert advice["finder_code"] is not None
    compiles(advice["finder_code"])
    bad = k.request(control, "get_advice", {"model": ""})
    assert bad["type"] == "error" and bad["code"] == "invalid_params"


def test_checkpointing_saving_matches_prediction(k: KernelHarness) -> None:
    advice = advise(k)
    ck = by_technique(advice, "checkpointing")
    assert ck["kind"] == "enable" and ck["id"] == "checkpoint:layers"
    assert "model.layers" in ck["code"] and "use_reentrant=False" in ck["code"]
    before = ground_truth(k)
    k.run_ok(ck["code"], "apply-checkpoint")
    k.run_ok(ck["code"], "apply-checkpoint-again")  # re-running is harmless
    after = ground_truth(k)
    assert after["loss"] == pytest.approx(before["loss"], rel=1e-6)  # the loss is unchanged
    pred = ck["predicted"]
    # the activations kept from forward to backward: within 20% of the prediction
    assert before["kept"] - after["kept"] == pytest.approx(pred["saving_bytes"], rel=0.2)
    # the demo's step peak is its gradients' (25 MiB of parameters, a small batch): the
    # predicted peak change is small, and so is the measured one (within 5% of the peak)
    peak_change = before["peak"] - after["peak"]
    assert abs(peak_change - pred["step_peak_saving_bytes"]) <= 0.05 * before["peak"]

    k.run_ok("pass", "after-probes")  # the probes ran outside cells: a cell takes their peaks
    advise(k)  # and its insight runs now (it would wait for an idle kernel)
    # the training cell runs again: the outcome (vramscope's own numbers) reaches the panel
    stream = k.comm_open("stream")
    k.comm_data(stream, "hello")
    k.run_ok(TRAIN, "demo-train-2")
    message = k.comm_data(stream, "advice")
    outcome = next(
        o for o in message["advice"]["outcomes"] if o["suggestion_id"] == "checkpoint:layers"
    )
    assert outcome["before"]["cell_id"] == "demo-train"
    assert outcome["after"]["cell_id"] == "demo-train-2"
    measured = outcome["before"]["activation_bytes"] - outcome["after"]["activation_bytes"]
    assert measured == pytest.approx(pred["saving_bytes"], rel=0.2)
    assert outcome["missed"] is False and outcome["miss_fraction"] <= 0.2
    # the session report keeps it (the last advice, outcomes as of now)
    kept = value(k, "vramscope.session_report()['advice']['outcomes']")
    assert [o for o in kept if o["suggestion_id"] == "checkpoint:layers"] == [outcome]

    # undo: the plain forwards are back, and so are the saved activations
    k.run_ok(ck["undo_code"], "undo-checkpoint")
    undone = ground_truth(k)
    assert undone["kept"] == pytest.approx(before["kept"], rel=0.02)
    assert value(k, "all('forward' not in vars(b) for b in model.layers)") is True


STATE = (
    "sum(t.numel() * t.element_size() for s in optimizer.state.values() "
    "for t in s.values() if torch.is_tensor(t))"
)


def test_a_lighter_optimizer_where_its_state_dominates(k: KernelHarness) -> None:
    lighter = by_technique(advise(k), "optimizer")
    assert (
        lighter["kind"] == "enable"
        and "optimizer = torch.optim.Adafactor(_groups, **_defaults)" in lighter["code"]
    )
    before = value(k, STATE)  # Adam's two moments: twice the parameters
    assert before == pytest.approx(
        2 * value(k, "sum(p.numel() * 4 for p in model.parameters())"), rel=0.01
    )
    k.run_ok(lighter["code"], "apply-adafactor")
    k.run_ok(TRAIN, "demo-train-adafactor")
    after = value(k, STATE)  # the ground truth: the new optimizer's state after a step
    assert before - after == pytest.approx(lighter["predicted"]["saving_bytes"], rel=0.2)
    k.run_ok(str(lighter["undo_code"]), "undo-adafactor")
    assert value(k, "type(optimizer).__name__") == "Adam"

"""The estimator's measured defaults and dtype scaling, against real runs: activations measured
in fp32 and scaled to bf16 compared with the same model really run under CPU autocast bf16;
precision and optimizer defaults read from the model and the optimizer over it."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from vramscope.estimator import ActivationMemo  # noqa: E402
from vramscope.estimator.entry import handle_request  # noqa: E402
from vramscope.estimator.scaling import measured_dtype, scale  # noqa: E402
from vramscope.insight import InsightEngine  # noqa: E402

BATCH = 2048


def mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 256))


def measure(ns: dict[str, Any], autocast: bool) -> ActivationMemo:
    """One cell's forward + backward of ``ns["net"]`` measured by model insight."""
    engine = InsightEngine(namespace=ns, min_holder_bytes=1)
    engine.install()
    try:
        x = torch.randn(BATCH, 256)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out = ns["net"](x)
        out.float().sum().backward()
        memo = ActivationMemo()
        assert memo.observe(engine.after_cell(1000)) is not None
        return memo
    finally:
        engine.uninstall()


def test_fp32_activations_scaled_to_bf16_match_a_real_autocast_run() -> None:
    ns: dict[str, Any] = {"net": mlp()}
    fp32 = measure(ns, autocast=False).get("net")
    real = measure(ns, autocast=True).get("net")
    assert fp32 is not None and real is not None
    assert measured_dtype(fp32.by_dtype) == "float32"
    assert measured_dtype(real.by_dtype) == "bfloat16"
    # fp32: the input (B x 256) and ReLU's output (B x 1024, also Linear 2's input)
    assert fp32.saved_bytes == BATCH * (256 + 1024) * 4
    est = handle_request({"model": "net", "precision": "bf16-mixed"}, ns, _memo_of(fp32))[
        "estimate"
    ]
    assert est["activation_dtype"] == "float32" and est["activation_scale"] == 0.5
    scaled = est["activations"]
    assert scaled == fp32.saved_bytes // 2
    # Ground truth: what the autocast run saved. Besides the bf16 activations autocast also
    # saves the bf16 copy of the second Linear's weight (its input needs a gradient; the
    # first one's does not): 2 bytes per weight, which the estimate counts under
    # "parameters" (2 bytes each under mixed precision), not as activations.
    weight_copy = 2 * 1024 * 256
    assert abs(scaled - (real.saved_bytes - weight_copy)) <= 0.01 * real.saved_bytes
    # Stated tolerance against the whole autocast figure: 10% at this batch size.
    assert abs(scaled - real.saved_bytes) <= 0.10 * real.saved_bytes
    # the view's note says what was measured and how it was scaled
    assert any("measured at float32, scaled x0.50 to bfloat16" in n for n in est["notes"])


def test_an_autocast_measurement_is_used_as_is_for_mixed_and_doubled_for_fp32() -> None:
    ns: dict[str, Any] = {"net": mlp()}
    real = measure(ns, autocast=True).get("net")
    assert real is not None
    memo = _memo_of(real)
    mixed = handle_request({"model": "net"}, ns, memo)["estimate"]
    # fp32 parameters measured with bf16 activations: the setup measures as bf16-mixed
    assert mixed["measured"]["precision"] == "bf16-mixed"
    assert mixed["precision"] == "bf16-mixed" and mixed["activation_scale"] == 1.0
    assert mixed["activations"] == real.saved_bytes
    assert any("not scaled" in n for n in mixed["notes"])
    full = handle_request({"model": "net", "precision": "32-true"}, ns, memo)["estimate"]
    bf16 = real.by_dtype.get("bfloat16", 0)
    assert full["activations"] == real.saved_bytes + bf16  # only the bf16 part doubles


def test_unknown_split_is_not_scaled() -> None:
    out = scale({}, "bf16-mixed")
    assert out.factor == 1.0 and out.measured_dtype is None
    assert "not measured" in out.note
    # int64 indices are kept as measured: only the float32 half is rescaled
    out = scale({"float32": 1000, "int64": 1000}, "bf16-true")
    assert out.factor == pytest.approx(0.75)


def test_precision_and_optimizer_default_to_what_was_measured() -> None:
    net = mlp().to(torch.bfloat16)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    ns: dict[str, Any] = {"net": net, "sgd": opt}
    params = sum(p.numel() for p in net.parameters())
    est = handle_request({"model": "net"}, ns, None)["estimate"]
    assert est["precision"] == "bf16-true" and est["optimizer"] == "sgd-momentum"
    assert est["measured"] == {
        "param_dtype": "bfloat16",
        "precision": "bf16-true",
        "optimizer": "sgd-momentum",
        "optimizer_variable": "sgd",
        "optimizer_class": "SGD",
        "optimizer_state_bytes_per_param": None,  # no step yet: no momentum buffers
    }
    assert any("no state yet" in n for n in est["notes"])
    net(torch.randn(4, 256, dtype=torch.bfloat16)).sum().backward()
    opt.step()
    est = handle_request({"model": "net"}, ns, None)["estimate"]
    # one bf16 momentum buffer per parameter: 2 bytes each, measured from opt.state
    assert est["measured"]["optimizer_state_bytes_per_param"] == 2.0
    assert est["optimizer_state"] == 2 * params
    # a choice made by the caller wins over the measured one
    chosen = handle_request(
        {"model": "net", "precision": "32-true", "optimizer": "adamw"}, ns, None
    )["estimate"]
    assert (chosen["precision"], chosen["optimizer"]) == ("32-true", "adamw")
    assert chosen["measured"]["optimizer"] == "sgd-momentum"
    # a bare count measures nothing
    assert handle_request({"params": 1000}, ns, None)["estimate"]["measured"] is None


def _memo_of(found: Any) -> ActivationMemo:
    memo = ActivationMemo()
    memo._by_model[found.model] = found
    return memo

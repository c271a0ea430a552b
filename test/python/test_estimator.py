"""``vramscope.estimate``: known figures, real optimizer state as ground truth, sharding,
offload, names, and activations measured in a real kernel."""

from __future__ import annotations

from typing import Any

import pytest

import vramscope
from vramscope.estimator import ActivationMemo, compute, parse_param_count
from vramscope.estimator.entry import estimate_for
from vramscope.protocol import ProtocolError, validate_request

GB = 10**9


def test_7b_fp32_adam_needs_112_gb_of_model_states() -> None:
    # 4 bytes parameters + 4 gradients + 8 Adam moments = 16 bytes per parameter
    for optimizer in ("adam", "adamw"):
        est = vramscope.estimate(7_000_000_000, optimizer=optimizer, precision="32-true")
        assert est.parameters == 28 * GB
        assert est.gradients == 28 * GB
        assert est.optimizer_state == 56 * GB
        assert est.master_weights == 0
        assert est.parameters + est.gradients + est.optimizer_state == 112 * GB
        assert est.total == 112 * GB
        assert est.activation_source == "none" and est.activations == 0


@pytest.mark.parametrize(
    ("stage", "exact", "paper_gb"),
    [
        (0, 120_000_000_000, "120"),  # baseline (2 + 2 + K) * psi
        (1, 31_406_250_000, "31.4"),  # P_os: 2psi + 2psi + K psi / N
        (2, 16_640_625_000, "16.6"),  # P_os+g: 2psi + (2 + K) psi / N
        (3, 1_875_000_000, "1.88"),  # P_os+g+p: (2 + 2 + K) psi / N
    ],
)
def test_zero_paper_table_1(stage: int, exact: int, paper_gb: str) -> None:
    """7.5B parameters, 64 GPUs, mixed-precision Adam (K = 12: fp32 master + two moments)."""
    for precision in ("16-mixed", "bf16-mixed", "fp16", "bf16"):
        est = vramscope.estimate(
            "7.5B", optimizer="adam", precision=precision, zero_stage=stage, n_gpus=64
        )
        assert est.total == exact
        assert est.optimizer_state + est.master_weights == -(
            -12 * 7_500_000_000 // (64 if stage else 1)
        )
        digits = len(paper_gb.split(".")[1]) if "." in paper_gb else 0
        assert f"{est.total / GB:.{digits}f}" == paper_gb


@pytest.mark.parametrize(
    ("precision", "per_param"),
    [
        ("32-true", (4, 4, 0, 8)),
        ("no", (4, 4, 0, 8)),
        ("16-mixed", (2, 2, 4, 8)),
        ("bf16-mixed", (2, 2, 4, 8)),
        ("16-true", (2, 2, 0, 4)),
        ("bf16-true", (2, 2, 0, 4)),
    ],
)
def test_precision_bytes_per_parameter(precision: str, per_param: tuple[int, ...]) -> None:
    est = vramscope.estimate(1000, optimizer="adamw", precision=precision)
    got = (est.parameters, est.gradients, est.master_weights, est.optimizer_state)
    assert got == tuple(1000 * b for b in per_param)


def _real_state_bytes(opt: Any) -> int:
    """Bytes of an optimizer's state tensors after a step, the per-tensor step counters out."""
    import torch

    total = 0
    for state in opt.state.values():
        for key, value in state.items():
            if key != "step" and isinstance(value, torch.Tensor):
                total += value.untyped_storage().nbytes()
    return total


@pytest.mark.parametrize(
    ("name", "make"),
    [
        ("sgd", lambda p: __import__("torch").optim.SGD(p, lr=0.1)),
        ("sgd-momentum", lambda p: __import__("torch").optim.SGD(p, lr=0.1, momentum=0.9)),
        ("adam", lambda p: __import__("torch").optim.Adam(p)),
        ("adamw", lambda p: __import__("torch").optim.AdamW(p)),
        ("adafactor", lambda p: __import__("torch").optim.Adafactor(p)),
    ],
)
def test_optimizer_state_matches_a_real_optimizer_step(name: str, make: Any) -> None:
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 96), torch.nn.ReLU(), torch.nn.Linear(96, 10, bias=False)
    )
    opt = make(model.parameters())
    model(torch.randn(4, 64)).sum().backward()
    opt.step()
    est = estimate_for(model, {}, None, optimizer=name, precision="32-true")
    assert est.param_count == sum(p.numel() for p in model.parameters())
    assert est.optimizer_state == _real_state_bytes(opt)
    assert est.parameters == sum(p.untyped_storage().nbytes() for p in model.parameters())
    assert est.gradients == sum(p.grad.untyped_storage().nbytes() for p in model.parameters())


def test_8bit_adam_keeps_a_byte_per_moment_plus_block_constants() -> None:
    est = compute(2560, optimizer="adamw-8bit", precision="bf16-mixed")
    assert est.optimizer_state == 2 * (2560 + 4 * 10)  # 10 blocks of 256, one fp32 each
    assert compute(2560, optimizer="adam8bit").optimizer_state == est.optimizer_state


def test_adafactor_from_a_bare_count_says_its_state_is_left_out() -> None:
    est = compute(10**6, optimizer="adafactor")
    assert est.optimizer_state == 0
    assert any("Adafactor" in note for note in est.notes)


def test_sharding_offload_and_gpus() -> None:
    base = dict(optimizer="adam", precision="bf16-mixed", n_gpus=8)
    n = 8 * 10**6
    st1 = compute(n, zero_stage=1, offload="cpu", **base)  # type: ignore[arg-type]
    assert (st1.optimizer_state, st1.master_weights) == (0, 0)
    assert st1.cpu_offloaded == (8 * n + 4 * n) // 8
    assert st1.total == 2 * n + 2 * n
    st3 = compute(n, zero_stage="full_shard", offload="all", **base)  # type: ignore[arg-type]
    assert st3.zero_stage == 3 and st3.parameters == 0
    assert st3.gradients == 2 * n // 8
    assert st3.cpu_offloaded == (12 * n + 2 * n) // 8
    assert compute(n, zero_stage="shard_grad_op", **base).zero_stage == 2  # type: ignore[arg-type]
    # no sharding: N GPUs each hold everything (plain data parallel)
    assert compute(n, zero_stage=0, **base).total == 16 * n  # type: ignore[arg-type]
    # shards round up: a GPU holds the largest
    assert compute(10, zero_stage=3, n_gpus=3, precision="32-true").parameters == 14


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"precision": "fp8"}, "unknown precision 'fp8'; known: 32-true"),
        ({"optimizer": "lion"}, "unknown optimizer 'lion'; known: sgd"),
        ({"zero_stage": 4}, "zero_stage must be 0, 1, 2 or 3"),
        ({"n_gpus": 0}, "n_gpus must be a whole number >= 1"),
        ({"offload": "disk"}, "unknown offload 'disk'"),
        ({"offload": "params", "zero_stage": 2}, "parameter offload needs ZeRO stage 3"),
        ({"batch_size": -1}, "batch_size must be a whole number >= 1"),
    ],
)
def test_unknown_names_and_bad_values_raise_clear_value_errors(
    kwargs: dict[str, Any], words: str
) -> None:
    with pytest.raises(ValueError) as info:
        vramscope.estimate(1000, **kwargs)
    assert words in str(info.value)


def test_param_counts() -> None:
    assert parse_param_count("7B") == 7 * 10**9
    assert parse_param_count("125M") == 125 * 10**6
    assert parse_param_count("1.5t") == 1_500_000_000_000
    assert parse_param_count("350k") == 350_000
    assert parse_param_count(" 6,700 ") == 6700
    assert parse_param_count(7e9) == 7 * 10**9
    for bad in ("", "7X", "-3B", 0, True, None, float("nan"), "B"):
        with pytest.raises(ValueError, match="parameter count"):
            parse_param_count(bad)


def test_estimate_request_params_are_validated() -> None:
    def req(params: dict[str, Any]) -> dict[str, Any]:
        return {"type": "request", "id": "e1", "method": "estimate", "params": params}

    validate_request(req({"params": 7e9, "zero_stage": 3, "n_gpus": 8, "batch_size": None}))
    validate_request(req({"model": "net", "offload": "cpu", "precision": "bf16-mixed"}))
    for bad in (
        {},
        {"params": 10, "model": "net"},
        {"params": 0},
        {"params": "7B"},
        {"model": ""},
        {"params": 10, "zero_stage": -1},
        {"params": 10, "n_gpus": 1.5},
        {"params": 10, "batch_size": True},
        {"params": 10, "optimizer": 3},
        {"params": 10, "offload": ["cpu"]},
    ):
        with pytest.raises(ProtocolError) as info:
            validate_request(req(bad))
        assert info.value.code == "invalid_params" and info.value.in_reply_to == "e1"


def test_memo_keeps_the_newest_forward_per_model() -> None:
    memo = ActivationMemo()
    row = {"path": "", "peak_saved_bytes": 0, "output_shape": [8, 16, 32]}
    inner = {"path": "0", "peak_saved_bytes": 4096, "output_shape": [8, 16, 32]}
    assert memo.observe({"model": "m", "layers": [row, inner]}) is not None
    # a cell without a forward (nothing saved) keeps the previous measurement
    assert memo.observe({"model": "m", "layers": [dict(inner, peak_saved_bytes=0)]}) is None
    found = memo.get("m")
    assert found is not None
    assert (found.saved_bytes, found.batch_size, found.seq_len) == (4096, 8, 16)
    est = compute(100, measurement=found, batch_size=4, seq_len=32)
    assert est.activation_source == "measured"
    assert est.activations == 4096 // 8 * 4 * 2  # per sample x 4, x 32 / 16 tokens


NET = (
    "import torch, vramscope\n"
    "net = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(),"
    " torch.nn.Linear(1024, 256))\n"
)


@pytest.mark.kernel
def test_activations_measured_in_a_real_kernel(kernel: Any) -> None:
    pytest.importorskip("torch")
    kernel.run_ok(NET, cell_id="est-def")
    before = kernel.eval("vramscope.estimate(net, precision='32-true').activation_source")
    assert before == "none"
    kernel.run_ok("net(torch.randn(8, 256)).sum().backward()", cell_id="est-fwd")
    # what the forward saved for backward: Linear 1's input (8 x 256) and ReLU's output
    # (8 x 1024, which Linear 2 saves too: one storage), fp32
    saved = 8 * 256 * 4 + 8 * 1024 * 4
    # (a new cell: the previous cell's insight is done by then, as when a user runs one)
    kernel.run_ok("_est = vramscope.estimate(net, precision='32-true', batch_size=32)")
    got = kernel.eval("_est.to_dict()")
    assert got["activation_source"] == "measured"
    assert got["model"] == "net"
    assert got["activation_per_sample"] == saved / 8
    assert got["activations"] == saved * 4
    params = 256 * 1024 + 1024 + 1024 * 256 + 256
    assert got["param_count"] == params
    assert got["total"] == 16 * params + saved * 4
    # the same through the protocol's request
    control = kernel.comm_open("control")
    reply = kernel.request(
        control, "estimate", {"model": "net", "precision": "32-true", "optimizer": "adam"}
    )
    assert reply["type"] == "reply", reply
    result = reply["result"]["estimate"]
    assert result["activations"] == saved and result["batch_size"] == 8
    assert result["activation_source"] == "measured"
    bad = kernel.request(control, "estimate", {"model": "nothing_here"})
    assert bad["type"] == "error" and bad["code"] == "invalid_params"
    assert "not a torch.nn.Module" in bad["message"]
    bad = kernel.request(control, "estimate", {"params": 1000, "precision": "fp8"})
    assert bad["type"] == "error" and bad["code"] == "invalid_params"
    assert "unknown precision" in bad["message"]
    # since 1.1: with `model`, a precision / optimizer left out is what the model measures
    # as (fp32 parameters and activations: 32-true; no optimizer in the namespace: AdamW)
    reply = kernel.request(control, "estimate", {"model": "net"})
    assert reply["type"] == "reply", reply
    result = reply["result"]["estimate"]
    assert result["precision"] == "32-true" and result["optimizer"] == "adamw"
    assert result["measured"]["param_dtype"] == "float32"
    assert result["measured"]["optimizer_variable"] is None
    assert result["activation_dtype"] == "float32" and result["activation_scale"] == 1.0
    assert result["activations"] == saved

"""Mixed precision: autocast around the forward and the loss (``torch.autocast``).

bf16 where it is supported (CPU; CUDA capability >= 8.0), fp16 with ``torch.amp.GradScaler``
otherwise. Once a training step was measured (stepwatch), the prediction replays its forward
op by op under autocast's rules (peak.autocast_rule): what the forward leaves for backward,
as run and in 16 bits. Before that, an estimate from the per-layer saved bytes: what layers
that autocast lowers (matmuls, convolutions) and the element-wise layers after them save is
halved; normalisation/softmax layers and saves outside any module stay float32; each lowered
layer also saves a half-precision copy of its weight.
"""

from __future__ import annotations

import ast
from typing import Any

from ...messages.optimize import Suggestion, SuggestionKind
from ..codegen import CannotRewrite, rewrite_autocast
from ..context import Context
from ..names import parse
from .base import mib, predicted, suggestion
from .template import template

LOWERED = {
    "Linear",
    "NonDynamicallyQuantizableLinear",
    "LazyLinear",
    "Bilinear",
    "Conv1d",
    "Conv2d",
    "Conv3d",
    "ConvTranspose1d",
    "ConvTranspose2d",
    "ConvTranspose3d",
    "Conv1D",  # Hugging Face GPT-2 (addmm)
    "MultiheadAttention",
}
KEPT_FP32 = {
    "LayerNorm",
    "GroupNorm",
    "RMSNorm",
    "BatchNorm1d",
    "BatchNorm2d",
    "BatchNorm3d",
    "Softmax",
    "LogSoftmax",
    "Embedding",
    "CrossEntropyLoss",
    "NLLLoss",
    "MSELoss",
    "",
}
COST = ("usually faster; small numeric differences (bf16 keeps float32's range)", None)
#: x86 flags of native bf16 arithmetic; without them CPU bf16 ops are converted to and from
#: float32 around every kernel (on a 4-layer encoder on an AVX2 CPU: 10-15x slower)
CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
CPUINFO = "/proc/cpuinfo"


def cpu_bf16(cpuinfo: str = CPUINFO) -> bool | None:
    """Whether this x86 CPU has native bf16 arithmetic (``None``: not known here)."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.partition(":")[2].split())
                    return any(flag in flags for flag in CPU_BF16_FLAGS)
    except OSError:
        return None
    return None


def cpu_cost(native: bool | None) -> tuple[str, float | None]:
    """The bf16 autocast cost on CPU: its speed depends on the processor."""
    if native:
        return COST
    if native is None:
        return (
            "speed depends on the CPU: faster only with native bf16 instructions "
            "(AVX512-BF16 / AMX), otherwise slower; small numeric differences",
            None,
        )
    return (
        "slower on this CPU: it has no native bf16 instructions (AVX512-BF16 / AMX), "
        "so bf16 ops convert to and from float32 (often several times the step time); "
        "small numeric differences",
        None,
    )


def precision(ctx: Context) -> tuple[str, str, bool] | None:
    """``(device_type, dtype expression, needs GradScaler)`` for the model's device."""
    torch = ctx.torch
    if ctx.device == "cpu":
        return "cpu", "torch.bfloat16", False
    if ctx.device.startswith("cuda"):
        try:
            major, _ = torch.cuda.get_device_capability(ctx.device)
        except Exception:
            return None
        if major >= 8:
            return "cuda", "torch.bfloat16", False
        return "cuda", "torch.float16", True
    return None


def replayed(ctx: Context) -> bool:
    """A training step was measured, with its forward replayed under autocast."""
    return ctx.step is not None and ctx.step.autocast[0] > 0


def predict_from_step(ctx: Context) -> tuple[int, int, list[str]] | None:
    """(before, after, facts) from the measured step's forward replayed under autocast op by
    op (stepwatch: what it left for backward, as run and as autocast would leave it), or
    None before a step was measured."""
    if ctx.step is None or not replayed(ctx):
        return None
    real, low = ctx.step.autocast
    before = ctx.activation_bytes
    saving = real - low
    facts = [
        f"the measured training step's forward left {mib(real)} for backward; replayed op by "
        f"op under autocast (matmuls and convolutions in 16 bits, what follows them in their "
        f"dtype, losses in float32, 16-bit copies of the float32 inputs they cast): "
        f"{mib(low)}"
    ]
    return before, before - saving, facts


def predict(ctx: Context) -> tuple[int, int, list[str]]:
    """(before, after, facts): from the measured step where there is one, else estimated
    from the per-layer rows."""
    measured = predict_from_step(ctx)
    if measured is not None:
        return measured
    before = after = lowered = weights = 0
    for row in ctx.layers:
        saved = int(row["peak_saved_bytes"])
        before += saved
        kind = row["type"] if row["path"] != "<other>" else ""
        if kind in KEPT_FP32:
            after += saved
            continue
        after += saved // 2
        lowered += saved
        if kind in LOWERED and saved:
            weights += int(row["param_bytes"]) // 2
    after += weights
    facts = [
        f"{mib(lowered)} of the {mib(before)} saved by the model's layers in training cell "
        f"[{ctx.training.execution_count if ctx.training else '?'}] are float32 tensors "
        "of layers that autocast runs in 16 bits (or that follow them)",
    ]
    if weights:
        facts.append(f"autocast saves 16-bit copies of the weights it casts: +{mib(weights)}")
    return before, after, facts


def autocast_turned_off(source: str) -> bool:
    """Every autocast call in ``source`` passes ``enabled=False`` (a literal)."""
    tree = parse(source)
    calls = [
        node
        for node in (ast.walk(tree) if tree is not None else ())
        if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] == "autocast"
    ]
    return bool(calls) and all(
        any(
            kw.arg == "enabled" and isinstance(kw.value, ast.Constant) and kw.value.value is False
            for kw in call.keywords
        )
        for call in calls
    )


def _param_dtype(model: Any) -> Any:
    try:
        return next(model.parameters()).dtype
    except Exception:
        return None


def suggest(ctx: Context) -> list[Suggestion]:
    if not ctx.layers or ctx.model is None or ctx.training is None:
        return []
    if "autocast(" in ctx.training.source or ".amp." in ctx.training.source:
        if autocast_turned_off(ctx.training.source):
            ctx.notes.append(
                "mixed precision: the training cell's autocast is turned off (enabled=False): "
                "turning it on is the change to try (no rewrite offered around it)"
            )
        else:
            ctx.notes.append("mixed precision: the training cell already uses autocast")
        return []
    if _param_dtype(ctx.model) != ctx.torch.float32:
        return []
    chosen = precision(ctx)
    if chosen is None:
        ctx.notes.append(f"mixed precision: not offered for device {ctx.device}")
        return []
    device_type, dtype, scaler = chosen
    before, after, facts = ctx.memoized("autocast", lambda: predict(ctx))
    why = list(facts)
    if before - after < max(1, before // 50):
        if after < before:
            note = (
                f"it would save {mib(before - after)}, under 2% of the {mib(before)} of "
                "saved activations"
            )
        elif replayed(ctx) and after == before:
            note = (
                "replayed under autocast, the measured step would keep as much for backward "
                "(what it keeps is not made by ops that autocast lowers)"
            )
        elif replayed(ctx):
            note = (
                f"replayed under autocast, the measured step would keep {mib(after - before)} "
                "more for backward (its 16-bit copies of weights and inputs outweigh what it "
                "halves)"
            )
        else:
            note = "the measured layers would not save less with it"
        ctx.notes.append(f"mixed precision: not offered, {note}")
        return []
    sid = "autocast:fp16" if scaler else "autocast:bf16"
    short = "fp16 + GradScaler" if scaler else "bf16"
    try:
        if ctx.region is None:
            raise CannotRewrite("no `<loss>.backward()` statement found")
        code = rewrite_autocast(ctx.training.source, ctx.region, device_type, dtype, scaler)
        code = (
            f"# vramscope: {sid}\n"
            f"# Your training cell with {short} autocast around the forward and the loss.\n"
            f"import torch\n{code}"
        )
        kind: SuggestionKind = "rewrite"
    except CannotRewrite as err:
        step = [
            "{opt}.zero_grad()",
            f'with torch.autocast(device_type="{device_type}", dtype={dtype}):',
            "    output = {model}({batch})",
            "    loss = {loss}",
        ]
        if scaler:
            step += ["scaler.scale(loss).backward()", "scaler.step({opt})", "scaler.update()"]
        else:
            step += ["loss.backward()", "{opt}.step()"]
        setup = f'scaler = torch.amp.GradScaler("{device_type}")\n' if scaler else ""
        code = template(ctx, sid, str(err), step, setup)
        kind = "template"
    title = f"Mixed precision: {short} autocast on {ctx.device}"
    # no step-peak figure: scaling the measured step's non-gradient bytes by the forward's
    # ratio came within 1.2% on an LSTM and a U-Net but 41-45% over on BERT and GPT-2 (16-bit
    # copies and float32 temporaries come and go in backward)
    pred = predicted(before, after, before - after, None)
    cost: tuple[str, float | None]
    if scaler:
        cost = ("faster on tensor cores; GradScaler guards fp16 underflow", None)
    else:
        cost = cpu_cost(cpu_bf16()) if device_type == "cpu" else COST
    return [suggestion(sid, "autocast", title, why, pred, cost, kind, code, None, ctx.training.ref)]

"""``vramscope.estimate``: training memory per GPU for a model or a parameter count."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .measured import Measurement
from .optimizers import get_optimizer, state_bytes
from .precisions import get_precision
from .scaling import scale as scale_activations
from .setup import MeasuredSetup
from .sharding import Parts, get_gpus, get_offload, get_stage, per_gpu

_SUFFIXES = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "g": 10**9, "t": 10**12}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*([kmbgt]?)\s*$", re.IGNORECASE)
PARTS = ("parameters", "gradients", "optimizer_state", "master_weights", "activations")


@dataclass(frozen=True)
class Estimate:
    """Bytes per GPU of each part of training memory (``total`` is their sum)."""

    param_count: int
    precision: str
    optimizer: str
    zero_stage: int
    n_gpus: int
    offload: list[str]
    batch_size: int | None
    seq_len: int | None
    parameters: int
    gradients: int
    optimizer_state: int
    master_weights: int
    activations: int
    total: int
    #: bytes of this GPU's share moved to host memory by ``offload``
    cpu_offloaded: int
    #: "measured" (scaled from the model's saved-for-backward bytes) or "none"
    activation_source: str
    activation_per_sample: float | None
    model: str | None = None
    notes: list[str] = field(default_factory=list)
    #: since 1.1: the dtype the activations were measured at, and the factor applied to them
    #: for this precision's compute dtype (None without a measurement)
    activation_dtype: str | None = None
    activation_scale: float | None = None
    #: since 1.1: what the model's setup measures as (a model estimate only)
    measured: MeasuredSetup | None = None

    @property
    def model_states(self) -> int:
        """Parameters, gradients, optimizer state and master weights (no activations)."""
        return self.total - self.activations

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __repr__(self) -> str:
        rows = [f"vramscope.Estimate: {self.param_count:,} parameters, {self._setup()}"]
        for part in (*PARTS, "total"):
            value = int(getattr(self, part))
            rows.append(f"  {part.replace('_', ' '):<16}{_gb(value):>14}")
        if self.cpu_offloaded:
            rows.append(f"  {'on the CPU':<16}{_gb(self.cpu_offloaded):>14}")
        rows.append(f"  activations: {self.activation_source}")
        rows.extend(f"  note: {note}" for note in self.notes)
        return "\n".join(rows)

    def _setup(self) -> str:
        parts = [self.precision, self.optimizer]
        if self.n_gpus > 1 or self.zero_stage:
            parts.append(f"ZeRO-{self.zero_stage} over {self.n_gpus} GPU(s)")
        if self.offload:
            parts.append(f"offload {'+'.join(self.offload)}")
        return ", ".join(parts) + " (bytes per GPU)"


def _gb(nbytes: int) -> str:
    return f"{nbytes / 1e9:,.2f} GB"


def parse_param_count(value: object) -> int:
    """A parameter count from an int, a float (``7e9``) or a string (``"7B"``, ``"125M"``)."""
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and math.isfinite(value):
        number = round(value)
    elif isinstance(value, str):
        match = _SIZE.match(value.replace(",", "").replace("_", ""))
        if match:
            number = round(float(match.group(1)) * _SUFFIXES[match.group(2).lower()])
    if number is None or number < 1:
        raise ValueError(
            f"expected an nn.Module or a parameter count (an integer, or a size such as "
            f"'7B', '125M', '350k'), got {value!r}"
        )
    return number


def _positive_or_none(name: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a whole number >= 1 or None, got {value!r}")
    return value


def module_params(model: Any) -> tuple[int, list[list[int]]]:
    """Parameter count (shared parameters once) and shapes of an ``nn.Module``."""
    count = 0
    shapes: list[list[int]] = []
    for p in model.parameters():
        count += int(p.numel())
        shapes.append([int(s) for s in p.shape])
    return count, shapes


def compute(
    param_count: int,
    *,
    shapes: Sequence[Sequence[int]] | None = None,
    optimizer: object = "adamw",
    precision: object = "bf16-mixed",
    batch_size: object = None,
    seq_len: object = None,
    zero_stage: object = 0,
    n_gpus: object = 1,
    offload: object = None,
    measurement: Measurement | None = None,
    model: str | None = None,
    setup: MeasuredSetup | None = None,
) -> Estimate:
    """The estimate for ``param_count`` parameters; ValueError for an unknown name or value."""
    prec = get_precision(precision)
    opt = get_optimizer(optimizer)
    stage = get_stage(zero_stage)
    gpus = get_gpus(n_gpus)
    moved = get_offload(offload, stage)
    batch = _positive_or_none("batch_size", batch_size)
    seq = _positive_or_none("seq_len", seq_len)
    notes: list[str] = []

    opt_bytes, note = state_bytes(opt, prec, param_count, shapes)
    if note:
        notes.append(note)
    full = Parts(
        parameters=param_count * prec.param_bytes,
        gradients=param_count * prec.grad_bytes,
        optimizer_state=opt_bytes,
        master_weights=param_count * prec.master_bytes,
    )
    share, host = per_gpu(full, stage, gpus, moved)
    if stage == 3:
        notes.append(
            "stage 3 also gathers each layer's full parameters while it runs "
            "(transient, not counted)"
        )

    activations, per_sample, scaling = _activations(measurement, batch, seq, prec.name, notes)
    _setup_notes(setup, opt.name, param_count, opt_bytes, notes)
    total = (
        share.parameters
        + share.gradients
        + share.optimizer_state
        + share.master_weights
        + activations
    )
    return Estimate(
        param_count=param_count,
        precision=prec.name,
        optimizer=opt.name,
        zero_stage=stage,
        n_gpus=gpus,
        offload=sorted(moved),
        batch_size=batch
        if batch is not None
        else (measurement.batch_size if measurement else None),
        seq_len=seq,
        parameters=share.parameters,
        gradients=share.gradients,
        optimizer_state=share.optimizer_state,
        master_weights=share.master_weights,
        activations=activations,
        total=total,
        cpu_offloaded=host,
        activation_source="measured" if measurement is not None else "none",
        activation_per_sample=per_sample,
        model=model,
        notes=notes,
        activation_dtype=scaling.measured_dtype if scaling else None,
        activation_scale=round(scaling.factor, 6) if scaling else None,
        measured=setup,
    )


def _setup_notes(
    setup: MeasuredSetup | None, optimizer: str, count: int, opt_bytes: int, notes: list[str]
) -> None:
    if setup is None or setup.optimizer_variable is None:
        return
    per_param = setup.optimizer_state_bytes_per_param
    found = f"optimizer `{setup.optimizer_variable}` ({setup.optimizer_class})"
    if per_param is None:
        notes.append(f"{found} has no state yet (no step taken): its bytes not measured")
        return
    text = f"{found} keeps {per_param:.2f} bytes of state per parameter (measured)"
    if setup.optimizer == optimizer:
        text += f"; counted here: {opt_bytes / count:.2f} before sharding"
    notes.append(text)


def _activations(
    measured: Measurement | None,
    batch: int | None,
    seq: int | None,
    precision: str,
    notes: list[str],
) -> tuple[int, float | None, Any]:
    if measured is None:
        notes.append(
            "activations not included: no measurement (run a forward and backward of the "
            "model with vramscope loaded, then estimate from the model itself)"
        )
        return 0, None, None
    scaling = scale_activations(measured.by_dtype, precision)
    per_sample = measured.per_sample * scaling.factor
    scale = float(batch if batch is not None else measured.batch_size)
    notes.append(
        f"activations scaled from the {measured.saved_bytes:,} bytes {measured.model!r} saved "
        f"for backward at batch size {measured.batch_size}"
    )
    if seq is not None:
        if measured.seq_len:
            scale *= seq / measured.seq_len
            notes.append(
                f"scaled linearly from the measured sequence length {measured.seq_len} "
                "(attention scores grow with its square)"
            )
        else:
            notes.append("seq_len ignored: the measured output has no sequence dimension")
    notes.append(scaling.note)
    return round(per_sample * scale), per_sample, scaling

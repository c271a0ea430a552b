"""What the techniques look at: the model, its measured per-layer saved bytes from the
training cell's run, the training cell's code and the user's names."""

from __future__ import annotations

import ast
import keyword
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar, cast

from .names import CellSource, Names, StepRegion, find_names, parse, step_region
from .outcomes import CellRun, own_peaks
from .peakmodel import Unit, step_peak
from .stepwatch import StepFigures

T = TypeVar("T")


@dataclass
class Context:
    torch: Any
    ns: dict[str, Any]
    model_name: str | None
    model: Any  # torch.nn.Module | None
    device: str
    layers: list[dict[str, Any]]  # insight rows of the training run (the model's layers)
    holders: list[dict[str, Any]]
    training: CellSource | None
    tree: ast.Module | None
    region: StepRegion | None
    names: Names
    batch_size: int | None
    cells: list[CellSource] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    step: StepFigures | None = None  # the training run's first step, measured
    #: figures worked out from the model's structure and the measured rows, kept by the
    #: advisor across advise() calls while neither changed (Advisor._memo_for)
    memo: dict[Any, Any] = field(default_factory=dict)
    _grads_seen: bool = False
    _subtree: dict[str, int] | None = None
    _rows: dict[str, dict[str, Any]] | None = None
    _plain_units: list[Unit] | None = None
    _figures: list[tuple[str, int, int, int]] | None = None

    def subtree_bytes(self, path: str) -> int:
        """Peak saved bytes of a module and its descendants during the training run (rows
        come in named_modules order: a module's descendants follow it at once)."""
        if self._subtree is None:
            self._subtree = {r["path"]: i for i, r in enumerate(self.layers)}
        start = self._subtree.get(path)
        if start is None:
            return 0
        rows = self.layers
        total = int(rows[start]["peak_saved_bytes"])
        prefix = path + "." if path else ""
        for i in range(start + 1, len(rows)):
            if not rows[i]["path"].startswith(prefix):
                break
            total += int(rows[i]["peak_saved_bytes"])
        return total

    def plain_peak(self, persistent: bool) -> int:
        """The peak model's forward + backward peak of the rows as they are."""
        return self.memoized(
            ("plain_peak", persistent), lambda: step_peak(self.units(), persistent)
        )

    def row(self, path: str) -> dict[str, Any] | None:
        if self._rows is None:
            self._rows = {r["path"]: r for r in self.layers}
        return self._rows.get(path)

    @property
    def persistent_grads(self) -> bool:
        """Gradients stay allocated through the forward (zeroed in place, or never)."""
        src = self.training.source if self.training else ""
        return "set_to_none=False" in src or "zero_grad(" not in src

    def _grads(self, row: dict[str, Any]) -> int:
        if self._grads_seen:
            return int(row.get("grad_bytes", 0))
        return int(row.get("param_bytes", 0))  # before any backward: all trainable

    @property
    def _elem(self) -> int:
        try:
            return int(next(self.model.parameters()).element_size())
        except Exception:
            return 4

    def units(self, blocks: dict[str, int] | None = None) -> list[Unit]:
        """The rows in forward order as peak-model units; ``blocks``: checkpointed block
        path -> its input bytes (one unit each, its activations recomputed in backward).
        Once a step was measured, one more unit stands for what the rows do not show
        (:meth:`outside`)."""
        if not blocks:
            if self._plain_units is None:
                self._plain_units = self._with_outside(self._units({}))
            return self._plain_units
        return self._with_outside(self._units(blocks))

    def _with_outside(self, units: list[Unit]) -> list[Unit]:
        outside = self.outside()
        return [*units, outside] if outside is not None else units

    def outside(self) -> Unit | None:
        """What the measured step had beyond the model's rows, as the unit backward visits
        first: kept, the bytes live when backward started that no row saved (what the loss
        saved, the model's output); transient, the rest of the measured peak the rows do not
        explain (the loss's backward: the gradients of the logits and of their
        log-softmax), put where backward starts, so that the rows and this unit peak as the
        step was measured. None before a step is measured."""
        step = self.step
        if step is None or not step.autocast[0]:
            return None

        def compute() -> Unit:
            saved = sum(k for _, k, _, _ in self._row_figures())
            kept = max(0, step.autocast[0] - saved)
            plain = step_peak([*self._units({}), Unit(kept, 0, [], 0)], self.persistent_grads)
            if plain >= step.peak:
                return Unit(kept, 0, [], 0)
            # the peak the rows miss, where backward starts: the model then peaks as measured
            return Unit(kept, 0, [], step.peak - saved - kept)

        return self.memoized(("outside", step.peak, step.autocast[0]), compute)

    def _row_figures(self) -> list[tuple[str, int, int, int]]:
        """Per row, once: (path, kept, gradient bytes, transient) for the peak model."""
        if self._figures is None:
            self._grads_seen = any(int(r.get("grad_bytes", 0)) for r in self.layers)
            figures = []
            previous_out = 0
            elem = self._elem
            rows = self.layers
            last = len(rows) - 1
            for i, row in enumerate(rows):
                path = row["path"]
                # rows come in named_modules order: a module's children follow it at once
                leaf = path != "" and (i == last or not rows[i + 1]["path"].startswith(path + "."))
                out = _shape_bytes(row.get("output_shape"), elem) if leaf else 0
                kept = int(row["peak_saved_bytes"])
                figures.append((path, kept, self._grads(row), out + previous_out))
                if leaf:
                    previous_out = out
            self._figures = figures
        return self._figures

    def _units(self, blocks: dict[str, int]) -> list[Unit]:
        units: list[Unit] = []
        block: Unit | None = None
        block_prefix = ""
        for path, kept, grads, transient in self._row_figures():
            if block is not None and path.startswith(block_prefix):
                if kept or grads or transient:
                    block.inner.append(Unit(kept, grads, [], transient))
            elif path in blocks:
                block = Unit(blocks[path], 0, [Unit(kept, grads, [], transient)])
                block_prefix = path + "."
                units.append(block)
            else:
                block = None
                # a row with nothing saved, no gradients and no transient never sets the
                # peak (the row after it in backward is at least as high): left out
                if kept or grads or transient:
                    units.append(Unit(kept, grads, [], transient))
        return units

    def memoized(self, key: Any, compute: Callable[[], T]) -> T:
        """``compute()``, once per model structure and measured rows (``memo``)."""
        if key not in self.memo:
            self.memo[key] = compute()
        return cast(T, self.memo[key])

    @property
    def activation_bytes(self) -> int:
        return self.memoized(
            "activation_bytes", lambda: sum(int(r["peak_saved_bytes"]) for r in self.layers)
        )

    def expr(self, path: str) -> str:
        """Python text reaching submodule ``path`` of the model, in the user's names."""
        text = self.names.model or code_name(self.model_name) or "model"
        for part in path.split(".") if path else []:
            if part.isdecimal() and part.isascii():
                text += f"[{part}]"
            elif part.isidentifier() and not keyword.iskeyword(part):
                text += f".{part}"
            else:  # a module added under any other string: a literal, never raw code
                text += f".get_submodule({part!r})"
        return text


def _shape_bytes(shape: Any, elem: int) -> int:
    if not shape:
        return 0
    count = 1
    for dim in shape:
        count *= int(dim)
    return count * elem


def code_name(name: str | None) -> str | None:
    """Python text for the namespace entry ``name``: the name when it is an identifier,
    else ``globals()[<literal>]`` (a key set through ``globals()`` may hold any text)."""
    if name is None or (name.isidentifier() and not keyword.iskeyword(name)):
        return name
    return f"globals()[{name!r}]"


def model_device(model: Any) -> str:
    try:
        device = next(model.parameters()).device
    except Exception:
        return "cpu"
    if device.type == "cuda":
        return f"cuda:{device.index if device.index is not None else 0}"
    return str(device.type)


def build_context(
    torch: Any,
    ns: dict[str, Any],
    cells: list[CellSource],
    training_run: CellRun | None,
    model_name: str | None,
    fallback_insight: dict[str, Any] | None,
    baseline: dict[str, Any] | None = None,
) -> Context:
    """``baseline``: the insight before the training run's; what it still held saved then
    (a graph kept from an earlier cell) is in the run's peaks without being the run's own."""
    training = training_run.cell if training_run else None
    tree = parse(training.source) if training else None
    region = step_region(tree) if tree is not None else None
    names = find_names(training.source, tree, ns, torch) if training and tree else Names()
    insight = training_run.insight if training_run and training_run.insight else None
    notes: list[str] = []
    if model_name is None:
        measured = (insight or {}).get("model")
        # a watched module without a namespace name is reported as "<Class>": the training
        # cell's own expression (trainer.model) names it better
        if not measured or (measured.startswith("<") and names.model):
            measured = names.model
        model_name = measured
    model = lookup(ns, model_name, torch)
    if model is None and model_name is None:
        model_name, model = _largest(ns, torch)
    layers: list[dict[str, Any]] = []
    measured = (insight or {}).get("model")
    if insight is not None and (measured == model_name or _same_module(measured, model)):
        layers = own_peaks(list(insight.get("layers", ())), baseline)
    elif training is None:
        notes.append(
            "no training cell recorded yet (a cell calling .backward() and .step()): run it "
            "once with vramscope loaded to get predictions"
        )
    else:
        notes.append(
            f"the training cell [{training.execution_count}] was not measured for "
            f"{model_name!r}: run it again with vramscope loaded to get predictions"
        )
    holders = list((fallback_insight or insight or {}).get("holders", ()))
    if names.model is None and model_name is not None:
        names.model = code_name(model_name)
    step = training_run.step if training_run else None
    if layers and step is None:
        notes.append(
            "the training step's peak is not measured yet (it is from the next run of the "
            "training cell on): step-peak savings are estimated from the per-layer figures; "
            "run the training cell once more before applying a suggestion, so that its step "
            "peak is compared before and after"
        )
    from .names import batch_size_of

    return Context(
        torch=torch,
        ns=ns,
        model_name=model_name,
        model=model,
        device=model_device(model) if model is not None else "cpu",
        layers=layers,
        holders=holders,
        training=training,
        tree=tree,
        region=region,
        names=names,
        batch_size=batch_size_of(names, ns, torch),
        cells=cells,
        notes=notes,
        step=step,
    )


def _same_module(measured: str | None, model: Any) -> bool:
    """Insight names a watched module that has no namespace name ``<ClassName>``."""
    return model is not None and measured == f"<{type(model).__name__}>"


def lookup(ns: dict[str, Any], name: str | None, torch: Any) -> Any:
    if not name:
        return None
    tree = parse(name)
    if tree is None or len(tree.body) != 1 or not isinstance(tree.body[0], ast.Expr):
        return None
    from .names import resolve

    obj = resolve(tree.body[0].value, ns)
    return obj if isinstance(obj, torch.nn.Module) else None


def _largest(ns: dict[str, Any], torch: Any) -> tuple[str | None, Any]:
    best: tuple[int, str | None, Any] = (-1, None, None)
    for name, value in list(ns.items()):
        if name.startswith("_") or not isinstance(value, torch.nn.Module):
            continue
        size = sum(p.numel() for p in value.parameters())
        if size > best[0]:
            best = (size, name, value)
    return best[1], best[2]

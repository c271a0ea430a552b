"""After-cell insight costs in proportion to what the cell ran (issue 19): a cell that ran no
model walks no model; what changes a model without a forward is still seen; the figures are
those of a full walk."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from vramscope.insight import InsightEngine, reuse  # noqa: E402
from vramscope.insight.shown import QUIET_BYTES  # noqa: E402

PACKAGE = Path(__file__).resolve().parents[2] / "python_bridge" / "vramscope"
MIB = 1 << 20


class Walks:
    """Counts calls of the module-tree walks (``modules``, ``named_modules``, ...)."""

    NAMES = ("modules", "named_modules", "parameters", "named_parameters", "buffers")

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        for name in self.NAMES:
            original = getattr(nn.Module, name)
            monkeypatch.setattr(nn.Module, name, self._counting(original))

    def _counting(self, original: Any) -> Any:
        def walk(module: nn.Module, *args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return original(module, *args, **kwargs)

        return walk


class Reading:
    """A device reading the test sets: the CPU total the gate compares."""

    def __init__(self) -> None:
        self.used = 100 * MIB

    def __call__(self, dev: str) -> dict[str, int] | None:
        return {"used": self.used} if dev == "cpu" else None


@pytest.fixture
def reading() -> Reading:
    return Reading()


@pytest.fixture
def ns() -> dict[str, Any]:
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(64, 64) for _ in range(80)])  # 160 parameters
    return {"model": model, "opt": torch.optim.Adam(model.parameters()), "x": torch.randn(4, 64)}


@pytest.fixture
def engine(ns: dict[str, Any], reading: Reading) -> Iterator[InsightEngine]:
    eng = InsightEngine(namespace=ns, total_fn=reading, min_holder_bytes=1024)
    eng.install()
    yield eng
    eng.uninstall()


def cell(engine: InsightEngine, code: Any = None) -> dict[str, Any]:
    engine.begin_cell()
    if code is not None:
        code()
    return engine.after_cell(1000.0)


def train(ns: dict[str, Any]) -> None:
    ns["model"](ns["x"]).square().mean().backward()
    ns["opt"].step()


def figures(insight: dict[str, Any]) -> dict[str, Any]:
    """What must not differ between a reused and a walked insight (the measured total and
    what follows from it aside)."""
    cpu = dict(insight["breakdown"]["cpu"])
    for key in ("total_bytes", "other", "other_tensors", "runtime_bytes", "clamped_bytes"):
        cpu.pop(key, None)
    return {
        "model": insight["model"],
        "models": insight["models"],
        "layers": insight["layers"],
        "cpu": cpu,
        "holders": insight["holders"],
    }


def test_a_cell_that_ran_no_model_walks_none(
    engine: InsightEngine, ns: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    trained = cell(engine, lambda: train(ns))
    assert trained["breakdown"]["cpu"]["gradients"] > 0
    walks = Walks(monkeypatch)
    for _ in range(5):
        insight = cell(engine)
    assert walks.calls == 0  # the previous code walked every model after every cell
    assert figures(insight)["cpu"] == figures(trained)["cpu"]
    assert figures(insight) == figures(engine.snapshot(None))  # a full walk agrees


def after_cell_walks(engine: InsightEngine, walks: Walks, code: Any = None) -> dict[str, Any]:
    """A cell whose after-cell insight alone is counted (a measured forward walks its
    model's tree itself, to exclude its parameters)."""
    engine.begin_cell()
    if code is not None:
        code()
    walks.calls = 0
    return engine.after_cell(1000.0)


def test_a_forward_fills_the_rows_without_a_walk_and_the_figures_follow(
    engine: InsightEngine, ns: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cell that ran the model costs the rows' new figures, not a walk of the models (issue
    19); the figures are those of a full walk."""
    cell(engine, lambda: train(ns))
    cell(engine)
    walks = Walks(monkeypatch)
    insight = after_cell_walks(engine, walks, lambda: ns["model"](ns["x"]).sum().item())
    assert walks.calls == 0
    # each Linear saved its input, 4 x 64 float32 (x too), and freed it with the graph
    rows = insight["layers"]
    assert sum(row["peak_saved_bytes"] for row in rows) == 80 * 4 * 64 * 4
    assert sum(row["saved_bytes"] for row in rows) == 0
    again = after_cell_walks(engine, walks)  # peaks start again from the live figures
    assert walks.calls == 0
    assert sum(row["peak_saved_bytes"] for row in again["layers"]) == 0
    assert figures(again) == figures(engine.snapshot(None))
    # a graph kept outside the namespace: live figures (the holders are scanned again)
    kept: list[Any] = [None]
    insight = cell(engine, lambda: kept.append(ns["model"](ns["x"]).sum()))
    assert sum(row["saved_bytes"] for row in insight["layers"]) == 80 * 4 * 64 * 4
    assert figures(insight)["layers"] == figures(engine.snapshot(None))["layers"]


def test_a_module_swapped_in_place_is_walked_at_the_next_forward(
    engine: InsightEngine, ns: dict[str, Any]
) -> None:
    """peft-style surgery (a submodule replaced inside the same model, a few bytes): the
    rows are walked again once a forward is measured, not filled into the old ones."""
    cell(engine, lambda: train(ns))
    ns["model"][3] = nn.Sequential(nn.Linear(64, 64), nn.Identity())
    insight = cell(engine, lambda: ns["model"](ns["x"]).sum().backward())
    assert [r["path"] for r in insight["layers"]][3:7] == ["2", "3", "3.0", "3.1"]
    walked = engine.snapshot(None)["layers"]
    assert [(r["path"], r["param_bytes"]) for r in insight["layers"]] == [
        (r["path"], r["param_bytes"]) for r in walked
    ]


def test_changes_without_a_forward_are_seen(
    engine: InsightEngine, ns: dict[str, Any], reading: Reading
) -> None:
    cell(engine, lambda: train(ns))
    # zero_grad frees the gradients: the total moves by their bytes, past the gate
    grads = cell(engine)["breakdown"]["cpu"]["gradients"]
    assert grads > MIB
    ns["model"].zero_grad(set_to_none=True)
    reading.used -= grads
    assert cell(engine)["breakdown"]["cpu"]["gradients"] == 0
    # a name bound to another object
    ns["small"] = nn.Linear(4, 4)
    names = [m["name"] for m in cell(engine)["models"]]
    assert names == ["model", "small"]
    # a new name that holds a tensor is a holder at once
    ns["big"] = torch.zeros(MIB // 4)
    assert "big" in [h["name"] for h in cell(engine)["holders"]]
    # the reported model chosen by the user
    engine.watch("small")
    assert cell(engine)["model"] == "small"


def test_below_the_gate_the_walk_waits_for_a_reason(
    engine: InsightEngine, ns: dict[str, Any], reading: Reading
) -> None:
    cell(engine, lambda: train(ns))
    before = cell(engine)["breakdown"]["cpu"]["gradients"]
    # a gradient moved to a storage 10 times its size: no name, state or gradient count
    # changes, only memory
    weight = ns["model"][0].weight
    weight.grad = torch.zeros(10 * weight.numel())[: weight.numel()].view_as(weight)
    reading.used += reuse.GATES["cpu"]  # not past it: the kept figures stay
    assert cell(engine)["breakdown"]["cpu"]["gradients"] == before
    reading.used += reuse.GATES["cpu"] + 1  # past it since the last insight
    assert cell(engine)["breakdown"]["cpu"]["gradients"] == before + 9 * weight.nbytes


def test_a_drift_in_small_steps_is_walked_at_the_drift_gate(
    engine: InsightEngine, ns: dict[str, Any], reading: Reading, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The total creeping up a little every cell (IPython's history) is not a reason to walk
    the models after each 1 MiB of it: only past the drift gate since the walk, or past the
    gate between two insights."""
    cell(engine, lambda: train(ns))
    cell(engine)
    walks = Walks(monkeypatch)
    step = reuse.GATES["cpu"] // 2
    steps = reuse.DRIFT_GATES["cpu"] // step
    for _ in range(steps):  # 16 MiB in all, in steps of half the gate
        reading.used += step
        cell(engine)
    assert walks.calls == 0
    reading.used += step
    cell(engine)  # past the drift gate since the walk
    assert walks.calls > 0
    walks.calls = 0
    cell(engine)
    assert walks.calls == 0
    reading.used += reuse.GATES["cpu"] + 1  # one step past the gate
    cell(engine)
    assert walks.calls > 0


def test_the_drift_gate_counts_from_the_walk_not_from_holders_scans(
    engine: InsightEngine, ns: dict[str, Any], reading: Reading, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name rebound in every cell rescans the holders (which reads the totals again), but
    the drift is still measured from the walk: the models are walked again once it passes
    the drift gate, not never."""
    cell(engine, lambda: train(ns))
    cell(engine)
    computed = []  # the models' parts computed again (a holders scan walks them too)
    compute = engine._compute
    monkeypatch.setattr(engine, "_compute", lambda *a: computed.append(1) or compute(*a))
    step = reuse.GATES["cpu"] // 2
    cells = 0
    while not computed and cells < 100:
        reading.used += step
        ns["out"] = torch.zeros(1)  # a name bound anew: the holders are scanned again
        cell(engine)
        cells += 1
    assert cells == reuse.DRIFT_GATES["cpu"] // step + 1


def test_small_models_are_walked_after_every_cell(
    reading: Reading, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    ns: dict[str, Any] = {"model": model}
    engine = InsightEngine(namespace=ns, total_fn=reading)
    engine.install()
    try:
        cell(engine, lambda: model(torch.randn(2, 8)).sum().backward())
        model.zero_grad(set_to_none=True)  # 336 bytes: far below the gate
        assert cell(engine)["breakdown"]["cpu"]["gradients"] == 0
    finally:
        engine.uninstall()


def test_a_continued_holders_scan_walks_no_model(
    engine: InsightEngine, ns: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    cell(engine, lambda: train(ns))
    ns.update({f"t{i}": torch.zeros(512) for i in range(2000)})
    engine.begin_cell()
    first = engine.after_cell(0.001)  # a budget that stops the scan soon
    assert first.get("partial")
    walks = Walks(monkeypatch)
    last = first
    for _ in range(200):
        resumed = engine.continue_scan(0.5)
        if resumed is None:
            break
        last = resumed
    assert walks.calls <= 1  # the module holder itself, once (holders.walk), not per slice
    assert not last.get("partial")
    assert figures(last) == figures(engine.snapshot(None))


def imports(module: str) -> set[str]:
    """The vramscope modules a module of the package imports (relative imports resolved)."""
    path = PACKAGE / (module.replace(".", "/") + ".py")
    package = module.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)]
            found.add(".".join([*base, *([node.module] if node.module else [])]))
    return found


def test_the_baseline_and_the_import_watch_do_not_import_insight_link() -> None:
    """insight_link -> insight -> torch_baseline -> torch_import, one way."""
    assert "insight_link" not in imports("torch_baseline")
    assert imports("torch_baseline") >= {"torch_import"}
    assert not {"insight_link", "insight", "torch_baseline"} & imports("torch_import")
    assert "torch_baseline" in imports("insight.breakdown")
    assert "torch_import" in imports("insight_link")


def test_the_walks_own_temporaries_do_not_count_as_a_change(
    ns: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The totals compared with are read once the walk's temporaries are freed (the storage
    cache alone is ~15 MB at 10,000 modules): else every cell would walk again."""
    from vramscope.insight import _torchutil

    def reading(dev: str) -> dict[str, int] | None:
        walking = _torchutil._CACHE is not None and len(_torchutil._CACHE) > 0
        return {"used": 100 * MIB + (8 * MIB if walking else 0)} if dev == "cpu" else None

    engine = InsightEngine(namespace=ns, total_fn=reading, min_holder_bytes=1024)
    engine.install()
    try:
        cell(engine, lambda: train(ns))
        walks = Walks(monkeypatch)
        cell(engine)
        assert walks.calls == 0
    finally:
        engine.uninstall()


def test_a_forward_cell_compares_the_modules_its_forward_walked(
    engine: InsightEngine, ns: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rows' model is checked against the walk its measured forward made anyway, not
    walked again after the cell (``layers.module_ids``: ~20 ms at 10,000 modules)."""
    from vramscope.insight import engine as engine_module

    cell(engine, lambda: train(ns))
    calls: list[int] = []
    original = engine_module.module_ids
    monkeypatch.setattr(engine_module, "module_ids", lambda m: calls.append(1) or original(m))
    insight = cell(engine, lambda: train(ns))
    assert calls == [] and sum(r["peak_saved_bytes"] for r in insight["layers"]) > 0


def test_the_fingerprints_of_a_walk_and_of_module_ids_agree() -> None:
    from vramscope.insight.activations import fingerprint
    from vramscope.insight.layers import module_ids

    shared = nn.Linear(2, 2)
    model = nn.Sequential(shared, nn.Sequential(shared, nn.ReLU()), nn.ModuleList([shared]))
    model.register_module("gone", None)
    assert fingerprint(module_ids(model)) == fingerprint(map(id, model.modules()))
    assert fingerprint(module_ids(model)) != fingerprint(map(id, model[1].modules()))


def test_gradients_cleared_below_the_gate_are_seen(
    engine: InsightEngine, ns: dict[str, Any]
) -> None:
    """``zero_grad()`` frees the gradients; with no memory moved past the gate (the reading
    stays), the optimizer's gradients still tell the claims are stale: also when the first,
    middle and last parameters are frozen (the probe looks among those that train)."""
    for i in (0, 40, 79):
        ns["model"][i].requires_grad_(False)
    cell(engine, lambda: train(ns))
    trained = cell(engine)["breakdown"]["cpu"]["gradients"]
    assert trained == 77 * (64 * 64 + 64) * 4
    ns["opt"].zero_grad(set_to_none=True)
    assert cell(engine)["breakdown"]["cpu"]["gradients"] == 0


def test_a_module_swapped_after_the_cells_forward_is_seen(
    engine: InsightEngine, ns: dict[str, Any]
) -> None:
    """The forward's own walk of the tree is older than a swap later in the same cell."""
    cell(engine, lambda: train(ns))
    insight = cell(engine, lambda: (ns["model"](ns["x"]), ns["model"].__setitem__(79, nn.ReLU())))
    assert (insight["layers"][80]["path"], insight["layers"][80]["type"]) == ("79", "ReLU")


def test_a_symbolic_output_shape_is_left_out() -> None:
    """A jagged nested tensor's size is symbolic: no shape, and the insight is JSON."""

    class Jagged(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x: Any) -> Any:
            y = self.lin(x)
            return torch.nested.nested_tensor([y[:2], y[2:]], layout=torch.jagged)

    ns = {"model": Jagged(), "x": torch.randn(5, 4, requires_grad=True)}
    engine = InsightEngine(namespace=ns)
    engine.install()
    try:
        insight = cell(engine, lambda: ns.__setitem__("out", ns["model"](ns["x"])))
    finally:
        engine.uninstall()
    assert [(r["path"], r["output_shape"]) for r in insight["layers"]] == [
        ("", None),
        ("lin", [5, 4]),
    ]
    json.dumps(insight)


def test_the_same_rows_are_looked_at_once_and_new_rows_again(ns: dict[str, Any]) -> None:
    """After a cell that changed no row the engine hands the same list again: the link says
    so (the runtime's estimator memo and the report's last measured insight skip it); a
    cell that ran the model brings new rows."""
    from types import SimpleNamespace

    from vramscope.insight_link import InsightLink

    link = InsightLink(SimpleNamespace(user_ns=ns, user_ns_hidden={}))

    def link_cell(n: int, code: Any = None) -> dict[str, Any] | None:
        link.begin_cell("c", n, enabled=True)
        if code is not None:
            code()
        link.end_cell(n)
        return link.after_cell(1000.0)

    try:
        trained = link_cell(1, lambda: ns["model"](ns["x"]).sum().backward())
        assert trained is not None and link.rows_changed and link.measured is trained
        reset = link_cell(2)
        assert reset is not None and link.rows_changed  # the peaks reset to the live figures
        rows = reset["layers"]
        # a cell that changes nothing shown gets no insight; one that binds a tensor does,
        # with the same rows
        assert link_cell(3) is None and link.last is reset
        bound = link_cell(3, lambda: ns.__setitem__("t", torch.ones(64 * 1024)))
        assert bound is not None and bound["layers"] is rows and not link.rows_changed
        assert link.measured is trained
        link_cell(4, lambda: ns["model"](ns["x"]).sum().backward())
        assert link.rows_changed and link.measured is not trained
    finally:
        link.close()


class Sliced(nn.Module):
    """The Llama family's forward: ``for layer in self.layers[: n]`` (a new ModuleList of
    the same layers at every call)."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(64, 64) for _ in range(80))  # not "small"
        self.used = 80

    def forward(self, x: Any) -> Any:
        for layer in self.layers[: self.used]:
            x = layer(x).relu()
        return x


def test_a_forward_that_slices_its_layers_changes_no_tree(
    reading: Reading, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slicing registers every layer in the new list: that is no model being built. The
    registration count stays (no walk after a forward cell), the slice gets no hooks, the
    rows are filled exactly; a slice assigned into the model is a change, walked at once."""
    from vramscope.insight import engine as engine_module

    torch.manual_seed(0)
    model = Sliced()
    x = torch.randn(4, 64)
    engine = InsightEngine(namespace={"model": model, "x": x}, total_fn=reading)
    engine.install()
    try:
        cell(engine, lambda: model(x).sum().backward())
        tracker = engine._tracker
        count, hooked = tracker.registrations, dict(tracker._roots._hooks)
        calls: list[int] = []
        original = engine_module.module_ids
        monkeypatch.setattr(engine_module, "module_ids", lambda m: calls.append(1) or original(m))
        insight = cell(engine, lambda: model(x).sum().backward())
        assert tracker.registrations == count and tracker._roots._hooks.keys() == hooked.keys()
        assert calls == []
        # saved, 4 x 64 float32 each: x and the 80 relu outputs (each also the next
        # Linear's input: one storage, counted once)
        assert sum(r["peak_saved_bytes"] for r in insight["layers"]) == 81 * 4 * 64 * 4
        model.layers = model.layers[:2]  # the user's own truncation: the tree changed
        model.used = 2
        insight = cell(engine, lambda: model(x).sum().backward())
        assert tracker.registrations > count
        assert [r["path"] for r in insight["layers"]] == [
            r["path"] for r in engine.snapshot(None)["layers"]
        ]
        assert len([r for r in insight["layers"] if r["path"].startswith("layers.")]) == 2
    finally:
        engine.uninstall()


def test_a_model_wrapped_anew_in_every_cell_is_walked_for_its_parts_once(
    engine: InsightEngine, ns: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model wrapped in a new container in every cell loses its hooks and is adopted again
    at the next cell's start: its parts were marked as children at its first adoption, and
    are not walked again."""
    cell(engine, lambda: train(ns))
    walks = Walks(monkeypatch)
    for _ in range(3):
        ns["wrapped"] = nn.Sequential(ns["model"])  # the model is a child: adopted again
        walks.calls = 0
        engine.begin_cell()
        assert walks.calls == 0
        assert engine._tracker._roots.watched(ns["model"])
        engine.after_cell(1000.0)


class Unhashable(nn.Linear):
    def __eq__(self, other: object) -> bool:  # and so no __hash__
        return self is other


def test_an_unhashable_module_added_to_a_model_is_a_change(
    engine: InsightEngine, ns: dict[str, Any]
) -> None:
    cell(engine, lambda: train(ns))
    model = nn.Sequential(nn.ModuleList([nn.Linear(4, 4)]))  # built with the bridge in
    extra = Unhashable(4, 4)
    tracker = engine._tracker
    count = tracker.registrations
    model[0].append(extra)
    assert tracker.registrations == count + 1


def test_a_cell_that_changes_nothing_shown_needs_no_insight(
    engine: InsightEngine, ns: dict[str, Any], reading: Reading
) -> None:
    """``unchanged`` (the runtime then sends no insight): after a cell that ran nothing and
    moved the total less than QUIET_BYTES; not after one that measured a forward, bound a
    name to a tensor, freed gradients, moved the total, or kept a graph."""

    def train() -> None:
        ns["model"](ns["x"]).sum().backward()
        ns["opt"].step()

    cell(engine, train)
    assert not engine.unchanged()  # the peaks of that forward reset: new rows to show
    cell(engine)
    assert engine.unchanged()
    reading.used += QUIET_BYTES // 2  # IPython's history of a few cells
    assert engine.unchanged()
    changes = {
        "forward": lambda: ns["model"](ns["x"]),
        "bound": lambda: ns.__setitem__("y", torch.ones(8)),
        "zero_grad": lambda: ns["opt"].zero_grad(),
        "moved": lambda: setattr(reading, "used", reading.used + 2 * QUIET_BYTES),
        "graph kept": lambda: ns.__setitem__("y", ns["model"](ns["x"]).sum()),
        "tensor into a list": lambda: ns.__setitem__("bag", [ns["x"]]),
        "appended": lambda: ns["bag"].append(torch.ones(4)),
        "submodule swapped": lambda: ns["model"].__setitem__(1, nn.Linear(64, 64)),
    }
    for what, change in changes.items():
        change()
        assert not engine.unchanged(), what
        cell(engine)
        if not engine.unchanged():  # a forward's peaks reset after its insight: once more
            cell(engine)
        assert engine.unchanged(), what


def test_small_models_get_an_insight_after_every_cell(reading: Reading) -> None:
    """Under 128 model tensors the models are walked after every cell (cheaper than deciding
    not to): ``unchanged`` never skips them."""
    model = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 8))
    ns: dict[str, Any] = {"model": model, "x": torch.randn(2, 8)}
    eng = InsightEngine(namespace=ns, total_fn=reading, min_holder_bytes=1024)
    eng.install()
    try:
        cell(eng, lambda: ns["model"](ns["x"]).sum().backward())
        cell(eng)
        cell(eng)
        assert not eng.unchanged()
    finally:
        eng.uninstall()

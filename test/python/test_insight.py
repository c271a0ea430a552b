"""InsightEngine: exact saved-activation accounting, breakdown, holders, robustness."""

from __future__ import annotations

import gc
import json
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402
from torch.multiprocessing.reductions import StorageWeakRef  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils._pytree import tree_leaves  # noqa: E402

from vramscope.insight import InsightEngine  # noqa: E402
from vramscope.insight.breakdown import cpu_in_use_bytes  # noqa: E402

KIB = 1024


class StorageRecorder(TorchDispatchMode):
    """Test-only ground truth: a weakref to the storage of every op output."""

    def __init__(self) -> None:
        super().__init__()
        self.storages: dict[int, tuple[Any, int]] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                st = t.untyped_storage()
                if st.data_ptr():
                    self.storages[st.data_ptr()] = (StorageWeakRef(st), st.nbytes())
        return out

    def alive_bytes(self, exclude: set[int]) -> int:
        return sum(
            nbytes
            for ptr, (ref, nbytes) in self.storages.items()
            if not ref.expired() and ptr not in exclude
        )


def model_ptrs(model: nn.Module) -> set[int]:
    return {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}


def saved_total(insight: dict[str, Any]) -> int:
    return sum(layer["saved_bytes"] for layer in insight["layers"])


@pytest.fixture
def ns() -> dict[str, Any]:
    return {}


@pytest.fixture
def engine(ns: dict[str, Any]) -> Iterator[InsightEngine]:
    eng = InsightEngine(namespace=ns, min_holder_bytes=1)
    eng.install()
    yield eng
    eng.uninstall()
    assert torch._C._autograd._top_saved_tensors_default_hooks(False) is None


def transformer() -> nn.Module:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(64, 4, 128, batch_first=True)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)


def cnn() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, 10),
    )


@pytest.mark.parametrize(
    ("make", "shape"), [(transformer, (4, 32, 64)), (cnn, (4, 3, 32, 32))], ids=["tf", "cnn"]
)
def test_saved_bytes_exact_and_zero_after_backward(
    engine: InsightEngine, ns: dict[str, Any], make: Any, shape: tuple[int, ...]
) -> None:
    model = make()
    ns["model"] = model
    with StorageRecorder() as rec:
        x = torch.randn(*shape)
        out = model(x)
    # what the loss saves (square keeps its input, the model's output) is outside the model's
    # forward: not counted (activations.py: no hooks outside a measured forward)
    loss = out.square().mean()
    del x
    truth = rec.alive_bytes(model_ptrs(model) | {out.untyped_storage().data_ptr()})
    del out
    insight = engine.after_cell(1000)
    assert insight["model"] == "model"
    assert truth > 100 * KIB
    assert saved_total(insight) == truth  # to the byte
    assert engine.tracker.total_bytes() == truth
    assert insight["breakdown"]["cpu"]["activations"] == truth
    paths = {layer["path"]: layer for layer in insight["layers"]}
    inner = [p for p, layer in paths.items() if layer["saved_bytes"] and p not in ("", "<other>")]
    assert len(inner) >= 4  # attributed to submodules, not lumped
    loss.backward()
    after = engine.after_cell(1000)
    assert saved_total(after) == 0
    assert engine.tracker.total_bytes() == 0
    # peaks survive until the next cell, then follow the live value
    assert sum(layer["peak_saved_bytes"] for layer in after["layers"]) >= truth
    assert sum(layer["peak_saved_bytes"] for layer in engine.after_cell(1000)["layers"]) == 0


@torch.jit.script
def _sin_of_square(x: torch.Tensor) -> torch.Tensor:
    return (x * x).sin()


@torch.jit.script
def _forked(x: torch.Tensor) -> torch.Tensor:
    future = torch.jit.fork(_sin_of_square, x)
    return _sin_of_square(x) + torch.jit.wait(future)


class _Forking(nn.Module):
    """Saves tensors on torch.jit.fork's thread, which has no Python frame."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _forked(self.lin(x))


def test_a_save_on_a_thread_without_python_frames_is_measured_not_raised(
    engine: InsightEngine, ns: dict[str, Any]
) -> None:
    torch.manual_seed(0)
    model, x = _Forking(), torch.randn(2, 4)
    plain = model(x)  # no cell started: not measured
    ns["model"] = model
    engine.begin_cell("c", 1)
    measured = model(x)
    assert engine.tracker.measured is not None  # this forward was measured
    assert torch.equal(measured, plain)
    assert engine.tracker.total_bytes() > 0
    measured.sum().backward()
    assert model.lin.weight.grad is not None


def test_saved_bytes_match_bytes_freed_when_graph_dropped(
    engine: InsightEngine, ns: dict[str, Any]
) -> None:
    if engine.tracker is None or cpu_in_use_bytes() is None:
        pytest.skip("no CPU in-use measurement")
    model = transformer()
    ns["model"] = model
    errors = []
    # Three tries: another thread's allocation between the two readings (pytest's, torch's)
    # adds noise to one try; a counting error would show in every try.
    for attempt in range(3):
        engine.begin_cell(f"try-{attempt}", attempt + 1)  # each cell's first forward is tracked
        x = torch.randn(4, 32, 64)
        loss = model(x).mean()  # mean keeps no tensor: everything saved is the model's
        del x
        tracked = engine.tracker.total_bytes()
        assert tracked > 1024 * KIB
        storages = len(engine.tracker.live_storages())
        gc.collect()
        before = cpu_in_use_bytes()
        del loss
        after = cpu_in_use_bytes()
        assert before is not None and after is not None
        errors.append(abs((before - after) - tracked))
        assert engine.tracker.total_bytes() == 0
    # What the graph frees beyond the saved tensors' storages: its nodes, and per saved
    # tensor the detached tensor our pack hook keeps with its weakref: 64-68 KB measured here
    # for 41 storages, in every try (so not noise), bounded by 1.5 KiB a storage plus 16 KiB
    # (77.5 KiB); one missed activation of this model (>= 32 KiB) goes over.
    # Since the pack hook keeps a Saved (tensor + version) per saved tensor: 77-80 KB
    # measured in every try for 40 storages, so 2 KiB a storage plus 16 KiB (96 KiB); a
    # missed activation (>= 32 KiB) still goes over.
    # Read with the heap counter, which also sees the small blocks glibc keeps in its
    # per-thread cache (mallinfo2 counts those as in use): 106-107 KiB for 40 storages in
    # every try, so 2.5 KiB a storage plus 16 KiB (116 KiB); a missed activation still goes over.
    assert min(errors) < 16 * KIB + storages * 5 * KIB // 2, (errors, storages)
    assert engine.tracker.total_bytes() == 0


def test_output_shape_and_param_bytes(engine: InsightEngine, ns: dict[str, Any]) -> None:
    model = cnn()
    ns["model"] = model
    model(torch.randn(2, 3, 8, 8)).sum().backward()
    layers = {layer["path"]: layer for layer in engine.after_cell(1000)["layers"]}
    assert layers["0"]["output_shape"] == [2, 16, 8, 8]
    assert layers["9"]["output_shape"] == [2, 10]
    assert layers["9"]["param_bytes"] == (32 * 10 + 10) * 4
    assert layers["9"]["grad_bytes"] == (32 * 10 + 10) * 4
    assert sum(layer["param_bytes"] for layer in layers.values()) == sum(
        p.numel() * 4 for p in model.parameters()
    )
    json.dumps(layers)


def test_weakrefs_only(engine: InsightEngine, ns: dict[str, Any]) -> None:
    model = nn.Sequential(nn.Linear(8, 8), nn.Tanh())
    ns["model"] = model
    engine.watch(model)
    act = model(torch.randn(4, 8))  # Tanh saves its output: `act` itself
    ref = weakref.ref(act)
    model_ref = weakref.ref(model)
    assert engine.after_cell(1000)["layers"][2]["saved_bytes"] == 4 * 8 * 4
    del act
    gc.collect()
    assert ref() is None
    assert engine.tracker.total_bytes() == 0
    del model, ns["model"]
    engine.after_cell(1000)
    gc.collect()
    assert model_ref() is None


def test_other_and_ancestor_attribution(engine: InsightEngine, ns: dict[str, Any]) -> None:
    watched = nn.Sequential(nn.Linear(8, 8), nn.Tanh())
    other = nn.Sequential(nn.Linear(8, 8), nn.Sigmoid())
    ns.update(watched=watched, other=other)
    engine.watch("watched")

    class Wrapper(nn.Module):
        def forward(self, x: Any) -> Any:
            return nn.Tanh()(watched[0](x))  # a module created on the fly

    # a module with neither parameters nor children is a model from the cell after it is
    # in the namespace (roots.py: no registration hook tells of it when it is built)
    ns["wrapper"] = Wrapper()
    engine.begin_cell("next", 2)
    a = ns["wrapper"](torch.randn(4, 8))  # neither module belongs to `watched`
    b = other(torch.randn(4, 8))
    c = watched(torch.randn(4, 8))
    insight = engine.after_cell(1000)
    assert insight["model"] == "watched"
    layers = {layer["path"]: layer["saved_bytes"] for layer in insight["layers"]}
    assert layers["1"] == 128  # Tanh output of `c`
    assert layers["<other>"] == 2 * 128 + 128  # on-the-fly Tanh + Sigmoid outputs, x of `b`
    assert sum(layers.values()) == engine.tracker.total_bytes()
    del a, b, c


def test_nested_module_outside_callers_tree_excludes_its_weights(
    engine: InsightEngine, ns: dict[str, Any]
) -> None:
    """A frozen module (the fine-tuning case) reached through a plain attribute, not a
    registered child: the ``weight.t()`` that addmm saves for the input's gradient is the
    parameter's storage, never an activation."""
    inner = nn.Linear(256, 256).requires_grad_(False)  # frozen, created in this cell

    class Holder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.__dict__["inner"] = inner  # plain attribute: not in Holder's tree

        def forward(self, x: Any) -> Any:
            return self.inner(x * 2).tanh()

    model = Holder()
    ns["model"] = model
    engine.begin_cell("next", 2)  # no parameters, no children: watched from the next cell
    x = torch.randn(16, 256, requires_grad=True)
    with StorageRecorder() as rec:
        out = model(x)
    truth = rec.alive_bytes(model_ptrs(inner))
    insight = engine.after_cell(1000)
    # the weight is frozen, so addmm keeps no input; tanh saves its output (`out` itself)
    assert truth == 16 * 256 * 4
    assert saved_total(insight) == truth
    assert engine.tracker.total_bytes() == truth
    del out, x


def test_stack_survives_exception_in_forward(engine: InsightEngine, ns: dict[str, Any]) -> None:
    class Boom(nn.Module):
        def forward(self, x: Any) -> Any:
            raise ValueError("boom")

    model = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
    ns["model"] = model
    with pytest.raises(ValueError):
        nn.Sequential(nn.Linear(4, 4), Boom())(torch.randn(2, 4))
    out = model(torch.randn(2, 4))
    layers = {layer["path"]: layer["saved_bytes"] for layer in engine.after_cell(1000)["layers"]}
    assert layers["1"] == 2 * 4 * 4
    assert "<other>" not in layers or layers["<other>"] == 0
    del out


def test_other_threads_are_not_tracked(engine: InsightEngine) -> None:
    results: list[Any] = []

    def work() -> None:
        results.append(torch.randn(64, 64, requires_grad=True).exp())

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert engine.tracker.total_bytes() == 0  # saved-tensor hooks are thread-local
    results.clear()


def test_breakdown_adds_up_and_adam_state(engine: InsightEngine, ns: dict[str, Any]) -> None:
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 8))
    opt = torch.optim.Adam(model.parameters())
    ns.update(model=model, opt=opt)
    pbytes = sum(p.numel() * 4 for p in model.parameters())
    assert engine.after_cell(1000)["breakdown"]["cpu"]["optimizer_state"] == 0  # lazy state
    model(torch.randn(16, 64)).sum().backward()
    opt.step()
    engine.begin_cell()  # a new cell: its first forward is measured
    loss = model(torch.randn(16, 64)).sum()
    cpu = engine.after_cell(1000)["breakdown"]["cpu"]
    nparams = len(list(model.parameters()))
    assert cpu["parameters"] == pbytes
    assert cpu["gradients"] == pbytes
    assert cpu["optimizer_state"] == 2 * pbytes + 4 * nparams  # exp_avg, exp_avg_sq, step
    assert cpu["activations"] == engine.tracker.total_bytes() > 0
    parts = ("parameters", "gradients", "optimizer_state", "activations", "other")
    assert sum(cpu[k] for k in parts) == cpu["total_bytes"]
    # The total is a real measurement (not the parts' sum): the allocator's in-use bytes,
    # read independently here, and large enough that nothing had to be clamped.
    assert "clamped_bytes" not in cpu
    independent = cpu_in_use_bytes()
    assert independent is not None
    assert abs(cpu["total_bytes"] - independent) < 4 * KIB * KIB
    assert cpu["other"] > 0
    del loss


def test_breakdown_cuda_extras_from_a_device_reading() -> None:
    from vramscope.insight.breakdown import _from_reading

    reading = {"used": 600, "reserved": 1000, "peak": 900, "device_used": 1500}
    total, extra = _from_reading("cuda:0", reading)
    assert total == 600
    assert extra == {"reserved_free": 400, "outside_pytorch": 500}
    # no CUDA context yet: no device-wide figure, so no outside-PyTorch part
    assert _from_reading("cuda:1", {"used": 0, "reserved": 0}) == (0, {"reserved_free": 0})
    assert _from_reading("cpu", {"used": 7, "rss": 9}) == (7, {})


def test_breakdown_total_fn_reading_reaches_the_breakdown(ns: dict[str, Any]) -> None:
    ns["model"] = nn.Linear(32, 32)
    eng = InsightEngine(namespace=ns, total_fn=lambda dev: {"used": 1_000_000, "rss": 5})
    cpu = eng.snapshot()["breakdown"]["cpu"]
    assert cpu["total_bytes"] == 1_000_000
    assert cpu["other"] == 1_000_000 - (32 * 32 + 32) * 4


def test_breakdown_total_fn_and_clamp(ns: dict[str, Any]) -> None:
    ns["model"] = nn.Linear(32, 32)
    eng = InsightEngine(
        namespace=ns, total_fn=lambda dev: {"used": 10_000_000} if dev == "cpu" else None
    )
    cpu = eng.snapshot()["breakdown"]["cpu"]
    assert cpu["total_bytes"] == 10_000_000
    assert cpu["other"] == 10_000_000 - (32 * 32 + 32) * 4
    small = InsightEngine(namespace=ns, total_fn=lambda dev: {"used": 100}).snapshot()["breakdown"][
        "cpu"
    ]
    assert small["other"] == 0
    assert small["clamped_bytes"] == (32 * 32 + 32) * 4 - 100


def test_tied_weights_counted_once(ns: dict[str, Any]) -> None:
    emb = nn.Embedding(100, 16)
    head = nn.Linear(16, 100, bias=False)
    head.weight = emb.weight
    ns["model"] = nn.Sequential(emb, head)
    insight = InsightEngine(namespace=ns).snapshot()
    assert insight["breakdown"]["cpu"]["parameters"] == 100 * 16 * 4
    assert sum(layer["param_bytes"] for layer in insight["layers"]) == 100 * 16 * 4


def test_holders_loss_list_and_tensors(engine: InsightEngine, ns: dict[str, Any]) -> None:
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 1))
    losses = []
    for step in range(5):
        losses.append(model(torch.randn(128, 256)).mean())
        if step == 0:
            per_step = engine.tracker.total_bytes()  # the measured (first) forward
    big = torch.zeros(256, 1024)
    ns.update(model=model, losses=losses, big=big, small=torch.zeros(2))
    holders = {h["name"]: h for h in engine.after_cell(1000)["holders"]}
    assert holders["losses"]["kind"] == "graph_retention"
    # every step's graph (all saved activations) plus the five 4-byte loss scalars
    assert per_step > 0
    assert holders["losses"]["bytes"] == 5 * per_step + 5 * 4
    # every graph is kept (no backward), so every call was measured: the live count is exact
    assert engine.tracker.total_bytes() == 5 * per_step
    assert "item()" in holders["losses"]["fix"]
    assert holders["big"]["kind"] == "tensor" and holders["big"]["bytes"] == 1024 * KIB
    assert holders["model"]["kind"] == "module"
    sizes = [h["bytes"] for h in holders.values()]
    assert sizes == sorted(sizes, reverse=True)
    quiet = InsightEngine(namespace=ns, min_holder_bytes=KIB * KIB).snapshot()["holders"]
    assert "small" not in {h["name"] for h in quiet}


def test_budget_exceeded_is_partial_then_continued_to_complete(ns: dict[str, Any]) -> None:
    """A scan over its budget is marked partial (not skipped) and continues where it
    stopped, slice after slice, until it lists exactly what one unbounded scan lists."""
    ns.update({f"t{i}": torch.zeros(1) for i in range(2000)})
    graph = nn.Linear(64, 64)(torch.randn(256, 64))  # a graph cut mid-walk is rolled back
    ns.update(late=graph, shared=[graph, ns["t5"]])
    engine = InsightEngine(namespace=ns, min_holder_bytes=1)
    insight = engine.after_cell(0.001)
    assert insight["partial"] is True and insight["skipped"] is None
    assert len(insight["holders"]) < 2002 and engine.scan_pending
    json.dumps(insight)
    slices = 1
    while insight.get("partial"):
        insight = engine.continue_scan(0.5) or {}
        slices += 1
    assert slices > 2 and insight["skipped"] is None and not engine.scan_pending
    assert engine.continue_scan(0.5) is None
    whole = InsightEngine(namespace=ns, min_holder_bytes=1).snapshot()
    assert "partial" not in whole
    assert insight["holders"] == whole["holders"]
    assert {h["name"] for h in insight["holders"]} == set(ns) - {"shared"}  # all claimed


def test_a_scan_that_never_finishes_gives_up_skipped(
    ns: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from vramscope.insight import engine as engine_module

    monkeypatch.setattr(engine_module, "MAX_SCAN_SLICES", 3)
    ns.update({f"t{i}": torch.zeros(1) for i in range(2000)})
    engine = InsightEngine(namespace=ns, min_holder_bytes=1)
    insight = engine.after_cell(0.0)
    while insight.get("partial") and not insight["skipped"]:
        insight = engine.continue_scan(0.0) or {}
    assert insight["skipped"] and "budget" in insight["skipped"] and insight["partial"]
    assert not engine.scan_pending
    assert "after 3 slices" not in insight["skipped"] and "x 3 slices" in insight["skipped"]


def test_container_walk_is_capped(ns: dict[str, Any]) -> None:
    ns["many"] = [torch.zeros(4) for _ in range(5000)]
    holders = InsightEngine(namespace=ns, min_holder_bytes=1).snapshot()["holders"]
    assert holders[0]["name"] == "many" and "capped" in holders[0]["explanation"]


def test_never_raises_and_is_json(ns: dict[str, Any]) -> None:
    class Nasty:
        @property
        def __dict__(self) -> Any:  # type: ignore[override]
            raise RuntimeError("no")

    ns["nasty"] = Nasty()
    eng = InsightEngine(namespace=ns)
    eng.install()
    eng.install()  # idempotent
    try:
        json.dumps(eng.after_cell(20))
        eng.watch("missing")
        eng.watch(42)  # type: ignore[arg-type]
        json.dumps(eng.snapshot("missing"))
        broken = InsightEngine(namespace=ns, total_fn=lambda dev: 1 // 0)
        insight = broken.after_cell(20)
        assert insight["skipped"] and "ZeroDivisionError" in insight["skipped"]
        assert InsightEngine(None).after_cell(20)["model"] is None
    finally:
        eng.uninstall()
        eng.uninstall()


def test_user_items_leaves_out_ipython_names_and_keeps_order() -> None:
    from vramscope.insight.names import user_items

    ns: dict[str, Any] = {"__name__": "__main__", "In": [], "Out": {}, "_": None, "_ii": ""}
    ns.update({f"_i{n}": "pass" for n in range(1, 400)})  # one per cell run
    ns.update({"_12": 1, "zeta": 1, "_private": 2, "alpha": 3, "hidden_one": 4})
    hidden = {"hidden_one": 0}
    assert [n for n, _ in user_items(ns, hidden)] == ["zeta", "_private", "alpha"]
    # names already classified, new ones added, one rebound: same answers as a fresh look
    ns["_i400"] = "pass"
    ns["beta"] = 5
    ns["zeta"] = 6
    del ns["alpha"]
    assert user_items(ns, hidden) == [("zeta", 6), ("_private", 2), ("beta", 5)]
    assert user_items(ns, ["hidden_one", "beta"]) == [("zeta", 6), ("_private", 2)]


def test_ipython_output_cache_and_traceback() -> None:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    eng = InsightEngine(shell, min_holder_bytes=512 * KIB)
    eng.install()

    def run(code: str) -> None:
        shell.run_cell(code, store_history=True)  # like a kernel: Out[n], _n from 1

    try:
        run("import torch\nshown = torch.ones(512, 1024)\nshown")
        run("del shown")
        holders = {h["kind"]: h for h in eng.after_cell(1000)["holders"]}
        assert holders["output_cache"]["bytes"] == 2048 * KIB
        assert holders["output_cache"]["fix"] == "%reset -f out"
        for value in ("1", "2", "3", "Out.clear()"):  # now only _1 holds it
            run(value)
        holders = {h["kind"]: h for h in eng.after_cell(1000)["holders"]}
        assert holders["output_cache"]["bytes"] == 2048 * KIB
        run("%reset -f out")
        assert "output_cache" not in {h["kind"] for h in eng.after_cell(1000)["holders"]}

        run("def fail():\n    kept = torch.ones(1024, 1024)\n    1 / 0\nfail()")
        holders = {h["kind"]: h for h in eng.after_cell(1000)["holders"]}
        assert holders["traceback"]["bytes"] == 4096 * KIB
        run(holders["traceback"]["fix"])
        assert "traceback" not in {h["kind"] for h in eng.after_cell(1000)["holders"]}
    finally:
        eng.uninstall()
        shell.run_cell("%reset -f")


@pytest.mark.cuda
def test_cuda_exact_and_breakdown(engine: InsightEngine, ns: dict[str, Any]) -> None:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    model = transformer().cuda()
    ns["model"] = model
    with StorageRecorder() as rec:
        x = torch.randn(4, 32, 64, device="cuda")
        out = model(x)
    loss = out.square().mean()  # what the loss saves is outside the model's forward
    del x
    truth = rec.alive_bytes(model_ptrs(model) | {out.untyped_storage().data_ptr()})
    del out
    insight = engine.after_cell(1000)
    assert saved_total(insight) == truth
    cuda = insight["breakdown"]["cuda:0"]
    # SDPA's efficient-attention kernel saves its philox seed and offset as CPU scalars
    # (8 bytes each): the saved bytes are split by device, and add up to the truth
    by_device = engine.tracker.bytes_by_device()
    assert cuda["activations"] == by_device["cuda:0"] >= truth - 1024
    assert sum(by_device.values()) == truth
    assert cuda["total_bytes"] == torch.cuda.memory_allocated(0)
    parts = ("parameters", "gradients", "optimizer_state", "activations", "other")
    assert sum(cuda[k] for k in parts) == cuda["total_bytes"]
    assert cuda["reserved_free"] >= 0 and cuda["outside_pytorch"] >= 0
    loss.backward()
    assert engine.tracker.bytes_by_device().get("cuda:0", 0) == 0


def test_models_list_for_the_picker(ns: dict[str, Any]) -> None:
    big = transformer()
    ns["small"] = nn.Linear(4, 4)
    ns["model"] = big
    ns["alias"] = big  # same module twice: listed once, under its first name
    ns["enc_layer"] = big.layers[0]  # a submodule of a listed model: not listed
    ns["mlp"] = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64))
    eng = InsightEngine(namespace=ns)
    insight = eng.snapshot()
    models = insight["models"]
    assert [m["name"] for m in models] == ["model", "mlp", "small"]
    assert models[0] == {
        "name": "model",
        "type": "TransformerEncoder",
        "param_bytes": models[0]["param_bytes"],
    }
    assert models[0]["param_bytes"] == sum(p.nbytes for p in big.parameters())
    assert models[2] == {"name": "small", "type": "Linear", "param_bytes": (16 + 4) * 4}
    assert insight["model"] == "model"
    # choosing a submodule by name lists it too; the choice sticks across cells
    eng.watch("enc_layer")
    after = eng.after_cell(20)
    assert after["model"] == "enc_layer" and after["layers"][0]["type"] == "TransformerEncoderLayer"
    assert "enc_layer" in [m["name"] for m in after["models"]]
    assert eng.snapshot("mlp")["model"] == "mlp" and eng.watched == "enc_layer"
    json.dumps(after)
    assert InsightEngine(namespace={}).snapshot()["models"] == []


@pytest.mark.parametrize("bound", ["hidden", "output", "dunder"])
def test_a_model_built_before_install_is_measured_under_any_name(bound: str) -> None:
    """A model made before the engine was installed is watched through the namespace: also
    when it is bound only to a name IPython hides (startup files), to a cell's output (``_``,
    ``_1``) or to ``__net`` (not a user variable for the holders, still a model that runs)."""
    import types

    model = nn.Sequential(*[nn.Linear(16, 16) for _ in range(3)])
    ns: dict[str, Any] = {"__name__": "__main__", "In": ["", "model"], "Out": {}, "_i1": "x"}
    hidden: dict[str, Any] = {}
    if bound == "hidden":
        ns["net"] = hidden["net"] = model
    elif bound == "output":
        ns["Out"][1] = ns["_1"] = ns["_"] = model
    else:
        ns["__net"] = model
    shell = types.SimpleNamespace(user_ns=ns, user_ns_hidden=hidden)
    eng = InsightEngine(shell, total_fn=lambda d: {"used": 100 << 20} if d == "cpu" else None)
    eng.install()
    try:
        eng.begin_cell("c2", 2)
        model(torch.randn(4, 16)).sum()
        insight = eng.after_cell(1000.0)
        assert insight.get("activations_measured") is not None
        assert [r["path"] for r in insight["layers"]][:4] == ["", "0", "1", "2"]
    finally:
        eng.uninstall()

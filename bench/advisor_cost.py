"""What Optimize costs: ``advise()`` on a 10,000-module model (target < 100 ms), and the
per-cell work before and after advice was asked for (target: nothing measurable while the
Optimize section is closed).

The model is 2,500 repeated blocks (Linear, GELU, Linear inside each: 10,001 modules) trained
one step under model insight with every layer reported. Timings are medians of interleaved
runs; each figure has an A/A twin (the same measurement in a second interleaved series), so
the noise of this machine is printed beside it. ``--record`` writes bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any, Callable

import torch

from _results import print_and_record
from vramscope.insight import InsightEngine
from vramscope.optimize.advisor import Advisor

BLOCKS = 2500
TRAIN = """for _ in range(1):
    opt.zero_grad()
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()"""


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(8, 16)
        self.act = torch.nn.GELU()
        self.down = torch.nn.Linear(16, 8)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.down(self.act(self.up(h)))


def setup() -> tuple[Advisor, dict[str, Any]]:
    model = torch.nn.Sequential(*[Block() for _ in range(BLOCKS)])
    ns: dict[str, Any] = {
        "torch": torch,
        "model": model,
        "opt": torch.optim.SGD(model.parameters(), lr=0.01),
        "x": torch.randn(4, 8),
    }
    engine = InsightEngine(namespace=ns, max_layers=20_000)
    engine.install()
    sources = ["", TRAIN]
    records = [{"cell_id": "train", "execution_count": 1, "duration": 0.1, "ok": True}]
    state: dict[str, Any] = {"engine": engine, "last": None}
    advisor = Advisor(
        lambda: ns, lambda c: sources[c] if c else "", lambda: records, lambda: state["last"]
    )
    engine.begin_cell("train", 1)
    exec(TRAIN, ns)
    advisor.after_cell({**records[0], "devices": {}})
    state["last"] = engine.after_cell(5000)
    advisor.after_insight(state["last"])
    engine.uninstall()
    return advisor, state


def interleaved(fa: Callable[[], Any], fb: Callable[[], Any], runs: int) -> tuple[float, float]:
    """Median ms of ``fa`` and ``fb`` run alternately (A, B, A, B...)."""
    ta, tb = [], []
    for _ in range(runs):
        for fn, times in ((fa, ta), (fb, tb)):
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(ta), statistics.median(tb)


def per_cell_us(active: bool, n: int) -> float:
    """Per-cell cost of ``after_cell`` on a fresh advisor (advice asked for or not)."""
    source = "x = 1  # a cell of ordinary length, no marker, no training"
    advisor = Advisor(lambda: {}, lambda _c: source, lambda: [], lambda: None)
    if active:
        advisor.log.activate(None, [])
    record_ = {"cell_id": "c", "execution_count": 1, "duration": 0.0, "ok": True, "devices": {}}
    start = time.perf_counter()
    for _ in range(n):
        advisor.after_cell(record_)
    return (time.perf_counter() - start) / n * 1e6


def step_watch_ms(runs: int) -> tuple[float, float, float, int]:
    """A 50-layer MLP's forward + backward: unmeasured, measured op by op as the step watch
    measures one training step per cell once advice is active, and the unmeasured A/A twin;
    medians in ms, and the number of ops."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from vramscope.optimize.peak import tracker

    mlp = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(50)])
    x = torch.randn(8, 64)

    def step() -> None:
        mlp.zero_grad(set_to_none=True)
        mlp(x).sum().backward()

    def measured() -> None:
        with tracker(torch, record=True):
            step()

    class Count(TorchDispatchMode):
        ops = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            Count.ops += 1
            return func(*args, **(kwargs or {}))

    with Count():
        step()
    plain, watched, twin = [], [], []
    for _ in range(runs):
        for fn, times in ((step, plain), (measured, watched), (step, twin)):
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(plain), statistics.median(watched), statistics.median(twin), Count.ops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--record", action="store_true", help="write to bench/RESULTS.md")
    args = parser.parse_args()

    advisor, state = setup()
    rows = len(state["last"]["layers"])
    # per cell, advice never asked for (the Optimize section closed): A and A/A
    closed = [per_cell_us(False, 20_000) for _ in range(4)]
    first = advisor.advise()  # from now on advice is active
    suggestions = [s["id"] for s in first["suggestions"]] or first["notes"]
    advise_a, advise_aa = interleaved(advisor.advise, advisor.advise, args.runs)

    def cold() -> None:  # as for a model or measurement never seen: nothing kept
        advisor._memo = (None, None, None, 0, {})
        advisor.advise()

    cold_a, cold_aa = interleaved(cold, cold, args.runs)
    opened = [per_cell_us(True, 20_000) for _ in range(4)]
    plain, watched, twin, ops = step_watch_ms(max(args.runs, 15))
    lines = [
        f"model: {BLOCKS} repeated blocks, {sum(1 for _ in advisor._ns()['model'].modules())} "
        f"modules, {rows} insight rows; suggestions: {', '.join(suggestions)}",
        f"advise(), first for this model and measurement: {cold_a:.1f} ms median of "
        f"{args.runs} (A/A twin {cold_aa:.1f} ms); target < 100 ms",
        f"advise() again (structure figures kept): {advise_a:.1f} ms median of {args.runs} "
        f"(A/A twin {advise_aa:.1f} ms)",
        f"per cell, advice never asked for: {statistics.median(closed[:2]):.2f} us "
        f"(A/A twin {statistics.median(closed[2:]):.2f} us): one deque append, no source read",
        f"per cell, advice active: {statistics.median(opened[:2]):.2f} us "
        f"(A/A twin {statistics.median(opened[2:]):.2f} us): source, marker and "
        "training-cell checks",
        f"one training step per cell measured op by op (advice active): a 50-layer MLP step of "
        f"{ops} ops {watched:.2f} ms measured vs {plain:.2f} ms (A/A twin {twin:.2f} ms): "
        f"{(watched - plain) / ops * 1000:.1f} us per op",
    ]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    lines.append(f"load average at the end of the run: {load} (2 cores shared with other work)")
    print_and_record("advisor_cost", lines, args.record)


if __name__ == "__main__":
    main()

"""What the bridge's module-registration hooks cost a training step whose forward slices its
layers (issue 19), in process, side by side.

The Llama family's forward runs ``for layer in self.layers[: n]``: a new ModuleList of the
same layers at every step, which calls ``add_module`` once per layer, and so the global
registration hooks the bridge keeps (insight/roots.py). The workload: bench/module_cost.py's
``peft`` LoRA model (r=4, every linear layer adapted, on a Llama layout built from a
``transformers`` config, no download) with ``--layers`` decoder layers of width 64, its
batch of 2 x 16 tokens, forward and backward, torch on 1 thread. Arms, interleaved round by
round: ``plain`` (no bridge), ``bridge`` (model insight installed as the runtime installs
it, its measured first forward done, then the steady steps timed), ``plain again`` (A/A:
both arms the same), and ``bridge, every registration`` (the bridge with the regrouping rule
off, ``roots._CONTAINERS`` empty: what it did before that rule). Printed: the median step
per arm, the ratios to ``plain`` with their quartiles over the rounds, what one ``layers[:
n]`` slice costs in each arm, and the after-cell insight of a cell that ran one step (bridge
arms). ``--record`` writes them to bench/RESULTS.md.

    python bench/forward_registrations.py [--rounds 12] [--steps 20] [--layers 32] [--record]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _results import print_and_record

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python_bridge"))


def build(layers: int) -> tuple[Any, Any, Any]:
    """module_cost.py's LoRA model (built and trained once there, torch on 1 thread)."""
    import module_cost

    ns: dict[str, Any] = {}
    exec(module_cost.LORA.format(layers=layers), ns)
    model = ns["model"]
    return model, ns["x"], model.base_model.model.model.layers


def steps(model: Any, ids: Any, n: int) -> list[float]:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        model(input_ids=ids, labels=ids).loss.backward()
        times.append(time.perf_counter() - start)
    model.zero_grad(set_to_none=True)
    return times


def slice_us(layers: Any, n: int = 2000) -> float:
    count = len(layers)
    start = time.perf_counter()
    for _ in range(n):
        layers[:count]
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()

    from vramscope.insight import InsightEngine, roots

    model, ids, layers = build(args.layers)
    modules = sum(1 for _ in model.modules())
    arms = ("plain", "bridge", "plain again", "bridge, every registration")
    rule = roots._CONTAINERS
    step_ms: dict[str, list[float]] = {a: [] for a in arms}  # median step per round
    slices: dict[str, list[float]] = {a: [] for a in arms}
    after_ms: dict[str, list[float]] = {a: [] for a in arms}
    steps(model, ids, 3)  # warm up
    for rnd in range(args.rounds):
        order = arms[rnd % len(arms) :] + arms[: rnd % len(arms)]
        for arm in order:
            engine = None
            roots._CONTAINERS = () if arm == "bridge, every registration" else rule  # type: ignore[assignment]
            if arm.startswith("bridge"):
                engine = InsightEngine(namespace={"model": model, "ids": ids})
                engine.install()
                engine.begin_cell()
                steps(model, ids, 1)  # the cell's measured forward: not a steady step
            try:
                step_ms[arm].append(statistics.median(steps(model, ids, args.steps)) * 1e3)
                slices[arm].append(slice_us(layers))
                if engine is not None:  # then a cell of one step: its after-cell insight
                    engine.after_cell(1000.0)
                    engine.begin_cell()
                    steps(model, ids, 1)
                    start = time.perf_counter()
                    engine.after_cell(1000.0)
                    after_ms[arm].append((time.perf_counter() - start) * 1e3)
            finally:
                if engine is not None:
                    engine.uninstall()

    def ratio(arm: str) -> str:
        r = [a / b for a, b in zip(step_ms[arm], step_ms["plain"])]
        q = statistics.quantiles(r, n=4)
        return f"{statistics.median(r):.3f} [{q[0]:.3f}..{q[2]:.3f}]"

    lines = [
        f"`python bench/forward_registrations.py --rounds {args.rounds} --steps {args.steps} "
        f"--layers {args.layers}`: in process, torch on 1 thread, arms interleaved (order "
        "rotating); per round and arm the median of the steps (forward and backward)",
        f"module_cost.py's peft LoRA (r=4, every linear layer adapted) on a Llama layout of "
        f"{args.layers} decoder layers, width 64: {modules} modules; batch 2 x 16 tokens",
    ]
    for arm in arms:
        med = statistics.median(step_ms[arm])
        cut = statistics.median(slices[arm])
        vs = "" if arm == "plain" else f", step against plain {ratio(arm)}"
        lines.append(
            f"{arm}: median step {med:.2f} ms{vs}; one `layers[:{args.layers}]` {cut:.1f} us"
        )
    plain_ms = statistics.median(step_ms["plain"])
    for arm in ("bridge", "bridge, every registration"):
        added = statistics.median(slices[arm]) - statistics.median(slices["plain"])
        lines.append(
            f"{arm}: the slice costs {added:+.1f} us a step more than plain "
            f"({added / 1e3 / plain_ms * 100:+.2f}% of the step); the after-cell insight of a "
            f"cell that ran one step {statistics.median(after_ms[arm]):.2f} ms median"
        )
    print_and_record("forward_registrations", lines, args.record)


if __name__ == "__main__":
    main()

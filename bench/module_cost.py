"""What a cell costs with a large model in the kernel, bridge against none (issue 19).

Per-cell work must grow with what the cell ran, not with the models in the namespace. For
each model (a 1,000-module and a 10,000-module model of 10-module blocks, and a ``peft`` LoRA
model with every linear layer adapted on a small-width Llama-like layout built from a
``transformers`` config, no download), three real kernels get the same model, trained once
(forward, backward, an AdamW step; torch on 1 thread): one with the bridge loaded as the
front end loads it
(``_bootstrap()`` before the model is built, a ``stream`` comm open) and two plain ones. Then
blocks of back-to-back cells (``pass``, ``print(1)``, a forward of the model, and a training
step that binds its loss to a name, as notebooks do) are timed
(execute_request -> execute_reply) in every kernel, the kernels' order rotating from block to
block, each block preceded by one untimed cell (it takes whatever the previous block left
behind). Printed per model and cell: added ms per cell, median and p90, bridge against the
first plain kernel, next to the A/A control (the second plain kernel against the first, both
arms the same), and the bridge's own after-cell insight time (``scan_ms`` of its insight
messages), and the bridge's CPU readings (the heap counter, or what one glibc mallinfo2 call
cost on a cell's path and on the sampler's). ``--record`` writes them to bench/RESULTS.md (section
``--title``). No asserts: numbers on a shared machine are noisy.

    python bench/module_cost.py [--rounds 8] [--cells 20] [--forward-cells 5]
                                [--models m1k,m10k,lora] [--record] [--title module_cost]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _results import record

ROOT = Path(__file__).resolve().parents[1]

BLOCKS = """
import torch
from torch import nn

torch.set_num_threads(1)  # three kernels share the machine
torch.manual_seed(0)


def _block(width):  # 10 modules
    return nn.Sequential(
        nn.Linear(width, width), nn.LayerNorm(width), nn.GELU(),
        nn.Linear(width, width), nn.LayerNorm(width), nn.GELU(),
        nn.Linear(width, width), nn.Dropout(0.0), nn.Identity(),
    )


model = nn.Sequential(*[_block({width}) for _ in range({blocks})])
x = torch.randn(8, {width})
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
model(x).square().mean().backward()
opt.step()
"""

#: a template: ``LORA.format(layers=n)`` (bench/forward_registrations.py and
#: bench/sampler_thread.py build the same model)
LORA = """
import torch
from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

torch.set_num_threads(1)  # three kernels share the machine
torch.manual_seed(0)
config = LlamaConfig(
    vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers={layers},
    num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64,
)
model = get_peft_model(
    LlamaForCausalLM(config), LoraConfig(r=4, target_modules="all-linear", lora_dropout=0.0)
)
x = torch.randint(0, 512, (2, 16))
opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
model(input_ids=x, labels=x).loss.backward()
opt.step()
"""

MODELS = {
    "m1k": ("1,000-module model (100 blocks of 10)", BLOCKS.format(width=32, blocks=100)),
    "m10k": ("10,000-module model (1,000 blocks of 10)", BLOCKS.format(width=16, blocks=1000)),
    "lora": (
        "peft LoRA, all linear layers, Llama layout (32 layers, width 64)",
        LORA.format(layers=32),
    ),
}
FORWARD = {
    "m1k": "y = model(x).sum().item()",
    "m10k": "y = model(x).sum().item()",
    "lora": "y = model(input_ids=x).logits.sum().item()",
}
#: a training step that binds its loss to a name, as notebooks do (the holders see a rebinding)
TRAIN = {
    "m1k": "loss = model(x).square().mean(); loss.backward(); opt.step(); opt.zero_grad()",
    "m10k": "loss = model(x).square().mean(); loss.backward(); opt.step(); opt.zero_grad()",
    "lora": (
        "loss = model(input_ids=x, labels=x).loss; loss.backward(); opt.step(); opt.zero_grad()"
    ),
}
COUNT = "sum(1 for _ in model.modules())"
CPU_READS = (
    "(lambda c: f'{c.source}: ' + (f'{c.heap.slots} GOT entries counted, no heap walk' "
    "if c.heap is not None else f'mallinfo2 {c.read_cost_s * 1e3:.2f} ms a call on the cells "
    "path, '"
    "f'{c.tick_cost_s * 1e3:.2f} ms on the samplers (GIL released: {c.tick_cost_s > 3e-4})'))"
    "(__import__('vramscope.runtime', fromlist=['x']).get_runtime().cpu)"
)
ARMS = ("bridge", "plain", "plain2")


def drain(kernel: Any) -> list[dict[str, Any]]:
    """The iopub messages waiting; the insight messages' payloads."""
    found = []
    while True:
        msg = kernel._pump(0.01)
        if msg is None:
            return found
        data = msg["content"].get("data") if msg["msg_type"] == "comm_msg" else None
        if isinstance(data, dict) and data.get("type") == "insight":
            found.append(data["insight"])
        kernel.iopub.clear()


def start(harness: Any, bridge: bool, setup: str) -> Any:
    from kernel_harness import BOOTSTRAP

    kernel = harness()
    if bridge:
        kernel.execute(BOOTSTRAP, silent=True)
        kernel.comm_data(kernel.comm_open("stream"), "hello")
    reply = kernel.reply(kernel.send_execute(setup), timeout=900)  # 10,000 modules: slow
    assert reply["content"]["status"] == "ok", reply["content"]
    return kernel


def block(kernel: Any, code: str, n: int) -> list[float]:
    kernel.execute(code)  # untimed: takes what the kernel's previous block left
    times = []
    for _ in range(n):
        begin = time.perf_counter()
        kernel.execute(code)
        times.append((time.perf_counter() - begin) * 1000.0)
    return times


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1]


def run_model(key: str, args: argparse.Namespace) -> list[str]:
    from kernel_harness import KernelHarness

    title, setup = MODELS[key]
    kernels = {arm: start(KernelHarness, arm == "bridge", setup) for arm in ARMS}
    try:
        modules = int(kernels["bridge"].eval(COUNT))
        cells = {
            "pass": "pass",
            "print(1)": "print(1)",
            "forward": FORWARD[key],
            "train step": TRAIN[key],
        }
        times: dict[tuple[str, str], list[float]] = {}
        scans: dict[str, list[float]] = {name: [] for name in cells}
        for r in range(args.rounds):
            for name, code in cells.items():
                n = args.cells if name in ("pass", "print(1)") else args.forward_cells
                order = ARMS[r % 3 :] + ARMS[: r % 3]
                for arm in order if r % 2 == 0 else order[::-1]:
                    drain(kernels[arm])
                    times.setdefault((name, arm), []).extend(block(kernels[arm], code, n))
                    time.sleep(0.1)  # the last cell's follow-up work (30 ms idle), then drain
                    found = drain(kernels[arm])
                    if arm == "bridge":
                        scans[name].extend(float(i.get("scan_ms", 0.0)) for i in found)
        reads = str(kernels["bridge"].eval(CPU_READS))
    finally:
        for kernel in kernels.values():
            kernel.close()

    med = statistics.median
    lines = [f"{title}: {modules} modules"]
    for name in cells:
        bridge, plain, plain2 = (times[(name, arm)] for arm in ARMS)
        scan = scans[name]
        lines.append(
            f"{title}, `{name}` cells (n={len(bridge)} per arm): added per cell "
            f"median {med(bridge) - med(plain):+.2f} ms, p90 {p90(bridge) - p90(plain):+.2f} ms "
            f"(bridge {med(bridge):.2f} / {p90(bridge):.2f}, plain {med(plain):.2f} / "
            f"{p90(plain):.2f}); A/A {med(plain2) - med(plain):+.2f} ms, p90 "
            f"{p90(plain2) - p90(plain):+.2f} ms; the bridge's after-cell insight "
            + (f"median {med(scan):.2f} ms, max {max(scan):.2f} ms" if scan else "not seen")
        )
    lines.append(f"{title}: the bridge's CPU readings at the end: {reads}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--cells", type=int, default=20, help="trivial cells per block")
    parser.add_argument(
        "--forward-cells", type=int, default=5, help="forward and train-step cells per block"
    )
    parser.add_argument("--models", default="m1k,m10k,lora", help=f"of {', '.join(MODELS)}")
    parser.add_argument("--record", action="store_true", help="write to bench/RESULTS.md")
    parser.add_argument("--title", default="module_cost", help="its section in RESULTS.md")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "test" / "python"))

    lines = [
        f"{args.rounds} rounds; per round and cell, one block per kernel ({args.cells} trivial "
        f"or {args.forward_cells} forward or train-step cells back to back after one untimed "
        "cell), order rotating; three kernels per model: bridge (as the front end loads it, "
        "stream comm open), plain, plain again (A/A); each model trained once (forward, "
        "backward, AdamW)",
    ]
    for key in args.models.split(","):
        lines.extend(run_model(key, args))
        print("\n".join(lines[-5:]), flush=True)
    if args.record:
        record(args.title, lines)


if __name__ == "__main__":
    main()

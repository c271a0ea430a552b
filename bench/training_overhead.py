"""What watching costs a training loop: vramscope on vs off, side by side, in a real kernel.

One kernel (jupyter_client), four workloads built in it (a GPT-style decoder, a conv net
with BatchNorm, a many-small-ops MLP, a peft LoRA model), each trained in blocks of steps,
one block per cell as a notebook runs them. Every round runs one block per arm, each between
two ``off`` blocks
(off, arm, off, arm, ..., off), and compares it with the geometric mean of its two neighbours,
so a drift of the shared machine's speed cancels to first order; the arms' order rotates and
reverses from round to round:

* ``off`` and ``off2``: the extension unloaded (``%unload_ext vramscope``); ``off2/off`` is the
  A/A control, the noise every other ratio must beat;
* ``hooks``: loaded with ``sample_hz=0, insight=False`` (the per-cell hooks and cell message);
* ``sampler``: ``sample_hz=10, insight=False`` (hooks + the sampler thread publishing);
* ``sampler50``: the sampler at 50 Hz (5x the default's ticks; the same 2 messages a second
  while a cell runs): the sampler's cost with 5x the signal, an upper bound of 10 Hz's that
  a 0.5% target can be read against on a machine whose A/A control spreads by a few percent;
* ``activations``: ``sample_hz=0, insight=True`` (hooks + activation tracking + insight);
* ``all``: the defaults (everything);
* ``uncounted``: the defaults with the CPU heap counter's allocator entries put back (its
  cost: ``all`` against ``uncounted``).

A loaded arm has a ``stream`` comm open, as the front end has. Per block two clocks: wall
time of the steps, timed inside the cell, and the kernel process's CPU time (all threads:
torch's workers, the sampler) from just before the execute request until 80 ms after its reply
(the bridge's follow-up work waits for 30 ms of idleness: vramscope.after_reply.DELAY_S), so the
per-cell work done after the reply is counted too. Printed per arm: the median of its
ratios over rounds and their quartiles, for torch's default thread count
and for 1 thread. ``--record`` writes the table to bench/RESULTS.md. No asserts.

    python bench/training_overhead.py [--rounds 8] [--block 0.8] [--quick] [--record]
        [--arms off2,sampler,all] [--threads default|1|both] [--workloads gpt,conv,mlp,lora]
        [--device cpu|cuda]

With ``--device cuda`` the models and batches are on the GPU and every step ends with
``torch.cuda.synchronize()``, so a step's time includes its GPU work.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _results import record

ROOT = Path(__file__).resolve().parents[1]
ARMS = ("off", "off2", "hooks", "sampler", "sampler50", "activations", "all", "uncounted")
CPU = "__import__('time').process_time()"
#: how long after a block's reply its kernel CPU is read: the bridge's follow-up work waits
#: for 30 ms of idleness (vramscope.after_reply.DELAY_S), then takes a few ms
AFTER_REPLY_S = 0.08
SETTINGS = {
    "hooks": "sample_hz=0, insight=False",
    "sampler": "sample_hz=10, insight=False",
    "sampler50": "sample_hz=50, insight=False",
    "activations": "sample_hz=0, insight=True",
    "all": "sample_hz=10, insight=True",
    "uncounted": "sample_hz=10, insight=True",
}
#: the CPU heap counter's allocator entries put back (as unloading does) or patched again
HEAP_COUNTER = "__import__('vramscope.runtime', fromlist=['x']).get_runtime().cpu.{}()"

SETUP = r"""
import time as _vs_time
import torch
from torch import nn
import torch.nn.functional as F

class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.heads = heads

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))

class GPT(nn.Module):
    def __init__(self, vocab=2048, d=128, layers=3, heads=4, ctx=64):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))

def conv_bn(cin, cout, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU())

class Res(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.a, self.b = conv_bn(c, c), conv_bn(c, c)

    def forward(self, x):
        return x + self.b(self.a(x))

def convnet():
    return nn.Sequential(conv_bn(3, 32), Res(32), conv_bn(32, 64, 2), Res(64),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))

class SmallOps(nn.Module):
    def __init__(self, d=64, layers=16):
        super().__init__()
        self.layers = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(d), nn.Linear(d, d), nn.GELU()) for _ in range(layers))
        self.head = nn.Linear(d, 10)

    def forward(self, x):
        for layer in self.layers:
            x = x + layer(x)
        return self.head(x)

torch.manual_seed(0)
if WORKLOAD == "gpt":
    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    xb = torch.randint(0, 2048, (8, 64))
    yb = torch.randint(0, 2048, (8, 64))
    def loss_of(out, y):
        return F.cross_entropy(out.flatten(0, 1), y.flatten())
elif WORKLOAD == "conv":
    model = convnet()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    xb, yb = torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))
    loss_of = F.cross_entropy
elif WORKLOAD == "lora":
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    base = LlamaForCausalLM(LlamaConfig(
        vocab_size=2048, hidden_size=128, intermediate_size=344, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=128))
    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    model = get_peft_model(base, LoraConfig(r=8, lora_alpha=16, target_modules=targets))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    xb = torch.randint(0, 2048, (4, 64))
    yb = torch.randint(0, 2048, (4, 64))
    def loss_of(out, y):
        return F.cross_entropy(out.logits.flatten(0, 1), y.flatten())
else:
    model = SmallOps()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    xb, yb = torch.randn(64, 64), torch.randint(0, 10, (64,))
    loss_of = F.cross_entropy

model.to(DEVICE)  # in place: the optimizer keeps the same parameters (no state yet)
xb, yb = xb.to(DEVICE), yb.to(DEVICE)
_vs_sync = torch.cuda.synchronize if DEVICE == "cuda" else (lambda: None)

def train_step():
    loss = loss_of(model(xb), yb)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    _vs_sync()  # a step's time is its GPU work's too (the same in every arm)

def train_block(k):
    w0, c0 = _vs_time.perf_counter(), _vs_time.process_time()
    times = []
    for _ in range(k):
        t0 = _vs_time.perf_counter()
        train_step()
        times.append(_vs_time.perf_counter() - t0)
    times.sort()
    return _vs_time.perf_counter() - w0, times[len(times) // 2]

def _vs_threads_cpu():
    # CPU seconds of each of the process's Python threads by name (per-thread clocks, ns)
    import threading
    out = {}
    for t in threading.enumerate():
        try:
            clock = _vs_time.pthread_getcpuclockid(t.ident)
            out[t.name] = out.get(t.name, 0.0) + _vs_time.clock_gettime(clock)
        except Exception:
            pass
    return out

train_block(3)
"""

WORKLOADS = {
    "gpt": "GPT-style decoder (3 blocks, d=128, 4 heads, batch 8 x 64 tokens, AdamW)",
    "conv": "conv net with BatchNorm and residuals (batch 16 x 3x32x32, SGD momentum)",
    "mlp": "many small ops (16 x LayerNorm+Linear(64)+GELU+residual, batch 64, Adam)",
    "lora": "peft LoRA (r=8, every linear layer adapted) on a Llama layout (4 layers, d=128, "
    "batch 4 x 64 tokens, AdamW over the adapters)",
}


class Bench:
    def __init__(self, kernel: Any, hz: float) -> None:
        self.k = kernel
        self.hz = hz
        self.state = "off"

    def switch(self, arm: str) -> None:
        """Into ``arm``'s state. The A/A arm runs as many cells as loading does (and
        leaving it as many as unloading), so no arm differs in what ran just before it."""
        loaded = arm not in ("off", "off2")
        if not loaded:
            if arm == "off2":
                for _ in range(3):
                    self.k.run_ok("pass")
            elif self.state != "off":
                self.k.run_ok("pass" if self.state == "off2" else "%unload_ext vramscope")
            self.state = arm
            return
        if self.state in ("off", "off2"):
            self.k.run_ok("%load_ext vramscope")
            stream = self.k.comm_open("stream")
            self.k.comm_data(stream, "hello")
        settings = SETTINGS[arm].replace("sample_hz=10,", f"sample_hz={self.hz:g},")
        self.k.run_ok(f"import vramscope as _vs; _ = _vs.settings({settings})")
        if (arm == "uncounted") != (self.state == "uncounted"):
            self.k.execute(HEAP_COUNTER.format("suspend" if arm == "uncounted" else "resume"))
        self.k.execute("pass")  # the settings cell's follow-up work lands here, not below
        self.state = arm

    def block(self, steps: int) -> tuple[float, float, float]:
        """(wall of the steps inside the cell, kernel CPU around the cell incl. 80 ms after,
        the median step's wall time). ``self.own`` gets the CPU seconds vramscope's own
        threads (named ``vramscope-*``) used meanwhile, and ``self.iopub`` the IOPub
        thread's (it sends every message)."""
        c0 = float(self.k.eval(CPU))  # silent executes: no cell hooks run for them
        t0 = self.k.eval("_vs_threads_cpu()")
        self.k.run_ok(f"_vs_last = train_block({steps})")
        time.sleep(AFTER_REPLY_S)  # the follow-up work has run by then
        c1 = float(self.k.eval(CPU))
        t1 = self.k.eval("_vs_threads_cpu()")
        grew = {name: t1[name] - t0.get(name, 0.0) for name in t1}
        self.own = sum(v for name, v in grew.items() if name.startswith("vramscope"))
        self.iopub = sum(v for name, v in grew.items() if "IOPub" in name)
        wall, median_step = self.k.eval("_vs_last")
        return float(wall), c1 - c0, float(median_step)


def quartiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) < 2:
        return values[0], values[0], values[0]
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def run_workload(kernel_cls: Any, bootstrap: str, name: str, args: argparse.Namespace) -> list[str]:
    kernel = kernel_cls()
    lines: list[str] = []
    try:
        kernel.run_ok("pass")
        kernel.execute(bootstrap, silent=True)
        kernel.run_ok("%unload_ext vramscope")
        kernel.run_ok(f"WORKLOAD, DEVICE = {name!r}, {args.device!r}\n" + SETUP)
        bench = Bench(kernel, args.hz)
        default_threads = int(kernel.eval("torch.get_num_threads()"))
        counts = {"default": (default_threads,), "1": (1,), "both": (default_threads, 1)}
        for threads in dict.fromkeys(counts[args.threads]):
            kernel.run_ok(f"torch.set_num_threads({threads})")
            kernel.run_ok("_vs_last = train_block(3)")  # warm-up at this thread count
            kernel.run_ok("_vs_last = train_block(3)")
            step = float(kernel.eval("_vs_last")[0]) / 3
            steps = max(3, round(args.block / step))
            arms = tuple(a for a in ARMS[1:] if a in args.arms.split(","))
            ratios: dict[str, list[tuple[float, ...]]] = {a: [] for a in arms}
            # pooled: (the arm's summed wall, its neighbours' summed geometric means)
            pooled: dict[str, list[float]] = {a: [0.0, 0.0] for a in arms}
            # direct cost: vramscope's threads' CPU and the IOPub thread's, summed over the
            # arm's blocks and over its neighbours' (their mean), against the arm's wall
            direct: dict[str, list[float]] = {a: [0.0, 0.0, 0.0] for a in arms}
            for r in range(args.rounds):
                order = arms[r % len(arms) :] + arms[: r % len(arms)]
                if r % 2:
                    order = order[::-1]
                # off, arm, off, arm, ..., off: every arm block sits between two off blocks
                # and is compared with their geometric mean, so drift of the machine's speed
                # within a round (other tenants, frequency) cancels to first order
                bench.switch("off")
                before = bench.block(steps)
                iopub_before = bench.iopub
                for arm in order:
                    bench.switch(arm)
                    got = bench.block(steps)
                    own, iopub = bench.own, bench.iopub
                    bench.switch("off")
                    after = bench.block(steps)
                    direct[arm][0] += own
                    direct[arm][1] += iopub - (iopub_before + bench.iopub) / 2
                    direct[arm][2] += got[0]
                    iopub_before = bench.iopub
                    base = [math.sqrt(x * y) for x, y in zip(before, after)]
                    ratios[arm].append(tuple(g / b for g, b in zip(got, base)))
                    pooled[arm][0] += got[0]
                    pooled[arm][1] += base[0]
                    before = after
            bench.switch("off")
            head = (
                f"{name}, {threads} thread{'s' if threads > 1 else ''}"
                f"{' (default)' if threads == default_threads else ''}: {steps} steps a block "
                f"(~{step * 1000:.0f} ms a step), {args.rounds} rounds"
            )
            lines.append(head)
            for arm in arms:
                w, c, m = (quartiles([x[i] for x in ratios[arm]]) for i in range(3))
                label = "off2 (A/A)" if arm == "off2" else arm
                lines.append(
                    f"  {label:<12} wall {w[1]:.3f} [{w[0]:.3f}..{w[2]:.3f}]   "
                    f"CPU {c[1]:.3f} [{c[0]:.3f}..{c[2]:.3f}]   "
                    f"median step {m[1]:.3f} [{m[0]:.3f}..{m[2]:.3f}]   "
                    f"pooled wall {pooled[arm][0] / pooled[arm][1]:.3f}   "
                    f"own threads {100 * direct[arm][0] / direct[arm][2]:.2f}% "
                    f"+ IOPub {100 * direct[arm][1] / direct[arm][2]:+.2f}% of its wall"
                )
            print("\n".join(lines[-len(arms) - 1 :]), flush=True)
    finally:
        kernel.close()
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--block", type=float, default=0.8, help="seconds of steps per block")
    parser.add_argument("--hz", type=float, default=10.0, help="the sampler's rate when on")
    parser.add_argument("--workloads", default="gpt,conv,mlp,lora")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where to train")
    parser.add_argument(
        "--arms", default=",".join(ARMS[1:]), help="the arms to run (off is always run)"
    )
    parser.add_argument(
        "--threads", choices=("default", "1", "both"), default="both", help="torch threads"
    )
    parser.add_argument("--quick", action="store_true", help="3 rounds of 0.3 s blocks")
    parser.add_argument("--record", action="store_true", help="write to bench/RESULTS.md")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.block = 3, 0.3

    sys.path.insert(0, str(ROOT / "test" / "python"))
    from kernel_harness import BOOTSTRAP, KernelHarness

    started = time.monotonic()
    lines = [
        "ratio = arm / the geometric mean of the off blocks just before and after it: median "
        "[quartiles] over rounds; wall = the "
        "steps timed inside the cell; CPU = the kernel process (all threads) from the "
        "execute request to 80 ms after the reply; median step = the block's median step "
        "(steady state: leaves out the cell's measured first step and bursts of load); "
        "pooled wall = the arm's summed wall over its neighbours' summed geometric means "
        "(every round weighed by its time: the mean, whose error falls as 1/sqrt(rounds)); "
        "own threads = the CPU time of vramscope's threads (sampler, timers, collector) during "
        "the arm's blocks, and IOPub = the IOPub thread's CPU above its neighbours' (the "
        "messages it sends), each as a share of the arm's wall: the direct cost, read from "
        "per-thread clocks, not from a difference of noisy block times",
    ]
    if args.device != "cpu":
        lines.append(f"device: {args.device} (every step synchronized)")
    for name in args.workloads.split(","):
        lines.append(f"{name}: {WORKLOADS[name]}")
        lines += run_workload(KernelHarness, BOOTSTRAP, name, args)
    lines.append(
        "targets: all <= 1.02, sampler <= 1.005 (each beside the A/A control's spread; "
        "sampler50 bounds the sampler's cost with 5x its ticks); "
        f"full run {time.monotonic() - started:.0f} s"
    )
    print(lines[-1])
    if args.record:  # a GPU's run goes to a section of its own, beside the CPU's
        record("training_overhead" + ("" if args.device == "cpu" else f" ({args.device})"), lines)


if __name__ == "__main__":
    main()

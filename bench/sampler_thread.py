"""Where the sampler thread's CPU goes during a training loop in a real kernel (issue 19).

A kernel with the bridge loaded as the front end loads it (a ``stream`` comm open) builds a
``peft`` LoRA model on a small Llama layout (as bench/module_cost.py's, ``--layers`` decoder
layers) and trains it in one long cell for ``--seconds``. Inside the kernel the sampler's
parts are timed with the thread's own CPU clock: the devices' reading (``tick``; of it the
glibc mallinfo2 calls), the batches it publishes (``flush``), and the waits between ticks
(``Waker.wait``: the wake-up, and taking the GIL back from a busy main thread). The thread's
total CPU comes from ``/proc/self/task/<tid>/stat`` (10 ms clock ticks: run for 20 s or
more). Printed as shares of the cell's wall time; ``--record`` writes them to
bench/RESULTS.md. No asserts: a breakdown, not a ratio (training_overhead.py has those).

    python bench/sampler_thread.py [--seconds 25] [--layers 4] [--record]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from _results import print_and_record

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "test" / "python"))

INSTRUMENT = """
import os as _os, threading as _th, time as _t
from vramscope.runtime import get_runtime as _get
_rt = _get(); _sm = _rt.sampler; _cpu = _rt.cpu
_acc = {"mallinfo2": 0.0, "reads": 0, "tick": 0.0, "ticks": 0, "flush": 0.0, "wait": 0.0}

def _timed(fn, key, count=None, sampler_only=False):
    def run(*a, **kw):
        if sampler_only and _th.current_thread().name != "vramscope-sampler":
            return fn(*a, **kw)
        start = _t.thread_time()
        try:
            return fn(*a, **kw)
        finally:
            _acc[key] += _t.thread_time() - start
            if count:
                _acc[count] += 1
    return run

_cpu._mallinfo2 = _timed(_cpu._mallinfo2, "mallinfo2", "reads", sampler_only=True)
if _cpu._mallinfo2_nogil is not None:
    _cpu._mallinfo2_nogil = _timed(_cpu._mallinfo2_nogil, "mallinfo2", "reads", True)
_sm.tick = _timed(_sm.tick, "tick", "ticks")
_sm.flush = _timed(_sm.flush, "flush")
_sm._wake.wait = _timed(_sm._wake.wait, "wait")

def _thread_cpu():
    for th in _th.enumerate():
        if th.name == "vramscope-sampler":
            with open(f"/proc/self/task/{th.native_id}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / _os.sysconf("SC_CLK_TCK")
    return 0.0
"""

LOOP = """
_c0, _w0 = _thread_cpu(), _t.monotonic()
_steps = 0
while _t.monotonic() - _w0 < {seconds}:
    model(input_ids=x, labels=x).loss.backward(); opt.step(); opt.zero_grad(); _steps += 1
_c1, _w1 = _thread_cpu(), _t.monotonic()
"""

REPORT = (
    "(lambda w: {'wall': w, 'steps': _steps, 'thread': (_c1 - _c0) / w, "
    "**{k: (v / w if isinstance(v, float) else v) for k, v in _acc.items()}})(_w1 - _w0)"
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=25.0)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()

    import module_cost
    from kernel_harness import KernelHarness

    setup = module_cost.LORA.format(layers=args.layers)
    kernel = module_cost.start(KernelHarness, True, setup)
    try:
        kernel.execute(INSTRUMENT, silent=True)
        kernel.execute(LOOP.format(seconds=args.seconds))
        r = kernel.eval(REPORT)
    finally:
        kernel.close()
    pct = {k: f"{v * 100:.2f}%" for k, v in r.items() if isinstance(v, float) and k != "wall"}
    reads, ticks = r["reads"], r["ticks"]
    wait_us = r["wait"] * r["wall"] / max(1, ticks) * 1e6
    lines = [
        f"`python bench/sampler_thread.py --seconds {args.seconds:g} --layers {args.layers}`: "
        f"a bridge kernel (stream comm open), peft LoRA on a {args.layers}-layer Llama layout "
        f"(width 64), one training cell of {r['wall']:.1f} s ({r['steps']} steps); the sampler "
        "at its default 10 Hz",
        f"the sampler thread's CPU (from /proc): {pct['thread']} of the cell's wall",
        f"of it, by the thread's own clock: devices' reading {pct['tick']} ({ticks} ticks; "
        f"mallinfo2 {pct['mallinfo2']} in {reads} calls, "
        f"{r['mallinfo2'] * r['wall'] / max(1, reads) * 1e3:.2f} ms each), publishing "
        f"{pct['flush']}, the waits between ticks {pct['wait']} ({wait_us:.0f} us of CPU a wait)",
    ]
    print_and_record("sampler_thread", lines, args.record)


if __name__ == "__main__":
    main()

"""Added latency per cell from the vramscope bridge, in a real kernel.

Round trips of a ``pass`` cell (execute_request -> execute_reply) are timed in interleaved
blocks with the bridge loaded (stream comm open, so ``cell`` messages are sent) and unloaded
(``%unload_ext vramscope``). The hook pair's own cost is also timed inside the kernel.
Prints medians, their ratio and the added ms (target < 0.5 ms); ``--record`` appends them
to bench/RESULTS.md. No asserts: numbers on a shared machine are noisy.

    python bench/cell_overhead.py [--rounds 6] [--cells 40] [--hz 10] [--torch] [--record]
"""

from __future__ import annotations

import argparse
import datetime
import platform
import statistics
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).with_name("RESULTS.md")
ROOT = Path(__file__).resolve().parents[1]


def record(name: str, lines: list[str]) -> None:
    """Append a section to bench/RESULTS.md (creates it; never rewrites other sections)."""
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    head = "" if RESULTS.exists() else "# Benchmark results\n"
    body = "\n".join(f"- {line}" for line in lines)
    with RESULTS.open("a", encoding="utf-8") as fh:
        fh.write(f"{head}\n## {name} ({stamp}, {platform.machine()})\n\n{body}\n")


HOOK_TIMER = """
import time as _t, types as _ty, vramscope.runtime as _r
_rt = _r.current_runtime()
_info = _ty.SimpleNamespace(cell_id="bench", raw_cell="pass")
_res = _ty.SimpleNamespace(success=True, error_in_exec=None, error_before_exec=None,
                           execution_count=1)
_n = 2000
_s = _t.perf_counter()
for _ in range(_n):
    _rt._pre_run_cell(_info); _rt._post_run_cell(_res)
_hook_us = (_t.perf_counter() - _s) / _n * 1e6
_rt.clear_history()
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--cells", type=int, default=40, help="cells per block")
    parser.add_argument("--hz", type=float, default=10.0, help="sample rate while loaded")
    parser.add_argument("--torch", action="store_true", help="import torch (insight runs too)")
    parser.add_argument("--record", action="store_true", help="append to bench/RESULTS.md")
    args = parser.parse_args()

    sys.path.insert(0, str(ROOT / "test" / "python"))
    from kernel_harness import BOOTSTRAP, KernelHarness

    kernel = KernelHarness()
    try:
        kernel.run_ok("import torch" if args.torch else "pass")
        kernel.execute(BOOTSTRAP, silent=True)
        on: list[float] = []
        off: list[float] = []
        for _ in range(args.rounds):
            for loaded in (True, False):
                kernel.run_ok("%load_ext vramscope" if loaded else "%unload_ext vramscope")
                if loaded:  # unloading closed the comms: open the stream again
                    kernel.run_ok(f"import vramscope; vramscope.settings(sample_hz={args.hz})")
                    stream = kernel.comm_open("stream")
                    kernel.comm_data(stream, "hello")
                block = on if loaded else off
                for _ in range(args.cells):
                    start = time.perf_counter()
                    kernel.execute("pass")
                    block.append(time.perf_counter() - start)
        kernel.run_ok("%load_ext vramscope")
        kernel.execute(HOOK_TIMER, silent=True)
        hook_us = float(kernel.eval("_hook_us"))
    finally:
        kernel.close()

    med_on, med_off = statistics.median(on), statistics.median(off)
    lines = [
        f"pass-cell round trip, bridge loaded:   median {med_on * 1000:.3f} ms (n={len(on)})",
        f"pass-cell round trip, bridge unloaded: median {med_off * 1000:.3f} ms (n={len(off)})",
        f"ratio {med_on / med_off:.3f}; added {(med_on - med_off) * 1000:+.3f} ms per cell "
        "(target < 0.5 ms)",
        f"pre+post hook pair inside the kernel: {hook_us:.1f} us per cell"
        + (" (torch imported: includes model insight)" if args.torch else " (torch not imported)")
        + f"; sampler at {args.hz:g} Hz",
    ]
    print("\n".join(lines))
    if args.record:
        record("cell_overhead" + (" (with torch)" if args.torch else ""), lines)


if __name__ == "__main__":
    main()

"""Added latency per cell from the vramscope bridge, in a real kernel.

Round trips of a ``pass`` cell (execute_request -> execute_reply) are timed in short blocks,
paired A/B with the bridge loaded (stream comm open, so ``cell`` messages are sent) and
unloaded (``%unload_ext vramscope``), the order alternating from pair to pair. Each block
times the cells two ways: spaced (``--gap`` apart, as a person runs them: the latency of one
cell) and queued all at once as JupyterLab's Run All sends them (the time per cell from the
first request to the last reply: whatever one cell leaves for after its reply lands in the
next one; the Run All starts 0.1 s after the spaced cells, as a person clicks it, so their own
follow-up work is not counted in it). Prints, for both, the median of the per-pair differences
and ratios of block medians (target < 0.5 ms added), the pooled medians, the kernel process's
CPU time per Run All cell, and the CPU time of the bridge's per-cell work timed inside the
kernel (the hooks and the follow-up work real cells run after their reply: the ``cell``
message, model insight); ``--record`` writes them to bench/RESULTS.md. No asserts: numbers on
a shared machine are noisy.

``--model`` (``m1k``, ``m10k``, ``lora``: module_cost.py's models, trained once) puts a model
in the kernel first (torch imported): the per-cell cost must not grow with it (issue 19); the
A/B in one kernel leaves out the kernel-to-kernel differences module_cost.py's arms carry.

    python bench/cell_overhead.py [--pairs 16] [--cells 25] [--run-all 100] [--hz 10]
                                  [--torch] [--model m1k] [--no-insight] [--gap 0.05]
                                  [--record]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from _results import record
from module_cost import MODELS

ROOT = Path(__file__).resolve().parents[1]
CPU = "__import__('time').process_time()"  # read by silent executes: no cell hooks run


HOOK_TIMER = """
def _vramscope_hook_timer(n=2000):
    # locals, not namespace variables: model insight would scan them after every cell
    import time, types, vramscope.runtime as r
    rt = r.current_runtime()
    info = types.SimpleNamespace(cell_id="bench", raw_cell="pass")
    res = types.SimpleNamespace(
        success=True, error_in_exec=None, error_before_exec=None, execution_count=1
    )
    start = time.perf_counter()
    for _ in range(n):
        rt._pre_run_cell(info)
        rt._post_run_cell(res)
    rt.after_reply.flush()  # the last cell's follow-up work
    elapsed = time.perf_counter() - start
    rt.clear_history()
    return elapsed / n * 1e6
_hook_us = _vramscope_hook_timer()
del _vramscope_hook_timer
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=16)
    parser.add_argument("--cells", type=int, default=25, help="spaced cells per block")
    parser.add_argument("--run-all", type=int, default=100, help="Run All cells per block")
    parser.add_argument("--hz", type=float, default=10.0, help="sample rate while loaded")
    parser.add_argument("--torch", action="store_true", help="import torch (insight runs too)")
    parser.add_argument(
        "--model", choices=sorted(MODELS), help="a model of module_cost.py in the kernel"
    )
    parser.add_argument(
        "--no-insight", action="store_true", help="setting insight=False (with --torch)"
    )
    parser.add_argument(
        "--gap",
        type=float,
        default=0.05,
        help="seconds between the spaced cells (the Run All cells are always queued at once)",
    )
    parser.add_argument("--record", action="store_true", help="write to bench/RESULTS.md")
    args = parser.parse_args()

    sys.path.insert(0, str(ROOT / "test" / "python"))
    from kernel_harness import BOOTSTRAP, KernelHarness

    kernel = KernelHarness()
    try:
        kernel.execute(BOOTSTRAP, silent=True)
        kernel.run_ok(
            MODELS[args.model][1] if args.model else "import torch" if args.torch else "pass"
        )
        on: list[list[float]] = []
        off: list[list[float]] = []
        on_all: list[float] = []
        off_all: list[float] = []
        cpu_on: list[float] = []
        cpu_off: list[float] = []
        for i in range(args.pairs):
            for loaded in (True, False) if i % 2 == 0 else (False, True):
                kernel.run_ok("%load_ext vramscope" if loaded else "%unload_ext vramscope")
                if loaded:  # unloading closed the comms: open the stream again
                    extra = ", insight=False" if args.no_insight else ""
                    kernel.run_ok(
                        f"import vramscope; vramscope.settings(sample_hz={args.hz}{extra})"
                    )
                    stream = kernel.comm_open("stream")
                    kernel.comm_data(stream, "hello")
                kernel.execute("pass")  # settle after the toggle
                block: list[float] = []
                for _ in range(args.cells):
                    if args.gap:
                        time.sleep(args.gap)  # as between cells a person runs
                    start = time.perf_counter()
                    kernel.execute("pass")
                    block.append(time.perf_counter() - start)
                (on if loaded else off).append(block)
                # the spaced cells' follow-up work (insight after the last one, 30 ms after it)
                # is theirs: the Run All starts later, as a person clicks it
                time.sleep(0.1)
                cpu = float(kernel.eval(CPU))
                start = time.perf_counter()  # Run All: every request sent at once
                for msg_id in [kernel.send_execute("pass") for _ in range(args.run_all)]:
                    kernel.reply(msg_id)
                (on_all if loaded else off_all).append((time.perf_counter() - start) / args.run_all)
                time.sleep(0.08)  # the last cell's follow-up work (30 ms idle) is counted too
                cpu = (float(kernel.eval(CPU)) - cpu) / args.run_all
                (cpu_on if loaded else cpu_off).append(cpu)
        kernel.run_ok("%unload_ext vramscope")
        kernel.run_ok("%load_ext vramscope")  # comms closed: no cell message to send
        kernel.execute(HOOK_TIMER, silent=True)
        hook_us = float(kernel.eval("_hook_us"))
        kernel.comm_data(kernel.comm_open("stream"), "hello")
        kernel.execute(HOOK_TIMER, silent=True)
        hook_stream_us = float(kernel.eval("_hook_us"))
    finally:
        kernel.close()

    med = statistics.median
    diffs = [(med(a) - med(b)) * 1000 for a, b in zip(on, off)]
    ratios = [med(a) / med(b) for a, b in zip(on, off)]
    q1, _, q3 = statistics.quantiles(diffs, n=4)
    pooled_on, pooled_off = med([t for b in on for t in b]), med([t for b in off for t in b])
    total = sum(map(sum, on)) / sum(map(sum, off))
    all_diffs = [(a - b) * 1000 for a, b in zip(on_all, off_all)]
    a1, _, a3 = statistics.quantiles(all_diffs, n=4)
    all_ratio = med([a / b for a, b in zip(on_all, off_all)])
    lines = [
        *([f"model in the kernel: {MODELS[args.model][0]}"] if args.model else []),
        f"{args.pairs} A/B pairs, order alternating; each block: {args.cells} pass cells "
        f"{args.gap * 1000:.0f} ms apart (the latency of a cell), then, 0.1 s later, "
        f"{args.run_all} queued at once as Run All sends them (time per cell: work done after "
        "one reply lands in the next)",
        f"spaced, added per cell, median of per-pair differences: {med(diffs):+.3f} ms "
        f"(quartiles {q1:+.3f}..{q3:+.3f}; target < 0.5 ms)",
        f"spaced, median per-pair ratio loaded/unloaded: {med(ratios):.3f}; total-time ratio "
        f"{total:.3f}; pooled medians: loaded {pooled_on * 1000:.3f} ms, unloaded "
        f"{pooled_off * 1000:.3f} ms (n={args.pairs * args.cells} each)",
        f"Run All, added per cell, median of per-pair differences: {med(all_diffs):+.3f} ms "
        f"(quartiles {a1:+.3f}..{a3:+.3f}; target < 0.5 ms); median ratio {all_ratio:.3f}; "
        f"per cell: loaded {med(on_all) * 1000:.3f} ms, unloaded {med(off_all) * 1000:.3f} ms",
        "Run All, kernel process CPU per cell (all threads, incl. the work after the last "
        f"reply): loaded {med(cpu_on) * 1e6:.0f} us, unloaded {med(cpu_off) * 1e6:.0f} us, "
        f"added {med([(a - b) * 1e6 for a, b in zip(cpu_on, cpu_off)]):+.0f} us "
        "(median of per-pair differences)",
        f"CPU time of the per-cell work inside the kernel (hooks + the follow-up work done after "
        f"the reply), after {2 * args.pairs * args.cells} cells: {hook_us:.1f} us per cell "
        f"without a stream comm, {hook_stream_us:.1f} us with one (the cell message is sent)"
        + (
            (
                " (torch imported, insight off)"
                if args.no_insight
                else " (torch imported: includes model insight)"
            )
            if args.torch or args.model
            else " (torch not imported)"
        )
        + f"; sampler at {args.hz:g} Hz",
    ]
    print("\n".join(lines))
    if args.record:
        title = "cell_overhead" + (" (with torch)" if args.torch else "")
        title += f" ({MODELS[args.model][0]})" if args.model else ""
        title += " (insight off)" if args.no_insight else ""
        record(title, lines)


if __name__ == "__main__":
    main()

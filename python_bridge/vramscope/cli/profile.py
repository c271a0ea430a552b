"""``vramscope profile``: run, write the reports, print the summary, apply the gates."""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from .gates import (
    EXIT_CELL_FAILED,
    EXIT_OK,
    Violation,
    check_baseline,
    check_budget,
    check_cell_budget,
    pick_device,
)
from .usage import UsageError, load


def _check_args(args: argparse.Namespace) -> Any:
    from ..exports import format_for

    if not args.notebook.is_file():
        raise UsageError(f"notebook not found: {args.notebook}")
    for path in args.output:
        try:
            format_for(path)
        except ValueError as err:
            raise UsageError(str(err)) from None
    return load(args.baseline, "baseline") if args.baseline else None


def profile(args: argparse.Namespace, out: TextIO) -> int:
    from ..exports import with_notebook, write_report
    from .progress import Progress
    from .runner import run_notebook
    from .summary import summary_lines

    baseline = _check_args(args)
    progress = Progress(args.device)
    try:
        result, _nb = run_notebook(
            args.notebook,
            timeout=args.timeout,
            kernel_name=args.kernel,
            on_cell=progress.cell,
            cpu_peak=getattr(args, "cpu_peak", "exact"),
        )
    finally:
        progress.finish()
    report = with_notebook(result.report, args.notebook.name)
    for path in args.output:
        for written in write_report(report, path, overwrite=True):  # named on the command line
            sys.stderr.write(f"vramscope: wrote {written}\n")
    device = pick_device(report, args.device)
    if not any(device in (c.get("devices") or {}) for c in report.get("cells") or []):
        sys.stderr.write(f"vramscope: warning: no cell was measured on {device}\n")
    for line in summary_lines(report, device, str(args.notebook)):
        out.write(line + "\n")
    violations: list[Violation] = []
    if result.failure is not None:
        f = result.failure
        what = {"timeout": "timed out", "dead-kernel": "killed the kernel"}.get(f.kind, "failed")
        ident = f"id {f.cell_id!r}, " if f.cell_id else ""
        violations.append(
            Violation(
                EXIT_CELL_FAILED,
                f"code cell {f.index + 1} ({ident}{f.code_head[:60]}) {what}: {f.message}",
            )
        )
    if args.budget is not None:
        violations += check_budget(report, device, args.budget)
    if args.cell_budget is not None:
        violations += check_cell_budget(report, device, args.cell_budget)
    if baseline is not None:
        violations += check_baseline(baseline, report, device, args.tolerance)
    for v in violations:
        sys.stderr.write(f"vramscope: FAIL ({v.code}): {v.message}\n")
    if not violations:
        out.write("vramscope: all gates passed\n")
        return EXIT_OK
    return min(v.code for v in violations)

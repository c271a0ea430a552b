"""``vramscope``: profile a notebook headless and gate CI on its memory; compare two reports.

    vramscope profile NOTEBOOK.ipynb [-o report.{html,json,md,csv}]... [--budget 8GiB]
        [--cell-budget 2GiB] [--baseline old.json --tolerance 10%] [--timeout S]
        [--kernel NAME] [--device cuda:0] [--cpu-peak exact|sampled]
    vramscope compare old.json new.json [--device cuda:0] [-o compare.html]

Exit codes: ``vramscope.cli.gates`` (0 ok, 1 internal, 2 usage, 3 cell failed, 4 budget,
5 cell budget, 6 baseline regression).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from .. import __version__
from .gates import EXIT_INTERNAL, EXIT_OK, EXIT_USAGE
from .usage import UsageError, load


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # usage errors exit with EXIT_USAGE (argparse: 2)
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    from .units import parse_size, parse_tolerance

    parser = _Parser(prog="vramscope", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"vramscope {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p = sub.add_parser("profile", help="run a notebook in a fresh kernel and report its memory")
    p.add_argument("notebook", type=Path)
    p.add_argument(
        "-o",
        "--output",
        action="append",
        default=[],
        type=Path,
        help="report file; the suffix picks the format (.html .json .md .csv); repeatable",
    )
    p.add_argument("--budget", type=parse_size, help="max memory in use on the device, e.g. 8GiB")
    p.add_argument("--cell-budget", type=parse_size, help="max peak rise of any cell, e.g. 2GiB")
    p.add_argument("--baseline", type=Path, help="a JSON report to compare each cell's peak with")
    p.add_argument(
        "--tolerance",
        type=parse_tolerance,
        default=0.10,
        help="allowed peak growth over the baseline (default 10%%)",
    )
    p.add_argument("--timeout", type=float, help="seconds a cell may run (default: no limit)")
    p.add_argument("--kernel", help="kernel name (default: the notebook's kernelspec)")
    p.add_argument(
        "--device",
        help="device the summary and gates use (default: the first accelerator, else cpu)",
    )
    p.add_argument(
        "--cpu-peak",
        choices=("exact", "sampled"),
        default="exact",
        help="CPU peaks counted op by op (default) or sampled as in a notebook",
    )
    c = sub.add_parser("compare", help="per-cell differences of two JSON reports")
    c.add_argument("old", type=Path)
    c.add_argument("new", type=Path)
    c.add_argument("--device", help="device to compare (default as for profile)")
    c.add_argument("-o", "--output", type=Path, help="also write the comparison as HTML")
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    args = build_parser().parse_args(argv)
    try:
        if args.command == "compare":
            return _compare(args, out)
        _without_iri_grammars()
        from .profile import profile

        return profile(args, out)
    except UsageError as err:
        sys.stderr.write(f"vramscope: error: {err}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        sys.stderr.write("vramscope: interrupted\n")
        return 130
    except Exception as exc:  # a bug of ours: say so, distinctly from a gate
        sys.stderr.write(f"vramscope: internal error: {type(exc).__name__}: {exc}\n")
        return EXIT_INTERNAL


def _without_iri_grammars() -> None:
    """Spare this process ~2 s of CPU before it imports nbformat.

    nbformat imports jsonschema, and jsonschema's format module imports ``rfc3987_syntax``
    when it is installed (JupyterLab's ``jsonschema[format-nongpl]`` brings it) for the
    optional ``iri`` format check, and that module compiles ~40 lark grammars as it is
    imported: ~2 s of CPU before a notebook's first cell, ~5 times what the rest of this
    process costs. Nothing here checks string formats (nbformat validates without a format
    checker), so the module is marked as absent, for this process only (the CLI's: never a
    kernel, whose imports are the user's), unless something imported it already.
    """
    if "jsonschema" not in sys.modules:
        sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]


def _compare(args: argparse.Namespace, out: TextIO) -> int:
    from .compare import print_compare
    from .gates import pick_device

    old, new = load(args.old, "old report"), load(args.new, "new report")
    print_compare(old, new, pick_device(new, args.device), out)
    if args.output is not None:
        from .compare import write_compare_html

        out.write(f"wrote {write_compare_html(old, new, args.output)}\n")
    return EXIT_OK

"""The CLI's parts without a kernel: sizes, tolerances, the gates and the progress bar."""

from __future__ import annotations

import argparse
import io
from typing import Any

import pytest

from vramscope.cli.gates import (
    EXIT_BUDGET,
    EXIT_REGRESSION,
    check_baseline,
    check_budget,
    check_cell_budget,
    pick_device,
)
from vramscope.cli.progress import Progress
from vramscope.cli.runner import CellDone
from vramscope.cli.units import parse_size, parse_tolerance

MIB = 1 << 20


def test_sizes_and_tolerances() -> None:
    assert parse_size("8GiB") == 8 << 30
    assert parse_size("2GB") == 2_000_000_000
    assert parse_size("512 MiB") == 512 * MIB
    assert parse_size("1e9") == 1_000_000_000
    assert parse_size("1.5KiB") == 1536
    for bad in ("", "lots", "-1GiB", "0", "3 parsecs"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_size(bad)
    assert parse_tolerance("10%") == pytest.approx(0.1)
    assert parse_tolerance("0.25") == pytest.approx(0.25)
    for bad in ("ten", "-5%", "nan"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_tolerance(bad)


def cell(cell_id: str, count: int, before: int, delta: int, peak: int, dev: str = "cpu") -> Any:
    return {
        "cell_id": cell_id,
        "execution_count": count,
        "start_time": 100.0 + count,
        "duration": 0.5,
        "code_head": f"step_{cell_id}()",
        "devices": {
            dev: {
                "before_bytes": before,
                "after_bytes": before + delta,
                "delta_bytes": delta,
                "peak_delta_bytes": peak,
            }
        },
    }


def test_gates_name_the_cell() -> None:
    report = {
        "cells": [
            cell("a", 1, 100 * MIB, 10 * MIB, 20 * MIB),
            cell("b", 2, 110 * MIB, 0, 900 * MIB),
        ],
        "samples": [{"t": 102.2, "d": {"cpu": {"used": 999 * MIB}}}],
    }
    assert pick_device(report, None) == "cpu"
    assert check_budget(report, "cpu", 2 << 30) == []
    (v,) = check_budget(report, "cpu", 500 * MIB)
    assert v.code == EXIT_BUDGET and "cell [2] (id 'b', step_b())" in v.message
    # only a sample shows it: named by the cell running at that time
    only_sample = {
        "cells": report["cells"][:1],
        "samples": [{"t": 101.2, "d": {"cpu": {"used": 999 * MIB}}}],
    }
    (v,) = check_budget(only_sample, "cpu", 500 * MIB)
    assert "during cell [1] (id 'a'" in v.message
    assert [
        x.message.split(" by ")[1][:8] for x in check_cell_budget(report, "cpu", 100 * MIB)
    ] == ["cell [2]"]
    with_cuda = {"cells": [cell("g", 1, 0, 5, 5, "cuda:0"), cell("c", 2, 0, 5, 5)]}
    assert pick_device(with_cuda, None) == "cuda:0" and pick_device(with_cuda, "cpu") == "cpu"


def test_baseline_tolerance_and_noise_floor() -> None:
    old = {
        "cells": [
            cell("a", 1, 0, 0, 100 * MIB),
            cell("b", 2, 0, 0, 100 * KIB),
            cell("gone", 3, 0, 0, MIB),
        ]
    }
    new = {
        "cells": [
            cell("a", 5, 0, 0, 109 * MIB),
            cell("b", 6, 0, 0, 900 * KIB),
            cell("new", 7, 0, 0, 50 * MIB),
        ]
    }
    assert check_baseline(old, new, "cpu", 0.10) == []  # +9% and a sub-MiB growth
    (v,) = check_baseline(old, new, "cpu", 0.05)
    assert v.code == EXIT_REGRESSION and "id 'a'" in v.message and "+9%" in v.message


KIB = 1024


def test_progress_bar_on_a_tty_and_lines_otherwise() -> None:
    record = cell("a", 3, 0, 64 * MIB, 65 * MIB)
    record["ok"] = True
    tty = io.StringIO()
    tty.isatty = lambda: True  # type: ignore[method-assign]
    bar = Progress(None, tty)
    bar.cell(CellDone(0, 2, "a", record))
    bar.cell(CellDone(1, 2, "a", record))
    text = tty.getvalue()
    assert text.startswith("\r\x1b[2K[############............] 1/2 [3] cpu: delta +64.0 MiB")
    assert "[########################] 2/2" in text and text.endswith("\n")
    plain = io.StringIO()
    Progress(None, plain).cell(CellDone(0, 2, "a", record))
    assert plain.getvalue() == (
        "cell 1/2 [3] cpu: delta +64.0 MiB, peak +65.0 MiB (0.50 s)  step_a()\n"
    )


def test_profile_imports_nbformat_without_the_iri_grammars(tmp_path: Any) -> None:
    """`vramscope profile` marks ``rfc3987_syntax`` absent before nbformat (and so jsonschema)
    is imported: its ~40 lark grammars are never compiled, and nbformat still validates."""
    import subprocess
    import sys

    nb = tmp_path / "ok.ipynb"
    code = (
        "import sys\n"
        "from vramscope.cli import _without_iri_grammars\n"
        "_without_iri_grammars()\n"
        "import nbformat, jsonschema\n"
        "from nbformat.v4 import new_notebook, new_code_cell\n"
        f"nbformat.write(new_notebook(cells=[new_code_cell('pass')]), {str(nb)!r})\n"
        f"nbformat.validate(nbformat.read({str(nb)!r}, as_version=4))\n"
        "bad = nbformat.v4.new_notebook(); bad.cells = [{'cell_type': 'nope'}]\n"
        "try:\n"
        "    nbformat.validate(bad)\n"
        "except nbformat.ValidationError:\n"
        "    print('invalid notebook caught')\n"
        "print(sorted(m for m in ('lark', 'rfc3987_syntax') if sys.modules.get(m)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout.split("\n")
    assert out[:2] == ["invalid notebook caught", "[]"], out

"""``vramscope profile`` / ``compare`` end to end: small generated notebooks in fresh kernels,
one per exit code of the gates, checked against sizes the test allocates (bytearrays: exact
malloc'd bytes, no torch needed, so each run takes a few seconds)."""

from __future__ import annotations

import asyncio
import io
import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from vramscope.cli import main
from vramscope.cli.gates import (
    EXIT_BUDGET,
    EXIT_CELL_BUDGET,
    EXIT_CELL_FAILED,
    EXIT_OK,
    EXIT_REGRESSION,
    EXIT_USAGE,
)
from vramscope.cli.runner import ProfileClient
from vramscope.exports import load_report

pytestmark = pytest.mark.kernel
MIB = 1 << 20


def notebook(
    path: Path, cells: list[tuple[str, str]], tags: dict[str, list[str]] | None = None
) -> Path:
    nb = new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    for cell_id, source in cells:
        cell = new_code_cell(source)
        cell.id = cell_id
        if tags and cell_id in tags:
            cell.metadata["tags"] = tags[cell_id]
        nb.cells.append(cell)
    nbformat.write(nb, str(path))
    return path


def run(*argv: Any) -> tuple[int, str, str]:
    """``vramscope`` through its console script (the installed entry point)."""
    exe = Path(sys.executable).with_name("vramscope")
    proc = subprocess.run([str(exe), *map(str, argv)], capture_output=True, text=True, timeout=240)
    return proc.returncode, proc.stdout, proc.stderr


def cpu(report: dict[str, Any], cell_id: str) -> dict[str, int]:
    cell = next(c for c in report["cells"] if c["cell_id"] == cell_id)
    return cell["devices"]["cpu"]


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One passing run: every report format written, per-cell figures on record."""
    d = tmp_path_factory.mktemp("cli")
    nb = notebook(
        d / "alloc.ipynb",
        [("small", "a = bytearray(16 * 2**20)"), ("big", "b = bytearray(32 * 2**20)")],
    )
    outs = {s: d / f"base.{s}" for s in ("json", "html", "md", "csv")}
    rc, out, err = run(
        "profile",
        nb,
        *(a for p in outs.values() for a in ("-o", p)),
        "--budget",
        "8GiB",
        "--cell-budget",
        "1GiB",
    )
    assert rc == EXIT_OK, err
    assert "all gates passed" in out and "alloc.ipynb" in out
    assert "cell 2/2 [2] cpu: delta +32.0 MiB" in err  # plain progress lines off a TTY
    return {"dir": d, "notebook": nb, **outs}


def test_profile_records_every_cell_under_its_id(baseline: dict[str, Path]) -> None:
    report = load_report(baseline["json"])
    assert [c["cell_id"] for c in report["cells"]] == ["small", "big"]
    assert cpu(report, "small")["delta_bytes"] == pytest.approx(16 * MIB, abs=64 * 1024)
    assert cpu(report, "big")["delta_bytes"] == pytest.approx(32 * MIB, abs=64 * 1024)
    assert report["notebook"] == "alloc.ipynb"
    assert "vramscope report: alloc.ipynb" in baseline["html"].read_text()
    assert "## Worst cells by peak" in baseline["md"].read_text()
    assert baseline["csv"].read_text().startswith("execution_count,cell_id")


def test_budget_exceeded(baseline: dict[str, Path]) -> None:
    rc, _, err = run("profile", baseline["notebook"], "--budget", "1MiB")
    assert rc == EXIT_BUDGET, err
    assert "budget exceeded on cpu by cell [1] (id 'small'" in err


def test_cell_budget_exceeded(baseline: dict[str, Path]) -> None:
    rc, _, err = run("profile", baseline["notebook"], "--cell-budget", "20MiB")
    assert rc == EXIT_CELL_BUDGET, err
    assert "cell budget exceeded on cpu by cell [2] (id 'big', b = bytearray" in err
    assert "'small'" not in err  # 16 MiB is within the cell budget


def test_baseline_regression_and_compare(baseline: dict[str, Path]) -> None:
    d = baseline["dir"]
    grown = notebook(
        d / "grown.ipynb",
        [("small", "a = bytearray(16 * 2**20)"), ("big", "b = bytearray(48 * 2**20)")],
    )
    new = d / "grown.json"
    rc, _, err = run(
        "profile", grown, "-o", new, "--baseline", baseline["json"], "--tolerance", "10%"
    )
    assert rc == EXIT_REGRESSION, err
    assert "regression on cpu in cell [2] (id 'big'" in err and "+50%" in err
    assert "'small'" not in err.split("vramscope: FAIL")[-1]
    out = io.StringIO()
    assert main(["compare", str(baseline["json"]), str(new)], out) == EXIT_OK
    table = out.getvalue().splitlines()
    big = next(line for line in table if line.startswith("[2]"))
    assert "+32.0 MiB" in big and "+48.0 MiB" in big and "+16.0 MiB (+50%)" in big


def test_failed_cell_and_allowed_error(tmp_path: Path) -> None:
    nb = notebook(
        tmp_path / "fail.ipynb",
        [
            ("allowed", "raise ValueError('expected')"),
            ("boom", "1 / 0"),
            ("never", "c = bytearray(2**20)"),
        ],
        tags={"allowed": ["raises-exception"]},
    )
    out_json = tmp_path / "fail.json"
    rc, _, err = run("profile", nb, "-o", out_json)
    assert rc == EXIT_CELL_FAILED, err
    assert "code cell 2 (id 'boom', 1 / 0) failed: ZeroDivisionError" in err
    report = load_report(out_json)  # the reports are still written, up to the failed cell
    assert [c["cell_id"] for c in report["cells"]] == ["allowed", "boom"]


def test_timeout(tmp_path: Path) -> None:
    nb = notebook(tmp_path / "slow.ipynb", [("slow", "import time\ntime.sleep(60)")])
    rc, _, err = run("profile", nb, "--timeout", "2")
    assert rc == EXIT_CELL_FAILED, err
    assert "code cell 1 (id 'slow', import time) timed out" in err


def test_a_kernel_dead_before_its_first_reply_is_started_again(tmp_path: Path) -> None:
    """One of the ports jupyter_client picked is taken before the kernel binds it (held here:
    the kernel cannot bind its control port and dies): the run starts it again on new ports,
    once, and profiles the notebook in it."""
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    port = held.getsockname()[1]
    managers: list[Any] = []

    class PortTaken(ProfileClient):
        def create_kernel_manager(self) -> Any:
            km = super().create_kernel_manager()
            if not managers:
                km.cache_ports = False  # else its provisioner picks every port anew
                km.control_port = port
            managers.append(km)
            return km

    nb = nbformat.read(notebook(tmp_path / "two.ipynb", [("add", "print(1 + 1)")]), as_version=4)
    report = tmp_path / "report.json"
    report.touch()
    try:
        result = asyncio.run(
            PortTaken(nb, timeout=60, resources={"metadata": {"path": str(tmp_path)}}).profile(
                str(report)
            )
        )
    finally:
        held.close()
    assert [km.control_port == port for km in managers] == [True, False]
    assert result.failure is None
    assert nb.cells[0].outputs[0]["text"] == "2\n"
    assert [c["cell_id"] for c in result.report["cells"]] == ["add"]


def test_usage_errors(tmp_path: Path) -> None:
    assert run("profile", tmp_path / "missing.ipynb")[0] == EXIT_USAGE
    assert run("profile", tmp_path / "x.ipynb", "--budget", "lots")[0] == EXIT_USAGE
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema": "nope"}))
    rc, _, err = run("compare", bad, bad)
    assert rc == EXIT_USAGE and "not a vramscope report" in err
    nb = notebook(tmp_path / "ok.ipynb", [("a", "pass")])
    rc, _, err = run("profile", nb, "-o", tmp_path / "r.pdf")
    assert rc == EXIT_USAGE and "cannot tell the report format" in err

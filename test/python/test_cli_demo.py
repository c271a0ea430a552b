"""``vramscope profile examples/demo.ipynb`` against the same cells run in a kernel the way
JupyterLab runs them (execute requests with a cellId, bridge bootstrapped): the per-cell
figures of the cells with deterministic allocations agree within 1%."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest

from vramscope.exports import load_report

pytestmark = pytest.mark.kernel
DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo.ipynb"
MIB = 1 << 20
# (cell id, figure): the 64 MiB tensor, its deletion, and the 128 MiB temporary's peak
CHECKED = [("code-05", "delta_bytes"), ("code-07", "delta_bytes"), ("code-09", "peak_delta_bytes")]


def in_kernel_figures() -> dict[str, dict[str, int]]:
    from kernel_harness import BOOTSTRAP, KernelHarness

    nb = nbformat.read(str(DEMO), as_version=4)
    last = max(i for i, c in enumerate(nb.cells) if c.get("id") == CHECKED[-1][0])
    harness = KernelHarness()
    try:
        assert harness.execute(BOOTSTRAP, silent=True)["content"]["status"] == "ok"
        for cell in nb.cells[: last + 1]:
            if cell.cell_type == "code":
                harness.run_ok(cell.source, cell_id=cell.id)
        cells = harness.eval("__import__('vramscope').session_report()['cells']")
    finally:
        harness.close()
    return {c["cell_id"]: c["devices"]["cpu"] for c in cells if c["cell_id"]}


def test_cli_matches_an_in_kernel_run(tmp_path: Path) -> None:
    out = tmp_path / "demo.json"
    exe = Path(sys.executable).with_name("vramscope")
    proc = subprocess.run(
        [str(exe), "profile", str(DEMO), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    cli: dict[str, Any] = {c["cell_id"]: c["devices"]["cpu"] for c in load_report(out)["cells"]}
    code_ids = [c.id for c in nbformat.read(str(DEMO), as_version=4).cells if c.cell_type == "code"]
    assert list(cli) == code_ids  # every code cell, under its notebook id
    lab = in_kernel_figures()
    for cell_id, key in CHECKED:
        expected = lab[cell_id][key]
        assert abs(expected) > 60 * MIB  # the cells allocate tens of MiB: 1% is ~0.6 MiB
        assert cli[cell_id][key] == pytest.approx(expected, rel=0.01), (cell_id, key)

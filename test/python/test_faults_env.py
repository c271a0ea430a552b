"""Faults of the kernel's environment, in real kernels: torch hidden from the kernel (its
``sys.modules['torch'] = None`` set by a ``sitecustomize`` on PYTHONPATH, and torch not
findable at all) still gives per-cell CPU memory and clear messages, never an error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from faults_session import MIB, Session

pytestmark = pytest.mark.kernel

HIDDEN = "import sys\nsys.modules['torch'] = None\n"
# torch not installed: a finder ahead of the others says so, as an absent package would
MISSING = """import sys

class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NoTorch())
"""


@pytest.fixture(params=["hidden", "missing"])
def no_torch(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Session]:
    (tmp_path / "sitecustomize.py").write_text(HIDDEN if request.param == "hidden" else MISSING)
    session = Session(env={"PYTHONPATH": str(tmp_path)})
    try:
        yield session
    finally:
        session.close()


def test_without_torch_cpu_cells_and_clear_messages(no_torch: Session) -> None:
    s = no_torch
    reply = s.k.execute("import torch", "import")
    assert reply["content"]["status"] == "error"
    hello = s.hello
    assert [d["id"] for d in hello["devices"]] == ["cpu"]
    assert "torch is not installed" in " ".join(hello["warnings"]), hello["warnings"]
    assert hello["kernel"]["torch_version"] is None
    data = s.cell("x = bytearray(32 * 1024 * 1024)", "cpu-cell")
    cpu = data["record"]["devices"]["cpu"]
    assert abs(cpu["delta_bytes"] - 32 * MIB) <= 0.02 * 32 * MIB, cpu
    # every request answers: insight/advice say why they are empty, the report is whole
    insight = s.result("get_insight")["insight"]
    assert insight["layers"] == [] and "torch" in (insight["skipped"] or ""), insight
    report = s.result("get_report")
    assert [c["cell_id"] for c in report["cells"]][-1] == "cpu-cell"
    for method, params in (
        ("get_devices", {}),
        ("get_samples", {}),
        ("export_report", {"format": "markdown"}),
        ("get_advice", {}),
        ("get_processes", {}),
    ):
        answer = s.request(method, params)
        assert answer["type"] == "reply", (method, answer)
    # no internal error reached the panel
    errors = [
        m["content"]["data"]
        for m in s.k.iopub
        if m["msg_type"] == "comm_msg" and m["content"]["data"].get("type") == "error"
    ]
    assert errors == [], errors

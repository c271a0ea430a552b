"""A holders scan over its time budget is partial, never a warning, and completes itself:
it continues where it stopped while the kernel is idle, until the list is complete."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from test_kernel_insight import Session
from test_protocol_fixtures import validate_kernel_message

pytestmark = pytest.mark.kernel
MIB = 2**20
DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo.ipynb"


@pytest.fixture
def session() -> Iterator[Session]:
    s = Session(cold=False)  # warm: what these tests read does not depend on torch's import
    yield s
    s.k.close()


def insights_until_complete(session: Session, first: dict[str, Any]) -> list[dict[str, Any]]:
    """``first`` and the insights that follow it until one is not partial."""
    seen = [first]
    while seen[-1].get("partial"):
        assert not seen[-1]["skipped"], seen[-1]["skipped"]
        seen.append(session.k.comm_data(session.stream, "insight", timeout=20)["insight"])
    return seen


def no_notices(session: Session, start: int) -> None:
    notices = list(session.k.messages_between(start, session.stream, "notice"))
    assert not notices, [n["content"]["data"] for n in notices]


def test_150_variables_are_all_listed(session: Session) -> None:
    session.cell("import torch", "hp-import")
    reply = session.k.request(session.control, "set_settings", {"insight_budget_ms": 0.5})
    assert reply["type"] == "reply"
    start = len(session.k.iopub)
    code = "for _i in range(150):\n    globals()[f'v{_i}'] = torch.ones(MIB // 4)\ndel _i"
    first = session.cell_insight("MIB = 2**20\n" + code, "hp-150")
    assert first.get("partial") is True and first["skipped"] is None
    assert len(first["holders"]) < 150
    final = insights_until_complete(session, first)[-1]
    names = {h["name"]: h["bytes"] for h in final["holders"]}
    assert names == {f"v{i}": MIB for i in range(150)}
    no_notices(session, start)
    # the same list as one unbounded scan (an on-demand snapshot, 2 s budget)
    snapshot = session.k.request(session.control, "get_insight", {})["result"]["insight"]
    assert snapshot["holders"] == final["holders"] and "partial" not in snapshot


def test_the_demo_holders_are_complete(session: Session) -> None:
    cells = [
        "".join(c["source"])
        for c in json.loads(DEMO.read_text(encoding="utf-8"))["cells"]
        if c["cell_type"] == "code"
    ]
    session.cell(cells[0], "demo-0")  # import torch, vramscope
    session.k.request(session.control, "set_settings", {"insight_budget_ms": 1})
    start = len(session.k.iopub)
    for i, code in enumerate(cells[1:-1], start=1):
        if "losses.append(loss)  #" in code:
            break  # stop with the leak in place: the list holds 8 graphs
        session.k.execute(code.replace("range(15)", "range(2)"), f"demo-{i}")  # quicker
    first = session.cell_insight(code, "demo-leak")
    seen = insights_until_complete(session, first)
    final = seen[-1]
    # the scan's later slices change only the holders: they leave the layer rows out
    # (layers_unchanged, since 1.1); the front end (here the harness) keeps the first's
    assert first["layers"] and "layers_unchanged" not in first
    later = seen[1:]
    assert later and all(m.get("layers_unchanged") is True for m in later), later
    assert all(m["layers"] == first["layers"] and m["model"] == first["model"] for m in later)
    validate_kernel_message({"type": "insight", "insight": later[0]})
    holders = {h["name"]: h for h in final["holders"]}
    assert {"model", "optimizer", "losses"} <= set(holders), sorted(holders)
    assert holders["losses"]["kind"] == "graph_retention"
    no_notices(session, start)
    snapshot = session.k.request(session.control, "get_insight", {})["result"]["insight"]
    assert snapshot["holders"] == final["holders"]
    # a page that asked (or said hello) may hold other layers: the next insight is whole
    after = session.cell_insight("x = torch.ones(64 * 1024)", "demo-after")
    assert after["layers"] and "layers_unchanged" not in after
    # then a cell that runs no model changes no layer: they are left out again
    again = session.cell_insight("y = torch.ones(64 * 1024)", "demo-again")
    assert again["layers_unchanged"] is True and again["layers"] == after["layers"]
    # a cell that changes nothing shown gets no insight at all; the next that does, one
    insights_until_complete(session, again)  # its scan's later slices first
    start = len(session.k.iopub)
    session.cell("pass", "demo-pass")
    with pytest.raises(TimeoutError):  # its follow-up work runs 5 ms after the reply
        session.k.wait_iopub(lambda m: m["content"].get("data", {}).get("type") == "insight", 1)
    assert not list(session.k.messages_between(start, session.stream, "insight"))
    changed = session.cell_insight("z = torch.ones(2**19)", "demo-z")  # 2 MiB: listed
    final = insights_until_complete(session, changed)[-1]
    assert "z" in {h["name"] for h in final["holders"]}, final["holders"]

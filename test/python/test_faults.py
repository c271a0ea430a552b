"""Faults in real kernels (jupyter_client): restart mid-cell, SIGKILL and its replacement,
``%reset -f``, user code that removes or breaks IPython's event callbacks, an out-of-memory
error inside a cell, and a bridge of another protocol major. Each test gets its own kernel."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from faults_session import MIB, Session
from kernel_harness import BOOTSTRAP

pytestmark = pytest.mark.kernel


@pytest.fixture
def s() -> Iterator[Session]:
    session = Session()
    try:
        yield session
    finally:
        session.close()


def _within(value: int, expected: int, tolerance: float = 0.02) -> bool:
    return abs(value - expected) <= tolerance * expected


def test_restart_mid_cell_gives_a_fresh_bridge_that_records(s: Session) -> None:
    s.cell("import time; kept = 1", "before")
    old_session = s.hello["session_id"]
    old_pid = s.pid()
    s.k.send_execute("time.sleep(120)", "sleeping")
    s.k.wait_iopub(
        lambda m: m["msg_type"] == "status" and m["content"]["execution_state"] == "busy"
    )
    s.restart()
    assert s.pid() != old_pid
    # a new kernel: a new session, no cells of the old one, and it measures at once
    assert s.hello["session_id"] != old_session
    assert s.hello["cells"] == []
    data = s.cell("x = bytearray(32 * 1024 * 1024)", "after-restart")
    cpu = data["record"]["devices"]["cpu"]
    assert data["record"]["ok"] is True and _within(cpu["delta_bytes"], 32 * MIB), cpu
    assert s.next_of("samples")["samples"]


def test_sigkill_then_replacement_kernel_records_from_scratch(s: Session) -> None:
    s.cell("a = bytearray(8 * 1024 * 1024)", "old-1")
    assert [c["cell_id"] for c in s.result("get_report")["cells"]] == ["old-1"]
    s.sigkill_and_replace()
    assert s.hello["cells"] == []
    data = s.cell("b = bytearray(16 * 1024 * 1024)", "new-1")
    assert _within(data["record"]["devices"]["cpu"]["delta_bytes"], 16 * MIB)
    report = s.result("get_report")
    assert [c["cell_id"] for c in report["cells"]] == ["new-1"]


def test_reset_f_keeps_recording_and_insight(s: Session) -> None:
    s.cell("import torch\nm = torch.nn.Linear(256, 256)", "model")
    s.next_of("insight")
    s.cell("%reset -f", "reset")
    # the bootstrap's name went with the namespace; the hooks and comms did not
    data = s.cell("import torch\nx = torch.ones(8 * 1024 * 1024)", "after-reset")
    assert _within(data["record"]["devices"]["cpu"]["delta_bytes"], 32 * MIB)
    insight = s.next_of("insight")["insight"]
    names = [h["name"] for h in insight["holders"]]
    assert "x" in names and "m" not in names, names
    ids = [c["cell_id"] for c in s.result("get_report")["cells"]]
    assert ids[-3:] == ["model", "reset", "after-reset"]


@pytest.mark.parametrize("event", ["pre_run_cell", "post_run_cell", "post_execute"])
def test_cleared_callbacks_are_put_back_with_a_notice(s: Session, event: str) -> None:
    s.k.execute(f"get_ipython().events.callbacks[{event!r}].clear()", "clear")
    s.k.execute("y = bytearray(24 * 1024 * 1024)", "after-clear")
    notice = s.next_of("notice")
    assert notice["level"] == "warning" and event in notice["message"], notice
    assert "not recorded" not in notice["message"]
    # the clearing cell itself and the next ones are recorded, with exact deltas
    assert s.cell_message("clear")["record"]["ok"] is True
    data = s.cell_message("after-clear")
    assert data["record"]["ok"] is True
    assert _within(data["record"]["devices"]["cpu"]["delta_bytes"], 24 * MIB)
    data = s.cell("z = 1", "after-clear-2")
    assert data["record"]["ok"] is True
    # no stale started cell left behind: the recorder is idle between cells
    assert s.k.eval("__import__('vramscope').runtime.get_runtime().recorder.running") is False


def test_every_callback_list_replaced_at_once_then_the_bootstrap(s: Session) -> None:
    s.k.execute(
        "ip = get_ipython()\n"
        "for event in ('pre_run_cell', 'post_run_cell', 'post_execute'):\n"
        "    ip.events.callbacks[event] = []",
        "replace",
    )
    # nothing of the bridge runs any more in the main thread: the front end's bootstrap (run
    # on every reconnect and page reload) puts the hooks back, with a notice
    s.k.execute("unseen = 1", "unseen")
    s.k.execute(BOOTSTRAP, silent=True)
    notice = s.next_of("notice")
    assert "pre_run_cell and post_run_cell" in notice["message"], notice
    data = s.cell("w = bytearray(8 * 1024 * 1024)", "after-replace")
    assert _within(data["record"]["devices"]["cpu"]["delta_bytes"], 8 * MIB)
    ids = [c["cell_id"] for c in s.result("get_report")["cells"]]
    # the cells between had no event of the bridge: not recorded, and no stale record left
    assert ids == ["after-replace"], ids
    assert "not recorded" in notice["message"]


def test_a_raising_user_callback_does_not_stop_recording(s: Session) -> None:
    s.cell(
        "def broken(*a):\n    raise ValueError('user hook fails')\n"
        "get_ipython().events.register('pre_run_cell', broken)\n"
        "get_ipython().events.register('post_run_cell', broken)",
        "register-broken",
    )
    data = s.cell("v = bytearray(16 * 1024 * 1024)", "with-broken-hooks")
    assert data["record"]["ok"] is True
    assert _within(data["record"]["devices"]["cpu"]["delta_bytes"], 16 * MIB)


@pytest.mark.parametrize("failing", ["torch.empty(2**62)", "torch.empty(2**50, dtype=torch.uint8)"])
def test_oom_in_a_cell_records_its_peak_and_the_holders(s: Session, failing: str) -> None:
    s.cell("import torch; torch.ones(1).add_(1)", "import")
    s.next_of("insight")
    data = s.cell(f"held = torch.ones(16 * 1024 * 1024)\n{failing}", "oom", ok=False)
    record = data["record"]
    assert record["ok"] is False and record["oom"] is True, record
    assert record["error_type"] == "RuntimeError"
    cpu = record["devices"]["cpu"]
    assert _within(cpu["delta_bytes"], 64 * MIB), cpu
    assert cpu["peak_delta_bytes"] >= cpu["delta_bytes"]
    # the holders at that moment: the tensor the failed cell left in the namespace
    insight = s.next_of("insight")["insight"]
    held = [h for h in insight["holders"] if h["name"] == "held"]
    assert held and _within(held[0]["bytes"], 64 * MIB), insight["holders"]
    # and the kernel goes on
    assert s.cell("after = 1", "after-oom")["record"]["ok"] is True


def test_another_protocol_major_is_refused_and_the_bridge_stays(s: Session) -> None:
    comm = s.k.comm_open("stream", version="2.0.0")
    error = s.k.comm_data(comm, "error")
    assert error["code"] == "protocol_mismatch" and "2.0.0" in error["message"]
    s.k.wait_iopub(lambda m: m["msg_type"] == "comm_close" and m["content"]["comm_id"] == comm)
    # no hello on the refused comm, and the 1.x comms keep working
    assert not list(s.k.messages_between(0, comm, "hello"))
    assert s.cell("u = 1", "after-refusal")["record"]["ok"] is True
    with contextlib.suppress(TimeoutError):
        s.k.comm_data(comm, "cell", timeout=1)
        raise AssertionError("a refused comm got a cell message")

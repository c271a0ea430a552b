"""Registration and unloading in fresh real kernels, without the front end's bootstrap:
``%load_ext vramscope`` or a plain ``import vramscope`` as an ordinary cell must be enough, and
``%unload_ext vramscope`` must leave nothing running (thread, hooks, comm target)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from kernel_harness import BOOTSTRAP, KernelHarness
from vramscope.sampler import THREAD_NAME

pytestmark = pytest.mark.kernel

SAMPLER_ALIVE = f"sum(t.name == {THREAD_NAME!r} for t in __import__('threading').enumerate())"
# Hooks of the bridge's Runtime among IPython's callbacks (bound methods of that class).
OUR_HOOKS = (
    "sum(type(getattr(cb, '__self__', None)).__name__ == 'Runtime'"
    " for ev in ('pre_run_cell', 'post_run_cell')"
    " for cb in get_ipython().events.callbacks[ev])"
)
HISTORY = "len(__import__('vramscope').runtime.get_runtime().recorder.history())"


@pytest.fixture
def fresh() -> Iterator[KernelHarness]:
    """A new kernel that never ran the bootstrap (nothing of vramscope imported)."""
    harness = KernelHarness()
    try:
        assert harness.eval("'vramscope' in __import__('sys').modules") is False
        yield harness
    finally:
        harness.close()


def _hello(k: KernelHarness) -> tuple[str, dict[str, Any]]:
    stream = k.comm_open("stream")
    return stream, k.comm_data(stream, "hello", timeout=15)


def _cell_message(k: KernelHarness, stream: str, cell_id: str) -> dict[str, Any]:
    for _ in range(20):
        data = k.comm_data(stream, "cell", timeout=15)
        if data["record"]["cell_id"] == cell_id:
            return data
    raise AssertionError(f"no cell message for {cell_id}")


@pytest.mark.parametrize("code", ["%load_ext vramscope", "import vramscope"])
def test_one_plain_cell_registers_everything(fresh: KernelHarness, code: str) -> None:
    fresh.run_ok(code, "register")
    stream, hello = _hello(fresh)
    assert hello["type"] == "hello" and hello["protocol_version"] == "1.1.0"
    assert hello["devices"][0]["id"] == "cpu"
    # the per-cell hooks and the sampler are in as well
    fresh.run_ok("after_register = 1", "after-register")
    record = _cell_message(fresh, stream, "after-register")["record"]
    assert record["ok"] is True and record["code_head"] == "after_register = 1"
    assert fresh.comm_data(stream, "samples", timeout=10)["samples"]
    assert fresh.eval(SAMPLER_ALIVE) == 1
    assert fresh.eval(OUR_HOOKS) == 2


def test_unload_after_the_front_ends_bootstrap_stops_everything(fresh: KernelHarness) -> None:
    # JupyterLab registers the bridge with a silent bootstrap, not %load_ext: IPython's
    # %unload_ext must still know it is loaded (it used to answer "not loaded" and keep it)
    fresh.execute(BOOTSTRAP, silent=True)
    assert fresh.eval(SAMPLER_ALIVE) == 1 and fresh.eval(OUR_HOOKS) == 2
    start = len(fresh.iopub)
    fresh.run_ok("%unload_ext vramscope", "unload")
    said = [m["content"].get("text", "") for m in fresh.iopub[start:] if m["msg_type"] == "stream"]
    assert not any("not loaded" in text for text in said), said
    assert fresh.eval(SAMPLER_ALIVE) == 0
    assert fresh.eval(OUR_HOOKS) == 0
    fresh.run_ok("%load_ext vramscope", "reload")
    assert fresh.eval(SAMPLER_ALIVE) == 1 and fresh.eval(OUR_HOOKS) == 2


def test_unload_stops_everything_and_load_brings_it_back(fresh: KernelHarness) -> None:
    fresh.run_ok("%load_ext vramscope", "load")
    stream, _ = _hello(fresh)
    fresh.run_ok("before_unload = 1", "before-unload")
    _cell_message(fresh, stream, "before-unload")
    assert fresh.eval(SAMPLER_ALIVE) == 1 and fresh.eval(OUR_HOOKS) == 2

    fresh.run_ok("%unload_ext vramscope", "unload")
    # the open stream comm is closed by the kernel
    fresh.wait_iopub(
        lambda m: m["msg_type"] == "comm_close" and m["content"]["comm_id"] == stream, timeout=15
    )
    assert fresh.eval(SAMPLER_ALIVE) == 0
    assert fresh.eval(OUR_HOOKS) == 0
    history = fresh.eval(HISTORY)
    start = len(fresh.iopub)
    fresh.run_ok("after_unload = 1", "after-unload")
    fresh.run_ok("after_unload_2 = 2", "after-unload-2")
    with contextlib.suppress(TimeoutError):  # give a stray message time to show up
        fresh.wait_iopub(lambda m: False, timeout=1.0)
    assert fresh.eval(HISTORY) == history, "cells recorded after unload"
    stray = [
        m
        for m in fresh.iopub[start:]
        if m["msg_type"] == "comm_msg" and m["content"]["data"].get("type") in ("cell", "samples")
    ]
    assert stray == []
    # the comm target is gone: a new stream comm gets no hello (ipykernel closes it)
    dead = fresh.comm_open("stream")
    fresh.wait_iopub(
        lambda m: m["msg_type"] == "comm_close" and m["content"]["comm_id"] == dead, timeout=15
    )
    assert not list(fresh.messages_between(start, dead, "hello"))

    fresh.run_ok("%load_ext vramscope", "reload")
    assert fresh.eval(SAMPLER_ALIVE) == 1 and fresh.eval(OUR_HOOKS) == 2
    stream, hello = _hello(fresh)
    # no record for the cells run while unloaded, nor a stale one for the %unload_ext cell
    assert [c["cell_id"] for c in hello["cells"]] == ["before-unload"]
    fresh.run_ok("back = 1", "back")
    record = _cell_message(fresh, stream, "back")["record"]
    assert record["ok"] is True and record["code_head"] == "back = 1"
    assert record["duration"] < 5
    assert fresh.eval(HISTORY) == history + 1
    assert fresh.comm_data(stream, "samples", timeout=10)["samples"]

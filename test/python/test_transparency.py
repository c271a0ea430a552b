"""Transparency: with vramscope loaded, user code computes exactly what it computes without.

Every probe of transparency_probes.py runs as notebook cells in three real kernels side by
side: a plain one, one with the bridge loaded as the front end loads it (bootstrap, a
``stream`` comm open, so that every after-cell step runs), and one where, in addition, advice
is armed on the probe's model (the step watch measures a training step op by op). What each
cell prints (stdout, the execute result, and the error's type and message) must be the same,
byte for byte, in all three: values (hashes of parameters and gradients), exceptions, and
``torch.compile`` graph counts. ``VRAMSCOPE_TRANSPARENCY_DEVICE=cuda`` runs the probes on CUDA
(scripts/cuda-check.sh), with its CUDA-only probes.
"""

from __future__ import annotations

import importlib.util
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kernel_harness import BOOTSTRAP, KernelHarness
from transparency_probes import PRELUDE, PROBES, Probe

DEVICE = os.environ.get("VRAMSCOPE_TRANSPARENCY_DEVICE", "cpu")
STATES = ("plain", "bridge", "armed")
CELL_TIMEOUT = 180.0


class Kernels:
    """The three kernels; a cell is sent to all of them at once and its outputs collected."""

    def __init__(self) -> None:
        os.environ["VRAMSCOPE_TRANSPARENCY_DEVICE"] = DEVICE  # inherited by the kernels
        self.k = {state: KernelHarness(cold=True) for state in STATES}
        for state in ("bridge", "armed"):
            harness = self.k[state]
            reply = harness.execute(BOOTSTRAP, silent=True)
            assert reply["content"]["status"] == "ok", reply["content"]
            stream = harness.comm_open("stream")
            harness.comm_data(stream, "hello")
        outputs = self.run(PRELUDE)
        assert all(o == outputs["plain"] for o in outputs.values()), outputs

    def close(self) -> None:
        for harness in self.k.values():
            harness.close()

    def run(self, code: str, states: tuple[str, ...] = STATES) -> dict[str, str]:
        cell_id = f"tp-{time.monotonic_ns()}"
        sent = {s: self.k[s].send_execute(code, cell_id=cell_id) for s in states}
        return {s: _collect(self.k[s], msg_id) for s, msg_id in sent.items()}


def _collect(harness: KernelHarness, msg_id: str) -> str:
    """What the cell showed: its streams, execute result and error, in order, as text."""
    reply = harness.reply(msg_id, timeout=CELL_TIMEOUT)
    parts: list[str] = []
    idle = False
    deadline = time.monotonic() + CELL_TIMEOUT
    seen = 0
    while not idle and time.monotonic() < deadline:
        while seen < len(harness.iopub):
            msg = harness.iopub[seen]
            seen += 1
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream" and content["name"] == "stdout":
                parts.append(content["text"])
            elif kind == "execute_result":
                parts.append("[result] " + content["data"].get("text/plain", ""))
            elif kind == "error":
                parts.append(f"[error] {content['ename']}: {content['evalue']}")
            elif kind == "status" and content["execution_state"] == "idle":
                idle = True
        if not idle:
            harness._pump(0.2)
    harness.iopub.clear()  # everything of this cell is read (and comm traffic is not needed)
    status = reply["content"]["status"]
    if status == "error":
        parts.append(f"[status error] {reply['content']['ename']}")
    return "".join(parts)


@pytest.fixture(scope="module")
def kernels() -> Iterator[Kernels]:
    k = Kernels()
    try:
        yield k
    finally:
        k.close()


def _runnable(probe: Probe) -> str | None:
    """Why ``probe`` cannot run here (None: it can)."""
    if probe.cuda_only and DEVICE != "cuda":
        return "a CUDA-only probe"
    missing = [m for m in probe.needs if importlib.util.find_spec(m) is None]
    return f"needs {', '.join(missing)}" if missing else None


def test_at_least_25_probes_run_here() -> None:
    runnable = [p for p in PROBES if _runnable(p) is None]
    assert len(runnable) >= 25, [p.name for p in PROBES if _runnable(p) is not None]
    assert len({p.name for p in PROBES}) == len(PROBES)


@pytest.mark.parametrize("probe", PROBES, ids=[p.name for p in PROBES])
def test_probe_is_the_same_with_vramscope(kernels: Kernels, probe: Probe) -> None:
    why = _runnable(probe)
    if why is not None:
        pytest.skip(why)
    shown = ""
    steps = "_tpv.runtime.get_runtime().optimize.advisor.steps.measured"
    measured_before = 0
    for i, cell in enumerate(probe.cells):
        if i == probe.arm_after and probe.model is not None:
            arm = f"import vramscope as _tpv; _tpv_advice = _tpv.advise({probe.model!r})"
            reply = kernels.k["armed"].execute(arm, silent=True)
            assert reply["content"]["status"] == "ok", reply["content"]
            assert kernels.k["armed"].eval(
                "_tpv.runtime.get_runtime().optimize.advisor.steps.watching"
            ), f"advice did not arm the step watch on {probe.model}"
            measured_before = kernels.k["armed"].eval(steps)
        outputs = kernels.run(cell)
        shown += outputs["plain"].strip()
        for state in ("bridge", "armed"):
            assert outputs[state] == outputs["plain"], (
                f"{probe.name}, cell {i}, {state} kernel differs from the plain kernel:\n"
                f"--- plain\n{outputs['plain']}\n--- {state}\n{outputs[state]}"
            )
    assert shown, "the probe printed nothing: it proves nothing"
    trains = any(".step()" in c or "tp_train(" in c for c in probe.cells[probe.arm_after :])
    if probe.model is not None and trains and probe.steps and "compile" not in probe.name:
        # the armed kernel really followed a training step op by op
        assert kernels.k["armed"].eval(steps) > measured_before, "no step was measured"


def test_the_comparison_can_fail(kernels: Kernels) -> None:
    """The suite's comparison sees a difference between the kernels when there is one."""
    outputs = kernels.run("print(_tp_os.getpid())")
    assert len(set(outputs.values())) == 3, outputs


def test_the_bridge_measured_the_probes(kernels: Kernels) -> None:
    """The bridge kernel really measured forwards while the probes ran (a bridge that
    measures nothing would pass every comparison)."""
    measured: Any = kernels.k["bridge"].eval(
        "__import__('vramscope').runtime.get_runtime().insight.engine().tracker.measured_info()"
    )
    assert measured is not None and measured["forward_index"] >= 1, measured

"""Exact CPU peaks change nothing the user's code computes: the transparency probes most
likely to meet a dispatch mode (in-place errors, custom autograd Functions, saved-tensor
hooks, checkpointing, ``torch.func``, forward AD, tensor subclasses, anomaly mode, pickling,
``jit.trace``, a user's own dispatch mode, ``torch.compile``) run as cells in a plain kernel
and in a bridge kernel with ``cpu_peak: "exact"`` (as ``vramscope profile`` runs notebooks),
and print the same, byte for byte. The exact kernel's cells really were counted op by op.

One difference is by design: code that lists the dispatch modes on the stack sees the
counter's (``CellCounter``) in every cell; the probe that prints the stack shows it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kernel_harness import BOOTSTRAP, KernelHarness
from test_transparency import _collect, _runnable
from transparency_probes import PRELUDE, PROBES, Probe

NAMES = (
    "inplace_on_saved_output",
    "inplace_error_with_anomaly_mode",
    "double_backward_gradient_penalty",
    "custom_autograd_function",
    "user_saved_tensors_hooks",
    "checkpoint_non_reentrant",
    "checkpoint_reentrant",
    "func_grad_jacrev_hessian",
    "func_per_sample_gradients",
    "forward_mode_ad",
    "tensor_subclass",
    "anomaly_mode_nan",
    "deepcopy_and_pickle_whole_model",
    "jit_trace_warnings_and_graph",
    "dispatch_mode_of_the_users_around_backward_and_step",
    "compile_module",
    "compile_function",
    "compile_built_and_run_in_one_cell",
)
CHOSEN = [p for p in PROBES if p.name in NAMES]
EXACT_CELLS = (
    "sum(1 for r in __import__('vramscope.runtime', fromlist=['x']).get_runtime()"
    ".recorder.records if r['devices'].get('cpu', {}).get('peak_source') == 'exact')"
)

pytestmark = pytest.mark.kernel


class Kernels:
    def __init__(self) -> None:
        self.k = {"plain": KernelHarness(cold=True), "exact": KernelHarness(cold=True)}
        exact = self.k["exact"]
        for code in (BOOTSTRAP, "__import__('vramscope').settings(cpu_peak='exact')"):
            reply = exact.execute(code, silent=True)
            assert reply["content"]["status"] == "ok", reply["content"]
        exact.comm_data(exact.comm_open("stream"), "hello")
        outputs = self.run(PRELUDE)
        assert outputs["exact"] == outputs["plain"], outputs

    def run(self, code: str) -> dict[str, str]:
        sent = {s: k.send_execute(code, cell_id=f"x-{id(code)}") for s, k in self.k.items()}
        return {s: _collect(self.k[s], msg_id) for s, msg_id in sent.items()}

    def close(self) -> None:
        for harness in self.k.values():
            harness.close()


@pytest.fixture(scope="module")
def kernels() -> Iterator[Kernels]:
    k = Kernels()
    try:
        yield k
    finally:
        k.close()


def test_the_chosen_probes_exist() -> None:
    assert len(CHOSEN) == len(NAMES)


@pytest.mark.parametrize("probe", CHOSEN, ids=[p.name for p in CHOSEN])
def test_probe_is_the_same_with_exact_peaks(kernels: Kernels, probe: Probe) -> None:
    why = _runnable(probe)
    if why is not None:
        pytest.skip(why)
    counted = kernels.k["exact"].eval(EXACT_CELLS)
    shown = ""
    for i, cell in enumerate(probe.cells):
        outputs = kernels.run(cell)
        shown += outputs["plain"].strip()
        if probe.name == "dispatch_mode_of_the_users_around_backward_and_step":
            outputs["exact"] = outputs["exact"].replace("['CellCounter']", "[]")
        assert outputs["exact"] == outputs["plain"], (
            f"{probe.name}, cell {i}: the exact kernel differs from the plain kernel:\n"
            f"--- plain\n{outputs['plain']}\n--- exact\n{outputs['exact']}"
        )
    assert shown, "the probe printed nothing: it proves nothing"
    # every cell counted op by op, but for one that left a mode of the user's open
    assert kernels.k["exact"].eval(EXACT_CELLS) - counted >= len(probe.cells) - 1

"""Where measuring would change the program, model insight does not measure, and says so in
the panel (a ``notice``), once: a forward inside a torch.func transform, a compiled model, a
model whose own forward calls a transform that refuses saved-tensor hooks."""

from __future__ import annotations

from typing import Any

import pytest

from kernel_harness import KernelHarness

pytestmark = pytest.mark.kernel

SETUP = """
import torch
from torch import nn
from torch.func import functional_call, grad, vmap
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
params = {k: v.detach() for k, v in net.named_parameters()}
x = torch.randn(4, 8)
"""
PER_SAMPLE = (
    "g = vmap(grad(lambda p, xi: functional_call(net, p, (xi[None],)).sum()),"
    " in_dims=(None, 0))(params, x)"
)


def _notices(k: KernelHarness, stream: str, start: int) -> list[str]:
    return [m["content"]["data"]["message"] for m in k.messages_between(start, stream, "notice")]


def _wait_notice(k: KernelHarness, text: str) -> None:
    """Until a ``notice`` whose message holds ``text`` comes."""
    k.wait_iopub(
        lambda m: (
            m["msg_type"] == "comm_msg"
            and m["content"]["data"].get("type") == "notice"
            and text in m["content"]["data"]["message"]
        )
    )


def test_skipped_forwards_and_compiled_models_are_said_once(
    fresh_stream_kernel: tuple[KernelHarness, Any],
) -> None:
    k, stream = fresh_stream_kernel
    k.run_ok(SETUP, "setup")
    start = len(k.iopub)
    k.run_ok(PER_SAMPLE, "per-sample")
    k.comm_data(stream, "insight")
    k.run_ok(PER_SAMPLE, "per-sample-again")
    k.comm_data(stream, "insight")
    k.run_ok("cnet = torch.compile(net, backend='eager')\ncnet(x).sum().backward()", "compile")
    k.comm_data(stream, "insight")
    k.run_ok("cnet(x).sum().backward()", "again")
    _wait_notice(k, "compiled")
    k.run_ok("pass", "idle")
    k.comm_data(stream, "cell")
    notices = _notices(k, stream, start)
    func = [n for n in notices if "torch.func transform" in n]
    assert func == [
        "model insight: a forward of Sequential inside a torch.func transform is not measured"
    ], notices
    compiled = [n for n in notices if "compiled" in n]
    assert len(compiled) == 1 and compiled[0].startswith(
        "model insight: Sequential is compiled (torch.compile)"
    ), notices
    # the plain forward of a watched model is still measured
    k.run_ok("other = nn.Sequential(nn.Linear(8, 8))\nother(x).sum().backward()", "plain")
    k.wait_iopub(
        lambda m: (
            m["msg_type"] == "comm_msg"
            and m["content"]["data"].get("type") == "insight"
            and (m["content"]["data"]["insight"].get("activations_measured") or {}).get("cell_id")
            == "plain"
        )
    )


def test_a_note_is_said_after_a_cell_that_changed_nothing_else(
    fresh_stream_kernel: tuple[KernelHarness, Any],
) -> None:
    """A model of 128 tensors or more gets no after-cell insight when a cell changed nothing
    insight shows; a forward it could not measure in such a cell is still said."""
    k, stream = fresh_stream_kernel
    k.run_ok(
        "import torch\nfrom torch import nn\n"
        "big = nn.Sequential(*[nn.Linear(16, 16) for _ in range(80)])\nx = torch.randn(2, 16)\n"
        "big(x).sum().backward()",
        "setup",
    )
    k.comm_data(stream, "insight")
    for i in range(2):
        k.run_ok("pass", f"idle-{i}")
        k.comm_data(stream, "cell")
    start = len(k.iopub)
    k.run_ok("with torch.autograd.graph.save_on_cpu():\n    big(x).sum().backward()", "hooked")
    _wait_notice(k, "saved_tensors_hooks")
    assert len([n for n in _notices(k, stream, start) if "saved_tensors_hooks" in n]) == 1


PINN = """
class PINN(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1))
    def forward(self, xy):
        u = self.net(xy)
        du = torch.func.grad(lambda p: self.net(p).sum())(xy)  # refuses saved-tensor hooks
        return u, du
pinn = PINN()
u, du = pinn(torch.randn(8, 2))
(u.square().mean() + du.square().mean()).backward()
"""


def test_a_forward_that_calls_torch_func_grad_runs_and_is_said(
    fresh_stream_kernel: tuple[KernelHarness, Any],
) -> None:
    """Measuring it would make ``torch.func.grad`` raise inside the user's forward: it runs as
    in a plain kernel, is not measured, and the panel says why, once."""
    k, stream = fresh_stream_kernel
    k.run_ok("import torch\nfrom torch import nn", "setup")
    start = len(k.iopub)
    k.run_ok(PINN, "pinn")
    assert k.eval("all(p.grad is not None for p in pinn.parameters())") is True
    k.run_ok("u, du = pinn(torch.randn(8, 2))\n(u.sum() + du.sum()).backward()", "again")
    _wait_notice(k, "torch.func.grad")
    k.run_ok("pass", "idle")
    k.comm_data(stream, "cell")
    assert [n for n in _notices(k, stream, start) if "torch.func" in n] == [
        "model insight: a forward of PINN that calls torch.func.grad/vjp/jacrev/hessian"
        " is not measured"
    ]

"""The transparency suite's probes: notebook cells run in a plain kernel and in a kernel with
the bridge loaded (and again with advice armed), whose printed output must be identical.

Each probe is a :class:`Probe`: ``cells`` run one after another; each prints what it computed
(hashes of parameters and gradients after a few optimizer steps, exceptions as ``type:
message``, ``torch.compile`` graph and node counts through a counting backend). ``model``
names the namespace variable the advisor is armed on in the "advice armed" kernel, after
``arm_after`` cells (the step watch then measures the next training step op by op).

Probes use their own variable names (``p<N>_...``) so that they run one after another in one
kernel; each starts from ``torch.manual_seed``. ``DEVICE`` is the probes' device (``cpu``, or
``cuda`` under ``VRAMSCOPE_TRANSPARENCY_DEVICE=cuda``: scripts/cuda-check.sh). The probes that
run ``torch.compile`` come last: once Dynamo has compiled anything, the step watch follows no
step op by op (vramscope/compiled.py), so the probes before them have it on.
"""

from __future__ import annotations

from probe_type import Probe
from probes_compile import COMPILE
from probes_core import CORE
from probes_usage import USAGE

__all__ = ["PRELUDE", "PROBES", "Probe"]

PRELUDE = r'''
import hashlib as _tp_hashlib
import os as _tp_os
import tempfile as _tp_tempfile
import warnings as _tp_warnings
import torch
import torch.nn as nn
import torch.nn.functional as F

DEVICE = _tp_os.environ.get("VRAMSCOPE_TRANSPARENCY_DEVICE", "cpu")
torch.set_num_threads(1)
torch.use_deterministic_algorithms(True, warn_only=True)
_tp_warnings.filterwarnings("ignore")


def tp_hash(*objs):
    """sha256 (16 hex digits) of tensors, and of modules' parameters and gradients."""
    h = _tp_hashlib.sha256()
    for obj in objs:
        if isinstance(obj, torch.nn.Module):
            tensors = []
            for name, p in obj.named_parameters():
                h.update(name.encode())
                tensors.append(p)
                tensors.append(p.grad if p.grad is not None else torch.zeros(0))
        elif isinstance(obj, torch.Tensor):
            tensors = [obj]
        else:
            tensors = list(obj)
        for t in tensors:
            t = t.detach().to("cpu").contiguous()
            h.update(str((tuple(t.shape), t.dtype)).encode())
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]


def tp_try(fn):
    """Run fn; print its result or its exception, type and message."""
    try:
        out = fn()
    except Exception as exc:  # noqa: BLE001
        print(f"raised {type(exc).__name__}: {exc}")
        return None
    print("ok", out if not isinstance(out, torch.Tensor) else tp_hash(out))
    return out


def tp_warns(fn):
    """Run fn; print the warnings it gave (the prelude ignores warnings otherwise)."""
    with _tp_warnings.catch_warnings(record=True) as rec:
        _tp_warnings.simplefilter("always")
        out = fn()
    print("warnings:", [(w.category.__name__, str(w.message)[:60]) for w in rec])
    return out


def tp_modes():
    """The dispatch modes on the stack, by class name."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    return [type(m).__name__ for m in _get_current_dispatch_mode_stack()]


class TpCount:
    """A torch.compile backend that counts the graphs and their nodes."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(len(gm.graph.nodes))
        return gm.forward

    def __repr__(self):
        return f"{len(self.graphs)} graphs, nodes {self.graphs}"


def tp_mlp(seed=0, width=16):
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(8, width), nn.Tanh(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 4)
    ).to(DEVICE)


def tp_data(seed=1, n=6):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 8, generator=g).to(DEVICE), torch.randn(n, 4, generator=g).to(DEVICE)


def tp_train(model, opt, steps=3, x=None, y=None, loss_fn=None):
    if x is None:
        x, y = tp_data()
    for _ in range(steps):
        opt.zero_grad()
        out = model(x)
        loss = loss_fn(out, y) if loss_fn else F.mse_loss(out, y)
        loss.backward()
        opt.step()
    return tp_hash(model)
'''


PROBES: tuple[Probe, ...] = CORE + USAGE + COMPILE

"""What the activation tracker's pack hook hands to autograd instead of a saved tensor, and
the check that keeps autograd's semantics while a hook is in.

With saved-tensor hooks, autograd stops checking that a saved tensor was not modified in place
before backward (its version counter), so a forward that modifies a tensor it saved would
silently compute wrong gradients. :func:`pack` keeps what autograd itself keeps: the tensor
(for a saved input) or a detached alias of it (for a saved output: keeping the output itself
would make a tensor <-> grad_fn cycle), which shares the version counter, and the version at
pack time; :func:`unpack` raises autograd's own error, word for word, when they differ.

Whether a tensor is an output of the op saving it: autograd numbers its nodes in creation
order, and the node saving its outputs is the newest one (``_get_sequence_nr()`` is the next
number), while an input was made by an older node.
"""

from __future__ import annotations

import re
import threading
from typing import Any, Optional, Protocol

import torch

_next_sequence_nr = torch._C._autograd._get_sequence_nr
_BACKWARD = re.compile(r"Backward\d*$")


def _names_in_full() -> bool:
    """Whether this torch's message names a node in full ("output 0 of SigmoidBackward0",
    torch 2.11) or without the suffix ("output 0 of Sigmoid", torch 2.13): asked of autograd
    itself, once, on a thread of its own (no saved-tensor hooks there: they are per thread)."""
    found: list[bool] = []

    def probe() -> None:
        try:
            y = torch.sigmoid(torch.ones(1, requires_grad=True))
            y.add_(1)
            y.sum().backward()
        except RuntimeError as exc:
            found.append("SigmoidBackward" in str(exc))

    thread = threading.Thread(target=probe, name="vramscope-autograd-probe", daemon=True)
    thread.start()
    thread.join(5.0)
    return bool(found and found[0])


_FULL_NAMES = _names_in_full()


class Saved:
    """A saved tensor as autograd would keep it, and its version when saved.

    ``node``/``output_nr`` name the node that saved it for a saved output (autograd names it
    in its message) and are None for an input (autograd names the tensor's node at unpack).
    When the tracker counts it, ``ledger.release(key)`` runs once autograd frees it
    (``__del__``: no weakref, no callback object; a measured forward packs thousands of them,
    and each object made there counts toward the cyclic GC's next collection)."""

    __slots__ = ("key", "ledger", "node", "output_nr", "tensor", "version")

    def __init__(
        self, tensor: torch.Tensor, version: int, node: Optional[str], output_nr: int = 0
    ) -> None:
        self.tensor = tensor
        self.version = version
        self.node = node
        self.output_nr = output_nr
        self.ledger: Optional[_Ledger] = None
        self.key: Any = None

    @property
    def origin(self) -> Optional[tuple[str, int]]:
        return None if self.node is None else (self.node, self.output_nr)

    def __del__(self) -> None:
        ledger = self.ledger
        if ledger is not None:
            try:  # noqa: SIM105 (no context manager made for each freed tensor)
                ledger.release(self.key)
            except Exception:  # never a word on stderr from a finalizer
                pass


class _Ledger(Protocol):
    def release(self, key: Any) -> None: ...


def pack(t: torch.Tensor) -> Saved:
    node = t.grad_fn
    if node is not None and node._sequence_nr() == _next_sequence_nr() - 1:
        return Saved(t.detach(), t._version, node.name(), t.output_nr)
    return Saved(t, t._version, None)


_mode_enabled = torch._C._is_torch_function_mode_enabled


def unseen(t: torch.Tensor) -> bool:
    """Reading ``t`` calls no ``__torch_function__``: a plain tensor and no torch-function
    mode, so the bridge's reads need no ``DisableTorchFunction`` to stay unseen."""
    return type(t) is torch.Tensor and not _mode_enabled()


def unpack(saved: Saved) -> torch.Tensor:
    t = saved.tensor
    if unseen(t):  # nothing to hide the read from
        version = t._version
    else:
        with torch._C.DisableTorchFunction():  # unseen by tensor subclasses and modes
            version = t._version
    if version != saved.version:
        with torch._C.DisableTorchFunction():
            raise RuntimeError(modified_message(saved))
    return t


def modified_message(saved: Saved) -> str:
    """Autograd's message for a saved tensor modified in place (torch/csrc/autograd/
    saved_variable.cpp), for the same tensor."""
    t = saved.tensor
    sizes = ", ".join(str(int(d)) for d in t.shape)
    text = (
        "one of the variables needed for gradient computation has been modified by an "
        f"inplace operation: [{t.type()} [{sizes}]]"
    )
    origin = saved.origin
    if origin is None and t.grad_fn is not None:
        origin = (t.grad_fn.name(), t.output_nr)
    if origin is not None:
        name = origin[0] if _FULL_NAMES else _BACKWARD.sub("", origin[0])
        text += f", which is output {origin[1]} of {name},"
    text += f" is at version {t._version}; expected version {saved.version} instead."
    if torch.is_anomaly_enabled():
        return text + (
            " Hint: the backtrace further above shows the operation that failed to compute "
            "its gradient. The variable in question was changed in there or anywhere later. "
            "Good luck!"
        )
    return text + (
        " Hint: enable anomaly detection to find the operation that failed to compute its "
        "gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False)."
    )

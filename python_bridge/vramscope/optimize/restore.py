"""Put back what a batch-size finder's trial step changed.

A ``Snapshot`` keeps, for the models, optimizers and LR schedulers the step reaches
(``finder_reach.py``):

- every parameter and buffer of the models and every parameter of the optimizers, by object:
  a copy of its data, its ``.grad`` (the object and a copy) and ``requires_grad``. Buffers
  come from ``named_buffers()``, so non-persistent ones (not in ``state_dict``) are kept too;
- which tensor each module slot held (a step that rebinds ``module.weight`` is undone) and
  each module's train/eval mode;
- each optimizer's param groups (every setting, in the same dicts) and state (the same
  tensors, their data copied back), and each LR scheduler's ``state_dict()``;
- the random number generators: torch's CPU one, every CUDA device's (once CUDA is
  initialised), MPS's, Python's ``random`` and numpy's global one (when numpy is imported).

Copies are kept on the CPU, so a CUDA model costs no device memory. ``restore`` puts the
same tensor objects back and copies data into them in place (on the CPU only where it
changed, so an unchanged tensor keeps its version counter), so every reference the user
holds stays valid.

Objects found only while a trial ran (the finder's hooks call ``add_model`` before a module's
forward and ``add_optimizer`` before an optimizer's step) are kept from that moment; what
cannot be known then (the gradients backward already wrote) is listed in ``not_restored``.
"""

from __future__ import annotations

import copy
import random
import sys
from typing import Any


def _copy(t: Any) -> Any:
    return t.detach().to("cpu", copy=True)


class Snapshot:
    def __init__(self, torch: Any) -> None:
        self.torch = torch
        #: id -> (tensor, data copy, grad object, grad copy, requires_grad)
        self._tensors: dict[int, tuple[Any, Any, Any, Any, bool]] = {}
        self._modules: set[int] = set()
        self._slots: list[tuple[Any, dict[str, Any], dict[str, Any], bool]] = []
        #: (optimizer, its group dicts, their params lists, the groups' settings, its state)
        self._optimizers: list[tuple[Any, list[Any], list[Any], list[Any], dict[Any, Any]]] = []
        self._schedulers: list[tuple[Any, dict[str, Any]]] = []
        self._rng: list[tuple[str, Any, Any]] = []
        #: what is put back after every trial, and what could not be, in words
        self.restored: list[str] = []
        self.not_restored: list[str] = []

    # -- what is kept --------------------------------------------------------------------

    def knows_module(self, module: Any) -> bool:
        return id(module) in self._modules

    def knows_optimizer(self, optimizer: Any) -> bool:
        return any(o is optimizer for o, *_ in self._optimizers)

    def add_model(self, name: str, model: Any, grads_known: bool = True) -> None:
        if not grads_known and any(p.requires_grad for p in model.parameters()):
            self.not_restored.append(
                f"the gradients of {name} ({type(model).__name__}): found at its forward, "
                "so kept as they were then (a zero_grad() before it is not undone); pass "
                "model= to find_batch_size"
            )
        for module in model.modules():
            if id(module) in self._modules:
                continue
            self._modules.add(id(module))
            params, buffers = dict(module._parameters), dict(module._buffers)
            self._slots.append((module, params, buffers, bool(module.training)))
            for t in (*params.values(), *buffers.values()):
                if t is not None:
                    self._tensor(t)
        self.restored.append(f"{name} ({type(model).__name__})")

    def add_optimizer(self, name: str, optimizer: Any, grads_known: bool = True) -> None:
        params = [p for group in optimizer.param_groups for p in group["params"]]
        unknown = [p for p in params if id(p) not in self._tensors]
        for p in params:
            self._tensor(p)
        lists = [(group["params"], list(group["params"])) for group in optimizer.param_groups]
        groups = [
            {k: copy.deepcopy(v) for k, v in group.items() if k != "params"}
            for group in optimizer.param_groups
        ]
        state = {
            p: {k: self._value(v) for k, v in values.items()}
            for p, values in optimizer.state.items()
        }
        self._optimizers.append((optimizer, list(optimizer.param_groups), lists, groups, state))
        self.restored.append(f"{name} ({type(optimizer).__name__})")
        if unknown and not grads_known:
            self.not_restored.append(
                f"the gradients of {len(unknown)} parameter(s) of {name} "
                f"({type(optimizer).__name__}): found only when it stepped, after backward "
                "wrote them; pass optimizer= (or model=) to find_batch_size"
            )

    def add_scheduler(self, name: str, scheduler: Any) -> None:
        self._schedulers.append((scheduler, copy.deepcopy(scheduler.state_dict())))
        self.restored.append(f"{name} ({type(scheduler).__name__})")

    def add_rng(self) -> None:
        torch = self.torch
        self._rng.append(("torch CPU", torch.get_rng_state(), torch.set_rng_state))
        cuda = getattr(torch, "cuda", None)
        if cuda is not None and cuda.is_available() and cuda.is_initialized():
            self._rng.append(("CUDA", cuda.get_rng_state_all(), cuda.set_rng_state_all))
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available() and hasattr(torch, "mps"):
            self._rng.append(("MPS", torch.mps.get_rng_state(), torch.mps.set_rng_state))
        self._rng.append(("Python random", random.getstate(), random.setstate))
        numpy = sys.modules.get("numpy")
        if numpy is not None:
            rnd = numpy.random
            self._rng.append(("numpy", rnd.get_state(), rnd.set_state))
        self.restored.append("random number generators: " + ", ".join(n for n, *_ in self._rng))

    def _tensor(self, t: Any) -> None:
        if id(t) in self._tensors:
            return
        grad = t.grad if t.is_leaf else None
        self._tensors[id(t)] = (
            t,
            _copy(t),
            grad,
            None if grad is None else _copy(grad),
            bool(t.requires_grad),
        )

    def _value(self, value: Any) -> Any:
        if isinstance(value, self.torch.Tensor):
            return _Kept(value, _copy(value))
        return copy.deepcopy(value)

    # -- putting it back -----------------------------------------------------------------

    def restore(self) -> None:
        """Everything back as it was; a part that fails is listed in ``not_restored`` and the
        rest is still put back. Never raises (but a KeyboardInterrupt: see finder_guard)."""
        for scheduler, state in self._schedulers:
            self._guarded(type(scheduler).__name__, _load, scheduler, state)
        for part in (self._restore_slots, self._restore_tensors, self._restore_optimizers):
            self._guarded(part.__name__, part)
        for name, state, setter in self._rng:
            self._guarded(name, setter, state)

    def _guarded(self, name: str, part: Any, *args: Any) -> None:
        try:
            part(*args)
        except Exception as exc:
            note = f"{name}: {type(exc).__name__}: {exc}"[:300]
            if note not in self.not_restored:
                self.not_restored.append(note)

    def _restore_slots(self) -> None:
        for module, params, buffers, training in self._slots:
            for own, saved in ((module._parameters, params), (module._buffers, buffers)):
                if own.keys() != saved.keys() or any(own[k] is not v for k, v in saved.items()):
                    own.clear()
                    own.update(saved)
            module.training = training  # each module's own flag (no train(): user code)

    def _restore_tensors(self) -> None:
        torch = self.torch
        with torch.no_grad():
            for t, data, grad, grad_data, requires_grad in self._tensors.values():
                _put(torch, t, data)
                if t.is_leaf and t.requires_grad != requires_grad:
                    t.requires_grad_(requires_grad)
                if not t.is_leaf:
                    continue
                if grad is None:
                    t.grad = None
                else:
                    _put(torch, grad, grad_data)
                    if t.grad is not grad:
                        t.grad = grad

    def _restore_optimizers(self) -> None:
        torch = self.torch
        for optimizer, group_dicts, lists, groups, state in self._optimizers:
            optimizer.param_groups[:] = group_dicts
            for group, (params, members), saved in zip(group_dicts, lists, groups):
                group.clear()
                group.update(copy.deepcopy(saved))
                if params != members:
                    params[:] = members
                group["params"] = params
            for p in [p for p in optimizer.state if p not in state]:
                del optimizer.state[p]
            for p, values in state.items():
                now = optimizer.state[p]
                for key in [k for k in now if k not in values]:
                    del now[key]
                for key, value in values.items():
                    if isinstance(value, _Kept):
                        with torch.no_grad():
                            _put(torch, value.tensor, value.data)
                        now[key] = value.tensor
                    else:
                        now[key] = copy.deepcopy(value)


class _Kept:
    """An optimizer state tensor and a copy of its data."""

    __slots__ = ("data", "tensor")

    def __init__(self, tensor: Any, data: Any) -> None:
        self.tensor, self.data = tensor, data


def _load(scheduler: Any, state: dict[str, Any]) -> None:
    scheduler.load_state_dict(copy.deepcopy(state))


def _put(torch: Any, t: Any, data: Any) -> None:
    """``t``'s data back to ``data`` in place. On the CPU skipped when equal (its version
    counter is kept); on a device copied (comparing would read it back to the CPU)."""
    if t.shape != data.shape or t.dtype != data.dtype:
        t.data = data.to(t.device, copy=True)
    elif t.device.type != "cpu" or not torch.equal(t.detach(), data):
        t.copy_(data)

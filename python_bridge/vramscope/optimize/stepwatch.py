"""One training step of the advised model, measured in each cell once advice is active.

The step's peak is what the predictions rest on and what predicted vs measured compares, both
with one definition: the most bytes that tensors created since the step started held at once
(op by op, through :func:`.peak.tracker`), from the model's first forward in the cell (a
LightningModule's own or a direct child's: step_roots; with autograd on, no dispatch mode of
the user's running) to the optimizer's ``step()`` (the forward(s) and backward; k
micro-batches of an accumulation loop are one step). Until advice is asked for nothing is
installed; then it costs one Python call per forward of the model, and one measured step per
cell (the op-by-op count is ~35 us per op, for that step only).

Each allocation is kept in order, so that when the step ends the storages that became the
parameters' ``.grad`` can be told apart from the rest (activations, their gradients,
temporaries): ``StepFigures.frontier`` keeps the (gradient bytes, other bytes) pairs that can
be the peak when the rest is scaled by any factor (a smaller micro-batch, half precision).

No reference to the user's tensors is kept: integers, and a weakref to the model.
"""

from __future__ import annotations

import sys
import weakref
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any, Callable

from .. import trials
from ..compiled import dynamo_ran, is_compiled
from ..devices.exact import armed_modes
from ..step_roots import forward_roots
from .peak import tracker

KEEP = 32
COMPILED = (
    "torch.compile has run in this kernel: training steps are no longer followed op by op "
    "(compiled code runs differently under the step watch's dispatch mode), so step-peak "
    "figures are estimated from the per-layer activations"
)
#: torch, once a model is watched (the hooks ask it first whether Dynamo is tracing them)
_torch: Any = None  # steps kept (by cell: its start time)


@dataclass(frozen=True)
class StepFigures:
    """A measured step: ``peak`` above its start; ``grads``: the ``.grad`` bytes it
    allocated; ``frontier``: (gradient bytes, other bytes) pairs, none below another in both;
    ``forwards``: the model's forwards in it; ``temps``: (bytes of the gradient temporaries a
    later micro-batch has alive there, other bytes) at each allocation, none below another in
    both (see figures_of)."""

    peak: int
    grads: int
    frontier: tuple[tuple[int, int], ...]
    forwards: int
    #: square softmax outputs of the forward ([..., T, T] attention scores, saved for
    #: backward) and one float32 per row of them, in bytes
    attention: tuple[int, int] = (0, 0)
    #: what the forward left for backward (the bytes live at backward's start), as run and
    #: as 16-bit autocast would leave it, replayed op by op (peak.autocast_rule); (0, 0)
    #: when the step had no backward
    autocast: tuple[int, int] = (0, 0)
    temps: tuple[tuple[int, int], ...] = ()

    def scaled_peak(self, factor: float) -> int:
        """The peak with everything but the gradients scaled by ``factor``."""
        return max((int(g + o * factor) for g, o in self.frontier), default=0)

    def accumulated_peak(self, k: int) -> int:
        """``k`` micro-batches per step (each 1/k of the batch): the first allocates the
        gradients; the next ones run with them in place: where the first made a gradient,
        they make a temporary of its size that is added to it and freed."""
        first = self.scaled_peak(1.0 / k)
        if k <= 1 or not self.grads:
            return first  # gradients there before the step (zeroed in place): all alike
        later = self.grads + max((d + o // k for d, o in self.temps), default=0)
        return max(first, later)


def figures_of(
    events: list[tuple[int, int]],
    grad_keys: dict[int, int],
    forwards: int,
    old_grads: dict[int, int] | None = None,
) -> StepFigures:
    """Replays the step's allocations (key, +bytes), frees (key, -bytes) and the moments a
    gradient was accumulated into a parameter's ``.grad`` (key of that ``.grad``, 0).

    ``grad_keys``: the ``.grad`` storages the step made; ``old_grads``: those there before
    it (``zero_grad(set_to_none=False)``), which backward adds its gradient to.

    A key is a storage's address, which malloc hands out again once it is freed: the
    activation backward frees at an address is often where a gradient is made next. Only the
    last allocation at a gradient's address is that gradient; what lived there before it is
    the rest (counting it as gradient bytes put the deep MLP's gradients at 4.5 MiB of 3.4
    and its activations at backward's start 4.5 MiB short, by how malloc reused addresses).

    Gradient-sized bytes do not shrink with the micro-batch: a gradient the step made is one
    from its allocation on, and in a later micro-batch a temporary from there until it is
    accumulated; the parts of a gradient (a weight used twice, as a tied embedding, gets two,
    summed before they are accumulated) and a gradient added to an old ``.grad`` are
    temporaries in every micro-batch: the storages of the gradient's size freed just before
    it is accumulated, from their allocation to their free."""
    sizes = {**(old_grads or {}), **grad_keys}
    made = {key: i for i, (key, delta) in enumerate(events) if delta > 0 and key in grad_keys}
    allocated_at: dict[int, int] = {}
    born: dict[int, int] = {}  # free index -> allocation index of what it frees
    for i, (key, delta) in enumerate(events):
        if delta > 0:
            allocated_at[key] = i
        elif delta < 0 and key in allocated_at:
            born[i] = allocated_at.pop(key)
    until: dict[int, int] = {}  # allocation index of a temporary -> where it ends
    fixed: set[int] = set()  # ... of those temporaries in every micro-batch
    for i, (key, delta) in enumerate(events):
        if delta or key not in sizes:
            continue
        if key in made and made[key] < i:
            until.setdefault(made[key], i)
        for j in range(i - 1, -1, -1):  # the gradient's parts: freed just before
            d = events[j][1]
            if d < 0 and -d == sizes[key] and j in born and born[j] not in until:
                until[born[j]] = j
                fixed.add(born[j])
            elif d > 0 and j != made.get(key):
                break
    ends: dict[int, list[int]] = {}
    for a, e in until.items():
        ends.setdefault(e, []).append(a)
    total = grads = peak = 0
    points: list[tuple[int, int]] = []
    temps: list[tuple[int, int]] = []
    alive: dict[int, int] = {}  # temporaries alive: allocation index -> bytes
    for i, (key, delta) in enumerate(events):
        for a in ends.get(i, ()):
            alive.pop(a, None)
        total += delta
        made_grad = i >= made.get(key, len(events))
        if made_grad:
            grads += delta
        if delta > 0:
            if i in until:
                alive[i] = delta
            parts = sum(n for a, n in alive.items() if a in fixed)
            rest = total - grads - parts
            points.append((grads + parts, rest))
            # no accumulation seen (no hook): a later micro-batch's temporary here only
            own = delta if made_grad and i not in until else 0
            temps.append((own + sum(alive.values()), rest))
            if total > peak:
                peak = total
    allocated = sum(grad_keys.values())
    return StepFigures(
        peak,
        allocated,
        _undominated(points),
        forwards,
        temps=_undominated(temps),
    )


def _undominated(points: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """The (a, b) pairs no other pair is at least as large as in both."""
    kept: list[tuple[int, int]] = []
    best_b = -1
    # by a, most first: a pair is kept when its b beats all before it
    for a, b in sorted(set(points), key=lambda p: (-p[0], -p[1])):
        if b > best_b:
            kept.append((a, b))
            best_b = b
    return tuple(kept)


Follow = Callable[[Any, Callable[..., None], Callable[..., None]], Callable[[], None]]


class StepWatch:
    """Args:
    cell_key: the running cell's key (its start time), None between cells (silent
        executions).
    follow: ``follow(model, pre, post)`` calls ``pre``/``post`` from the hooks model insight
        keeps on the model (insight.roots: they come off when the model is compiled, so that
        Dynamo never traces them) and returns the function that stops it; None: the step
        watch puts hooks of its own on the model.
    """

    def __init__(self, cell_key: Callable[[], float | None], follow: Follow | None = None) -> None:
        self._cell_key = cell_key
        self._follow = follow
        self._unfollow: Callable[[], None] | None = None
        self._stale: list[Any] = []  # closed step modes still on the dispatch stack
        #: why the last step was not followed (None: it was, or none came)
        self.skipped: str | None = None
        self.measured = 0  # steps measured so far
        self._model: Any = None  # weakref.ref to the watched model
        self._hook: Any = None
        self._out_hook: Any = None
        self._step_hook: Any = None
        self._open: tuple[float, Any] | None = None  # (cell, the tracking mode)
        self._forwards = 0
        self._depth = 0  # followed forwards running (a LightningModule's child nests)
        self._done: float | None = None  # the cell whose step was measured (one a cell)
        self._accumulated: list[Any] = []  # the open step's post-accumulate-grad hooks
        self.figures: OrderedDict[float, StepFigures] = OrderedDict()

    @property
    def watching(self) -> bool:
        return self._hook is not None or self._unfollow is not None

    def watch(self, torch: Any, model: Any) -> None:
        """Measure ``model``'s steps from now on (idempotent)."""
        global _torch
        if self._model is not None and self._model() is model:
            return
        if is_compiled(model):
            raise ValueError("a torch.compile'd model is not measured op by op")
        from torch.optim.optimizer import register_optimizer_step_pre_hook

        self.stop()
        _torch = torch
        # the model, and a LightningModule's children (its training_step may call them only)
        roots = forward_roots(model)
        if self._follow is not None:
            stops = [self._follow(m, self._pre_forward, self._post_forward) for m in roots]

            def unfollow() -> None:
                for stop in stops:
                    stop()

            self._unfollow = unfollow
        else:
            self._hook = [m.register_forward_pre_hook(self._pre_forward) for m in roots]
            self._out_hook = [
                m.register_forward_hook(self._post_forward, always_call=True) for m in roots
            ]
        self._step_hook = register_optimizer_step_pre_hook(self._pre_step)
        self._model = weakref.ref(model)

    def stop(self) -> None:
        self.cell_ended()
        for handle in [*(self._hook or ()), *(self._out_hook or ()), self._step_hook]:
            if handle is not None:
                handle.remove()
        if self._unfollow is not None:
            self._unfollow()
            self._unfollow = None
        self._hook = self._out_hook = self._step_hook = self._model = None

    def take(self, cell: float | None) -> StepFigures | None:
        return self.figures.pop(cell, None) if cell is not None else None

    # --- hooks (inside the user's code: never raise) -------------------------------------

    def _pre_forward(self, module: Any, args: Any) -> None:
        if _torch is not None and _torch.compiler.is_compiling():
            return  # traced by Dynamo: nothing in the graph
        self._depth += 1
        if self._depth > 1:
            return  # a followed child inside the model's own forward
        try:
            self._sweep()
            if self._open is not None:
                self._forwards += 1  # one more micro-batch of the open step
                return
            cell = self._cell_key()
            if cell is None or cell == self._done or trials.running():
                return  # no cell, its step measured, or a batch-size finder's trial
            torch = sys.modules["torch"]
            if dynamo_ran():
                # compiled code in the step would run differently under the step's dispatch
                # mode (Dynamo skips frames while one is active): not followed op by op
                self.skipped = COMPILED
                return
            if (
                not torch.is_grad_enabled()
                or torch.compiler.is_compiling()  # traced by torch.compile: not run here
                or torch._C._current_graph_task_id() != -1  # recomputed inside backward
                or torch._C._len_torch_dispatch_stack() > armed_modes()  # a user's mode
            ):
                return
            mode = tracker(torch, record=True)
            mode.__enter__()
            self._open = (cell, mode)
            self._forwards = 1
            model = self._model() if self._model is not None else None
            self._accumulated = mark_accumulations(model or module, mode)
        except Exception:
            self._open = None

    def _post_forward(self, module: Any, args: Any, output: Any) -> None:
        """The model's outputs (a tensor, or tensors in a tuple, list, dict or a Hugging
        Face ModelOutput): the open step's tracker leaves them out at backward's start."""
        if _torch is not None and _torch.compiler.is_compiling():
            return
        self._depth = max(0, self._depth - 1)
        if self._open is None or self._depth:
            return
        try:
            torch = sys.modules["torch"]
            with torch._C.DisableTorchFunction():  # unseen by the user's tensor subclasses
                self._record_outputs(torch, output)
        except Exception:
            pass

    def _record_outputs(self, torch: Any, output: Any) -> None:
        if self._open is None:
            return
        if isinstance(output, torch.Tensor):
            items: tuple[Any, ...] = (output,)
        elif isinstance(output, dict):  # a ModelOutput is one
            items = tuple(output.values())
        else:
            items = tuple(output) if isinstance(output, (tuple, list)) else ()
        for t in items:
            if isinstance(t, torch.Tensor) and t.layout == torch.strided:
                self._open[1].outputs.add(t.untyped_storage().data_ptr())

    def _pre_step(self, optimizer: Any, args: Any, kwargs: Any) -> Any:
        # optimizer.step(closure): the forward and backward (the last micro-batch's, under
        # accumulation) run inside the step (Lightning's automatic optimization, LBFGS):
        # the step ends as the closure returns
        wrapped = self._closure_step(optimizer, args, kwargs)
        if wrapped is None:
            self._end_step(optimizer)
        return wrapped

    def _closure_step(self, optimizer: Any, args: Any, kwargs: Any) -> Any:
        """The step's (args, kwargs) with its closure wrapped so that the measured step ends
        when the closure returns (before the update, as a step without a closure does);
        None (unchanged) when there is no closure or no step to measure in this cell."""
        try:
            closure = kwargs.get("closure") if kwargs else None
            in_args = closure is None and bool(args) and callable(args[0])
            closure = args[0] if in_args else closure
            cell = self._cell_key()
            if not callable(closure) or self._model is None:
                return None
            if self._open is None and (cell is None or cell == self._done):
                return None  # no step open, and none can open in this cell

            def measured_closure(*a: Any, **kw: Any) -> Any:
                result = closure(*a, **kw)  # the user's code: its errors are theirs
                self._end_step(optimizer)
                return result

            if in_args:
                return (measured_closure, *args[1:]), kwargs
            return args, {**kwargs, "closure": measured_closure}
        except Exception:
            return None

    def _end_step(self, optimizer: Any) -> None:
        """The open step ends: its figures, when ``optimizer`` updates the model."""
        if self._open is None:
            return
        try:
            cell, mode = self._open
            self._close()
            self._done = cell
            model = self._model() if self._model is not None else None
            if model is None or mode.failed or not _steps(optimizer, model):
                return
            keep: dict[int, int] = {}
            old: dict[int, int] = {}
            for p in model.parameters():
                grad = p.grad
                if grad is not None:
                    storage = grad.untyped_storage()
                    made = storage.data_ptr() in mode.live
                    (keep if made else old)[storage.data_ptr()] = storage.nbytes()
            figures = figures_of(mode.events or [], keep, self._forwards, old)
            self.measured += 1
            self.figures[cell] = replace(
                figures,
                attention=(mode.attention[0], mode.attention[1]),
                autocast=mode.boundary or (0, 0),
            )
            while len(self.figures) > KEEP:
                self.figures.popitem(last=False)
        except Exception:
            self._open = None

    def cell_ended(self) -> None:
        """A cell ended: a step still open (no optimizer step came) is dropped."""
        self._depth = 0
        if self._open is not None:
            self._done = self._open[0]
            self._close()
        self._sweep()

    def _close(self) -> None:
        for handle in self._accumulated:
            handle.remove()
        self._accumulated = []
        if self._open is None:
            return
        mode: Any = self._open[1]
        self._open = None
        mode.closed = True  # counts nothing more, even before it is popped
        self._stale.append(mode)
        self._sweep()

    def _sweep(self) -> None:
        """Pop the closed modes that are on top of the dispatch stack. One cannot be popped
        while a mode of the user's is above it (it waits for theirs to end), nor inside
        backward (an optimizer step run from a gradient hook): autograd puts the stack it
        began with back when backward ends, so it is popped at the next forward or cell end."""
        if not self._stale:
            return
        try:
            torch = sys.modules["torch"]
            from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

            if torch._C._current_graph_task_id() != -1:
                return
            stack: list[Any] = list(_get_current_dispatch_mode_stack())
            self._stale = [m for m in self._stale if any(m is s for s in stack)]
            while self._stale and stack and any(stack[-1] is m for m in self._stale):
                top = stack.pop()
                top.__exit__(None, None, None)
                self._stale = [m for m in self._stale if m is not top]
        except Exception:
            pass


def mark_accumulations(model: Any, mode: Any) -> list[Any]:
    """Hooks that put a (key of the ``.grad``, 0) event in ``mode``'s record each time a
    gradient is accumulated into one of ``model``'s parameters (figures_of: how long gradient
    temporaries live). Returns their handles, to remove when the step ends."""

    def mark(param: Any) -> None:
        try:
            if not mode.closed and mode.events is not None and param.grad is not None:
                mode.events.append((param.grad.untyped_storage().data_ptr(), 0))
        except Exception:
            pass

    handles = []
    for p in model.parameters():
        try:  # inside the user's forward, with the step's tracker pushed: never raise
            if p.requires_grad:
                handles.append(p.register_post_accumulate_grad_hook(mark))
        except Exception:
            continue  # that gradient's temporaries count at their allocation only
    return handles


def _steps(optimizer: Any, model: Any) -> bool:
    """The optimizer updates the model: any of its parameters is in a group (a frozen first
    parameter, LoRA adapters, an optimizer over a subset or several optimizers alike)."""
    stepped = {id(p) for group in optimizer.param_groups for p in group["params"]}
    return any(id(p) in stepped for p in model.parameters())

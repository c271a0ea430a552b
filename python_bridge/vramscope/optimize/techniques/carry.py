"""What an enable cell that replaces the user's optimizer carries over, and how its undo cell
puts the old one back.

The generated cells define small helpers (the text below, run in the user's namespace; they
need only ``torch`` and ``inspect``, not vramscope):

- ``_carried_groups(cls, old, params=None)``: the new optimizer's param groups, group by
  group: every setting of the old group that ``cls`` takes with a value of the same kind
  (``lr``, ``weight_decay``, ``betas``, ``eps``, ``momentum``, ``foreach``, ``fused``, ...,
  read from ``cls``'s signature), and whatever else others put in the group (a scheduler's
  ``initial_lr``, the user's own keys); ``defaults`` the same way from ``old.defaults``.
- ``_rebind_schedulers(old, new)``: LR schedulers in the namespace (and in its lists, tuples
  and dicts, and the ones a ``SequentialLR``/``ChainedScheduler`` holds) whose ``.optimizer
  is old`` follow ``new``; their ``base_lrs`` and ``last_epoch`` stay, ``new``'s groups take
  the learning rates ``old``'s had reached.
- ``_offload(optimizer)`` / ``_reload(moved)``: the old optimizer's state tensors on an
  accelerator go to the CPU while it is kept for the undo cell, and come back with it.

The advisor runs the same helper text (:func:`carried`) to say in the cell's comment which
settings carry over, so the comment and what the cell does cannot disagree.
"""

from __future__ import annotations

import inspect
from typing import Any

from ..codegen import safe_word

STASH = "_undo_stash"  # the namespace dict the enable cells keep replaced objects in

CARRY = '''
def _signature(cls):
    try:
        return dict(inspect.signature(cls).parameters)
    except (TypeError, ValueError):
        return {}


def _carried_groups(cls, old, params=None):
    """cls's param groups and defaults from old's: the settings cls takes (a value of the
    same kind) and what others put in the groups (a scheduler's initial_lr). The settings
    of old's class are those its class and base classes take."""
    takes = _signature(cls)
    had = {k for c in type(old).__mro__ if c is not object for k in _signature(c)}

    def fits(key, value):
        if key not in takes:
            return False
        default = takes[key].default
        if default is None or default is inspect.Parameter.empty:
            return True
        if isinstance(default, bool):
            return isinstance(value, bool)
        if isinstance(default, (int, float)):
            return isinstance(value, (int, float, torch.Tensor)) and not isinstance(value, bool)
        if isinstance(default, tuple):
            return isinstance(value, tuple) and len(value) == len(default)
        return isinstance(value, type(default))

    groups = [
        {
            **{k: v for k, v in g.items() if k != "params" and (k not in had or fits(k, v))},
            "params": g["params"] if params is None else params,
        }
        for g in old.param_groups
    ]
    return groups, {k: v for k, v in old.defaults.items() if fits(k, v)}
'''

REBIND = '''
def _rebind_schedulers(old, new):
    """LR schedulers bound to old follow new (base_lrs and last_epoch kept)."""
    sched = torch.optim.lr_scheduler
    kinds = tuple(
        k
        for k in (getattr(sched, n, None) for n in ("LRScheduler", "ReduceLROnPlateau"))
        if isinstance(k, type)
    )
    found = []
    for value in list(globals().values()):
        if isinstance(value, (list, tuple)) and len(value) <= 10_000:
            found.extend(value)
        elif isinstance(value, dict) and value is not globals() and len(value) <= 10_000:
            found.extend(value.values())
        else:
            found.append(value)
    found = [s for s in found if isinstance(s, kinds)]
    found += [c for s in found for c in getattr(s, "_schedulers", ())]
    bound = {id(s): s for s in found if s.optimizer is old}
    for s in bound.values():
        s.optimizer = new
    if bound:
        for g_old, g_new in zip(old.param_groups, new.param_groups):
            g_new["lr"] = g_old["lr"]  # where the schedule had reached
        mark = "_wrapped_by_lr_sched"
        if hasattr(old.step, mark) and not hasattr(new.step, mark):
            step = new.step

            def counted_step(*args, **kwargs):
                new._opt_called = True  # what a scheduler's own wrapper records
                return step(*args, **kwargs)

            counted_step._wrapped_by_lr_sched = True
            new.step = counted_step
    return len(bound)


def _reload(moved):
    for state, key, device in moved:
        state[key] = state[key].to(device)
'''

OFFLOAD = '''
def _offload(optimizer):
    """The state tensors on an accelerator moved to the CPU: [(state, key, device)]."""
    moved = []
    for state in optimizer.state.values():
        for key, value in list(state.items()):
            if torch.is_tensor(value) and value.device.type != "cpu":
                moved.append((state, key, value.device))
                state[key] = value.to("cpu")
    return moved
'''


def enable_helpers() -> str:
    return CARRY + "\n" + REBIND + "\n" + OFFLOAD + "\n"


def undo_cell(sid: str, about: str, restore: list[str]) -> str:
    """The undo cell: what the enable cell kept in the stash (``_kept``) is put back by the
    ``restore`` lines (run once; a second run says there is nothing to undo)."""
    return (
        f"# vramscope: undo {sid}\n"
        + wrap_comment(about)
        + "import torch\n\n"
        + REBIND
        + "\n\n"
        + f'{STASH} = globals().setdefault("{STASH}", {{}})\n'
        f'_kept = {STASH}.pop("{sid}", None)\n'
        "if _kept is None:\n"
        f'    print("nothing to undo: the {sid} cell has not run, or was undone")\n'
        "else:\n" + "".join(f"    {line}\n" for line in restore) + "    del _kept\n"
    )


def carried(cls: Any, optimizer: Any, torch: Any) -> tuple[list[str], list[str]]:
    """(settings of the optimizer's first group that ``cls`` takes, settings it leaves
    out), as the generated cell decides them; names that are no identifier are counted."""
    space: dict[str, Any] = {"torch": torch, "inspect": inspect}
    exec(compile(CARRY, "<vramscope carry>", "exec"), space)
    groups, _ = space["_carried_groups"](cls, optimizer)
    old = optimizer.param_groups[0] if optimizer.param_groups else {}
    kept = [k for k in old if k != "params" and k in groups[0]] if groups else []
    left = [k for k in old if k != "params" and k not in kept]
    return _named(kept), _named(left)


def _named(keys: list[Any]) -> list[str]:
    words = [k for k in keys if isinstance(k, str) and safe_word(k) == k]
    others = len(keys) - len(words)
    return words + ([f"{others} other keys"] if others else [])


def wrap_comment(text: str, width: int = 96) -> str:
    """``text`` as ``# `` comment lines of at most ``width`` characters."""
    out: list[str] = []
    line = "#"
    for word in text.split():
        if len(line) + 1 + len(word) > width and line != "#":
            out.append(line)
            line = "#"
        line += " " + word
    out.append(line)
    return "\n".join(out) + "\n"

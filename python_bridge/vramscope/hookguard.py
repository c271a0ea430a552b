"""Put the bridge's IPython event hooks back when user code removed them.

``get_ipython().events.callbacks['pre_run_cell'].clear()`` (or assigning a new list) silently
drops every extension's hooks. The bridge checks its own two hooks at each cell boundary it
still sees: its ``post_run_cell`` puts a missing ``pre_run_cell`` back (no cell is lost), and
its ``post_execute`` hook (which IPython triggers just before ``post_run_cell``, silent
executions included) puts both back, so the cell that removed them is still recorded; and its
``pre_run_cell`` puts a missing ``post_run_cell`` back when nothing else could (that cell had
no end event: it is not recorded, and its started measurement is dropped).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, Callable

Hook = Callable[..., Any]


def _registered(callbacks: object, hook: Hook) -> bool:
    if not isinstance(callbacks, list):
        return False
    if hook in callbacks:  # the usual case, at C speed (three checks a cell)
        return True
    for callback in callbacks:
        if callback == hook or getattr(callback, "__wrapped__", None) == hook:
            return True
    return False


def restore_hooks(shell: Any, hooks: Mapping[str, Any]) -> list[str]:
    """Register again each of ``hooks`` (event -> callback) missing from ``shell.events``.

    Returns the events whose hook was missing and is back. Never raises.
    """
    events = getattr(shell, "events", None)
    callbacks = getattr(events, "callbacks", None)
    if not isinstance(callbacks, dict):
        return []
    restored: list[str] = []
    for event, hook in hooks.items():
        if _registered(callbacks.get(event), hook):
            continue
        with contextlib.suppress(Exception):
            if not isinstance(callbacks.get(event), list):
                callbacks[event] = []
            events.register(event, hook)  # type: ignore[union-attr]
            restored.append(event)
    return restored


def restored_notice(events: list[str], lost: bool) -> str:
    """The panel's notice for hooks put back (``events`` as returned by restore_hooks);
    ``lost``: the cell that removed ``post_run_cell`` could not be recorded."""
    names = " and ".join(events)
    text = (
        f"user code removed vramscope's IPython {names} hook"
        f"{'s' if len(events) > 1 else ''}; it is registered again"
    )
    if lost:
        text += " (the cell that removed it was not recorded)"
    return text

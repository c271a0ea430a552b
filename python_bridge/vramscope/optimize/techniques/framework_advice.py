"""Advice for a framework's training cell (``trainer.train()``, ``trainer.fit()``,
``accelerator.backward(loss)``): the manual-loop cards replaced by the framework's own
settings. The dispatcher over frameworks_hf, frameworks_lightning and
frameworks_accelerate, which share frameworks' helpers (kept apart so that no module imports
its own importer)."""

from __future__ import annotations

from ...messages.optimize import Suggestion
from ..context import Context
from . import frameworks_accelerate, frameworks_hf, frameworks_lightning
from .frameworks import LOOP_NOTES, framework_run, split


def adapt(ctx: Context, suggestions: list[Suggestion]) -> list[Suggestion]:
    """``suggestions`` for a framework's training cell: the loop rewrites replaced by the
    framework's own settings; unchanged for any other cell. Never raises."""
    try:
        run = framework_run(ctx)
        if run is None:
            return suggestions
        kept, manual = split(suggestions, run.framework)
        ctx.notes[:] = [n for n in ctx.notes if not n.startswith(LOOP_NOTES)]
        if run.framework == "transformers":
            return kept + frameworks_hf.suggest(ctx, run, manual)
        if run.framework == "lightning":
            return kept + frameworks_lightning.suggest(ctx, run, manual)
        if run.framework == "accelerate":
            return kept + frameworks_accelerate.suggest(ctx, run, manual)
        return kept
    except Exception as exc:  # the manual cards stay: advice must not fail with this part
        ctx.notes.append(f"frameworks: failed ({type(exc).__name__}: {exc})")
        return suggestions

"""vramscope: PyTorch memory per cell, live, in JupyterLab.

Inside IPython, ``import vramscope`` (or ``%load_ext vramscope``) registers the ``vramscope``
comm target, the per-cell hooks and the sampler; elsewhere importing does nothing.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from typing import Any

from ._version import __version__
from .messages.records import Settings
from .protocol import PROTOCOL_VERSION
from .runtime import get_runtime
from .widget import widget  # the function; the submodule stays vramscope.widget

__all__ = [
    "PROTOCOL_VERSION",
    "__version__",
    "advise",
    "attach",
    "estimate",
    "export",
    "find_batch_size",
    "load_ipython_extension",
    "session_report",
    "settings",
    "unload_ipython_extension",
    "watch",
    "widget",
]


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "jupyterlab-vramscope"}]


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext vramscope``: register everything in this shell (idempotent)."""
    get_runtime().install(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext vramscope``: stop the sampler, remove hooks and the comm target."""
    get_runtime().uninstall()


def _bootstrap() -> None:
    """What the front end runs silently: register in the running IPython (idempotent)."""
    shell = _running_shell()
    if shell is not None:
        get_runtime().install(shell)


def session_report() -> dict[str, Any]:
    """The session so far as a JSON-serialisable dict (see docs/report-schema.md)."""
    return get_runtime().report()


def settings(**changes: Any) -> Settings:
    """Show or change settings, e.g. ``vramscope.settings(sample_hz=2)``; returns them all.

    Raises ValueError for an unknown name or a bad value.
    """
    from .protocol import ProtocolError

    known = set(get_runtime().settings)
    unknown = sorted(set(changes) - known)
    if unknown:
        raise ValueError(
            f"unknown vramscope setting(s): {', '.join(unknown)}; known: {sorted(known)}"
        )
    try:
        return get_runtime().update_settings(changes)
    except ProtocolError as err:
        raise ValueError(err.message) from None


def watch(model: Any) -> None:
    """Tell model insight which model to report on (a module or its namespace name)."""
    if not get_runtime().insight.watch(model):
        reason = get_runtime().insight.unavailable or "model insight needs torch to be imported"
        warnings.warn(f"vramscope.watch: {reason}", stacklevel=2)


def export(
    path: Any, format: str | None = None, *, samples: bool = False, overwrite: bool = False
) -> list[Any]:
    """Write the session report to ``path``: JSON, CSV, Markdown or self-contained HTML.

    The format comes from the suffix (``.json``, ``.csv``, ``.md``, ``.html``) unless
    ``format`` names it. ``samples=True`` with CSV also writes the timeline samples to
    ``<name>.samples.csv``. Returns the paths written. Raises ValueError for an unknown format,
    FileExistsError when a file to write exists (nothing is written) unless ``overwrite``.
    """
    from .exports import format_for, with_notebook, write_report

    fmt = format_for(path, format)
    session = getattr(_running_shell(), "user_ns", {}).get("__session__")
    notebook = session.rsplit("/", 1)[-1] if isinstance(session, str) and session else None
    report = with_notebook(session_report(), notebook)
    return list(write_report(report, path, fmt, samples=samples, overwrite=overwrite))


def estimate(
    model_or_param_count: Any,
    optimizer: str | None = None,
    precision: str | None = None,
    batch_size: int | None = None,
    seq_len: int | None = None,
    zero_stage: int | str = 0,
    n_gpus: int = 1,
    offload: str | None = None,
) -> Any:
    """Training memory per GPU: parameters, gradients, optimizer state, master weights,
    activations and total, in bytes (a ``vramscope.estimator.Estimate``).

    ``model_or_param_count``: an ``nn.Module`` or a count (``7_000_000_000``, ``"7B"``).
    ``optimizer`` / ``precision`` left out: for a model, what its setup measures as (its
    parameters' dtype and the dtype its activations were measured at: ``"32-true"`` for an
    fp32 model run without autocast; the optimizer over it in the namespace), else
    ``"adamw"`` / ``"bf16-mixed"``. Activations are scaled from what the model saved for
    backward in its last measured forward (``activation_source == "measured"``), else left
    out (``"none"``).
    Raises ValueError for an unknown precision, optimizer, stage or offload.
    """
    from .estimator.entry import estimate_for

    runtime = get_runtime()
    return estimate_for(
        model_or_param_count,
        runtime.user_ns(),
        runtime.activation_memo,
        defaults_from_setup=True,
        optimizer=optimizer,
        precision=precision,
        batch_size=batch_size,
        seq_len=seq_len,
        zero_stage=zero_stage,
        n_gpus=n_gpus,
        offload=offload,
    )


def attach(address: str | None = None, token: str | None = None, hz: float | None = None) -> bool:
    """Report this process's memory to a notebook kernel's vramscope panel (since 1.1).

    For processes the kernel did not fork: spawned children, ``torchrun`` ranks, remote ranks.
    ``address``/``token`` default to ``VRAMSCOPE_COLLECTOR``/``VRAMSCOPE_TOKEN`` (given by the
    kernel: ``vramscope.processes.child_env()``/``attach_args()``; for remote ranks
    ``vramscope.processes.listen``). Idempotent; a daemon thread that stops silently when the
    kernel is gone. Returns False when no collector is known; ValueError for a bad address.
    """
    from .processes.reporter import attach as start_reporting

    return start_reporting(address, token, hz)


def advise(model: Any = None) -> dict[str, Any]:
    """Ranked suggestions to save memory, from what vramscope measured (docs: README "Optimize").

    ``model``: a module or its namespace name (default: the watched or largest model). Returns
    the protocol's ``Advice`` dict: ``suggestions`` (each with ``predicted`` bytes, ``cost``
    and a ``code`` cell in your names that runs without vramscope), ``mistakes``, and
    ``outcomes`` (predicted vs measured for suggestions you applied). Never raises.
    """
    runtime = get_runtime()
    if model is not None and not isinstance(model, str):
        ns = getattr(runtime.shell, "user_ns", None) or {}
        model = next((k for k, v in ns.items() if v is model and not k.startswith("_")), None)
    return dict(runtime.optimize.advise(model))


def find_batch_size(
    step_fn: Any,
    budget: Any = None,
    margin: float = 0.1,
    target_batch: int | None = None,
    **options: Any,
) -> dict[str, Any]:
    """The largest batch size whose training step fits ``budget`` (bytes or e.g. ``"6GiB"``).

    ``step_fn(batch_size)`` runs one full training step. The budget defaults to the free
    device memory on CUDA, elsewhere to min(2 GiB, 25% of the RAM available), where a trial
    is stopped the moment its tensors pass it. ``margin`` is kept free (10%); sizes start at
    ``start=2``; the search stops after ``max_seconds=120`` (None: no limit). Returns
    ``batch_size``, ``peaks`` (measured peak bytes per size tried), ``tried``, the
    ``accumulation_steps`` that reach ``target_batch``, and ``restored`` / ``not_restored``:
    the models, optimizers, LR schedulers and random generators the step reaches (through
    its names and their attributes, or ``model=``/``optimizer=``/``scheduler=``) are put
    back after every trial. Progress goes to the panel. See docs/finder.md.
    """
    from .optimize.finder import find_batch_size as find

    publish = get_runtime().optimize.publish_search
    return find(step_fn, budget, margin, target_batch, publish=publish, **options)


def _running_shell() -> Any:
    if "IPython" not in sys.modules:
        return None
    try:
        from IPython import get_ipython

        return get_ipython()
    except Exception:
        return None


def _auto_bootstrap() -> None:
    with contextlib.suppress(Exception):
        _bootstrap()


_auto_bootstrap()

"""The reports answer first (issue 21): a real in-process session (a bridge runtime on an IPython
shell) trains a tiny model one step; the HTML and Markdown exports made after it open with the
session's peak, what it was made of, and the per-layer saved activations of that step.

Ground truths are computed here: the recorder's own cell figures for the peak, the model's and
Adam's tensors for the parts, and the bytes an independent saved-tensor counter sees the same
forward save, per module, for the layers."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from report_pages import PageText, exact_bytes, md_table
from vramscope.exports import render
from vramscope.exports.request import export_result
from vramscope.runtime import Runtime

#: the training cell's activations (32 MiB saved by the ReLU, 2 MiB input) make it the peak
BATCH, IN, HIDDEN, OUT = 2048, 256, 4096, 10
BUILD = (
    "import torch\n"
    "torch.manual_seed(0)\n"
    f"model = torch.nn.Sequential(torch.nn.Linear({IN}, {HIDDEN}), torch.nn.ReLU(), "
    f"torch.nn.Linear({HIDDEN}, {OUT}))\n"
    "opt = torch.optim.Adam(model.parameters())"
)
TRAIN = (
    f"x = torch.randn({BATCH}, {IN})\n"
    "loss = model(x).pow(2).mean()\n"
    "loss.backward()\n"
    "opt.step()\n"
    "opt.zero_grad()"
)


def saved_per_module(model: torch.nn.Module, x: torch.Tensor) -> dict[str, int]:
    """What one forward saves for backward, per innermost module: each storage once, at its
    first saver, parameters left out (an independent counter: our own hooks)."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    names = {id(m): n for n, m in model.named_modules()}
    stack: list[str] = []
    seen: set[int] = set()
    found: dict[str, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        ptr = t.untyped_storage().data_ptr()
        if ptr not in params and ptr not in seen and stack:
            seen.add(ptr)
            found[stack[-1]] = found.get(stack[-1], 0) + t.untyped_storage().nbytes()
        return t

    def enter(module: torch.nn.Module, args: Any) -> None:
        stack.append(names[id(module)])

    def leave(module: torch.nn.Module, args: Any, output: Any) -> None:
        stack.pop()

    handles = []
    for module in model.modules():
        handles.append(module.register_forward_pre_hook(enter))
        handles.append(module.register_forward_hook(leave))
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            model(x).pow(2).mean()
    finally:
        for handle in handles:
            handle.remove()
    return found


@pytest.fixture
def session() -> Iterator[tuple[Runtime, Any]]:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    rt = Runtime()
    rt.install(shell)
    try:
        yield rt, shell
    finally:
        rt.uninstall()
        shell.run_cell("%reset -f")


def test_export_after_training_opens_with_the_peak_and_its_layers(
    session: tuple[Runtime, Any],
) -> None:
    rt, shell = session
    torch.manual_seed(0)
    truth = saved_per_module(
        torch.nn.Sequential(
            torch.nn.Linear(IN, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, OUT)
        ),
        torch.randn(BATCH, IN),
    )
    assert truth == {"0": BATCH * IN * 4, "1": BATCH * HIDDEN * 4}  # the counter's sanity

    first = shell.execution_count  # the shell is a singleton: other tests ran cells in it
    for code in (BUILD, TRAIN):
        assert shell.run_cell(code, store_history=True).success
    panel = rt.insight.last  # what the panel got after the training cell
    assert panel is not None
    shown = {x["path"]: x["peak_saved_bytes"] for x in panel["layers"] if x["peak_saved_bytes"]}
    assert shown == truth
    right_after = rt.report()
    assert shell.run_cell("y = 1 + 1", store_history=True).success  # a later cell
    report = rt.report()

    for made in (right_after, report):
        saved = {x["path"]: x["peak_saved_bytes"] for x in made["layers"]}
        assert {k: v for k, v in saved.items() if v} == truth  # 0 before issue 21
        assert made["layers"] == panel["layers"]
        assert made["layers_measured"]["execution_count"] == first + 1  # the training cell

    # the recorder's peak on cpu, and the cell it was in (computed from its records)
    cells = rt.recorder.history()
    best = max(
        cells,
        key=lambda c: c["devices"]["cpu"]["before_bytes"] + c["devices"]["cpu"]["peak_delta_bytes"],
    )
    peak = best["devices"]["cpu"]["before_bytes"] + best["devices"]["cpu"]["peak_delta_bytes"]
    assert best["execution_count"] == first + 1, cells  # the training cell
    assert peak >= max(s["d"]["cpu"]["used"] for s in report["samples"] if "cpu" in s["d"])

    model, opt = shell.user_ns["model"], shell.user_ns["opt"]
    param_bytes = sum(p.nbytes for p in model.parameters())
    state_bytes = sum(
        t.untyped_storage().nbytes()
        for s in opt.state.values()
        for t in s.values()
        if isinstance(t, torch.Tensor)
    )
    assert state_bytes >= 2 * param_bytes

    page = export_result(report, {"format": "html", "notebook": "train.ipynb"})["content"]
    text = PageText()
    text.feed(page)
    summary = "".join(text.summary)
    assert page.index('class="summary"') < page.index('data-chart="timeline"')  # answer first
    got = re.search(r"Peak: [\d.]+ \w+ \(([\d,]+ B)\) on cpu", summary)
    assert got is not None, summary
    assert exact_bytes(got.group(1)) == peak
    assert f"in cell [{first + 1}]: x = torch.randn" in summary and "import torch" not in summary

    parts = {
        row[0]: exact_bytes(row[2]) for row in text.tables["summary: What the peak was made of"][1:]
    }
    assert list(parts) == [
        "parameters",
        "gradients",
        "optimizer state",
        "activations",
        "torch runtime",
        "other",
    ]
    assert sum(parts.values()) == peak
    breakdown = report["breakdown"]["cpu"]
    assert parts["torch runtime"] == min(breakdown.get("runtime_bytes", 0), breakdown["other"])
    assert parts["parameters"] == param_bytes
    assert parts["gradients"] == 0  # zero_grad() set them to None
    assert parts["optimizer state"] == state_bytes
    assert parts["activations"] == sum(truth.values())  # what the training step saved
    assert "Training step" in summary and "model call 1 of the cell" in summary

    top = text.tables["summary: Top layers by saved activations"][1:]
    assert {row[0]: exact_bytes(row[3]) for row in top} == truth
    layers = text.tables["Top layers by saved activations"][1:]
    assert {row[0]: row[2] for row in layers} == {"0": "2.0 MiB", "1": "32.0 MiB"}
    assert f'"peak":{truth["1"]}' in page  # the per-layer chart's data: drawn

    md = render(report, "markdown")
    assert md.index("## Summary") < md.index("## Devices")
    assert re.search(r"\*\*Peak\*\*: [\d.]+ \w+ \(" + re.escape(f"{peak:,} B") + r"\) on cpu", md)
    rows = md_table(md, "### What the peak was made of")
    assert [r[0] for r in rows] == list(parts)
    assert sum(exact_bytes(r[2]) for r in rows) == peak
    rows = md_table(md, "### Top layers by saved activations")
    assert {r[0]: exact_bytes(r[3]) for r in rows} == truth

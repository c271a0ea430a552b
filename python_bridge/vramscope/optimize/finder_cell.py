"""The cell that runs ``vramscope.find_batch_size`` on the user's own training step.

The step function is the training cell's step (zero_grad .. step) with each batch tensor
replaced by one of ``batch_size`` rows, drawn (repeating) from the batch the cell last ran.
"""

from __future__ import annotations

import ast
import textwrap

from .codegen import CannotRewrite, Lines, checked
from .context import Context
from .names import tensor_mapping
from .techniques.accumulation import batch_vars


def _budget_text(ctx: Context) -> str:
    if ctx.device.startswith("cuda"):
        return 'None,  # None: the free device memory; or a size, e.g. "20GiB"'
    return 'None,  # None: min(2 GiB, 25% of free RAM); or a size, e.g. "8GiB"'


def step_body(ctx: Context, names: list[str]) -> str:
    """The step's statements, batch names renamed to ``<name>_bs``, dedented."""
    region = ctx.region
    if region is None or ctx.training is None:
        raise CannotRewrite("no training step found")
    stmts = [s for s in (region.zero_grad, *region.forward, region.backward, region.step) if s]
    stmts.sort(key=lambda s: s.lineno)
    lines = Lines.of(ctx.training.source)
    start, end = lines.span([stmts[0], stmts[-1]])
    uses = [
        n
        for s in region.body
        if start <= s.lineno <= end
        for n in ast.walk(s)
        if isinstance(n, ast.Name) and n.id in names and isinstance(n.ctx, ast.Load)
    ]
    for node in sorted(uses, key=lambda n: (n.lineno, -n.col_offset)):
        i = node.lineno - 1
        line = lines.lines[i]
        lines.lines[i] = line[: node.col_offset] + f"{node.id}_bs" + line[node.end_col_offset :]
    return textwrap.dedent("\n".join(lines.lines[start - 1 : end]))


def code(ctx: Context) -> str | None:
    if ctx.training is None or ctx.region is None or not ctx.batch_size:
        return None
    names = batch_vars(ctx)
    if not names:
        return None
    try:
        body = step_body(ctx, names)
    except CannotRewrite:
        return None
    draws = "".join(
        f"    {v}_bs = {{\n"
        "        key: value[torch.arange(batch_size) % value.shape[0]]\n"
        f"        for key, value in {v}.items()\n"
        "    }\n"
        if tensor_mapping(ctx.ns.get(v), ctx.torch)
        else f"    {v}_bs = {v}[torch.arange(batch_size) % {v}.shape[0]]\n"
        for v in names
    )
    text = (
        "# vramscope: batch-size finder. Runs your training step at growing batch sizes,\n"
        "# measures each step's peak (a step past the budget is stopped there), and puts\n"
        "# the model, optimizer, LR schedulers and random generators back afterwards.\n"
        "import torch\n"
        "\n"
        "import vramscope\n"
        "\n"
        "\n"
        "def train_step(batch_size):\n"
        f"{draws}"
        f"{textwrap.indent(body, '    ')}\n"
        "\n"
        "\n"
        "found = vramscope.find_batch_size(\n"
        "    train_step,\n"
        f"    budget={_budget_text(ctx)}\n"
        "    margin=0.1,\n"
        f"    target_batch={ctx.batch_size},\n"
        "    start=2,  # BatchNorm needs at least 2 samples\n"
        "    max_seconds=120,  # the whole search; None: no limit\n"
        f"    model={ctx.names.model or ctx.model_name},\n"
        f"    optimizer={ctx.names.optimizer or 'None'},\n"
        ")\n"
        "found\n"
    )
    try:
        return checked(text)
    except CannotRewrite:
        return None

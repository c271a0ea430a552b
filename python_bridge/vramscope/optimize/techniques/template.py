"""A clear template in the user's names, for a training loop the rewrite did not understand."""

from __future__ import annotations

from ..codegen import checked
from ..context import Context


def template(ctx: Context, sid: str, reason: str, step_lines: list[str], before: str = "") -> str:
    """A loop in the user's names whose step is ``step_lines`` (indented one level)."""
    n = ctx.names
    model, opt = n.model or "model", n.optimizer or "optimizer"
    batch, data = n.batch or "batch", n.data
    loss_call = f"{n.loss_fn}(output, target)" if n.loss_fn else "output.mean()  # your loss"
    where = f"training cell [{ctx.training.execution_count}]" if ctx.training else "your loop"
    indent = "    " if n.data else ""
    body = "\n".join(
        indent + line.format(model=model, opt=opt, batch=batch, loss=loss_call)
        for line in step_lines
    )
    loop = f"for {batch} in {data}:  # your loop\n" if n.data else "# one training step:\n"
    text = (
        f"# vramscope: {sid}\n"
        f"# TEMPLATE: vramscope could not rewrite {where} ({reason}).\n"
        "# The same change written in your names: adapt it to your loop, then run it.\n"
        "import torch\n"
        f"{before}"
        f"{loop}"
        f"{body}\n"
    )
    return checked(text)

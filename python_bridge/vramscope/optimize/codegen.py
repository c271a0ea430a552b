"""Rewrites of the user's training cell that keep their lines and comments.

Edits are made on source lines located through the AST (``lineno``/``col_offset``), never by
unparsing, so every untouched line (comments included) is kept byte for byte. A loop the
rewrite does not understand raises :class:`CannotRewrite` with the reason; callers then offer
a template in the user's names instead. Every result is compiled before it is returned.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .names import StepRegion

INDENT = "    "


class CannotRewrite(Exception):
    """The training cell's step could not be rewritten; the message says why."""


@dataclass
class Lines:
    """A cell's source as editable lines (0-based list, AST line numbers are 1-based)."""

    lines: list[str]

    @classmethod
    def of(cls, source: str) -> Lines:
        return cls(source.split("\n"))

    def text(self) -> str:
        return "\n".join(self.lines)

    def indent_of(self, lineno: int) -> str:
        line = self.lines[lineno - 1]
        return line[: len(line) - len(line.lstrip())]

    def span(self, stmts: list[ast.stmt]) -> tuple[int, int]:
        """First and last 1-based line of contiguous statements that own their lines."""
        first, last = stmts[0], stmts[-1]
        start, end = first.lineno, last.end_lineno or last.lineno
        if len(self.indent_of(start)) != first.col_offset:
            raise CannotRewrite("a statement shares its line with another one (';')")
        tail = self.lines[end - 1][last.end_col_offset or 0 :].strip()
        if tail and not tail.startswith("#"):
            raise CannotRewrite("a statement shares its line with another one (';')")
        return start, end


def checked(source: str) -> str:
    """``source`` when it compiles; CannotRewrite otherwise."""
    try:
        compile(source, "<vramscope rewrite>", "exec")
    except SyntaxError as err:
        raise CannotRewrite(f"the rewrite does not compile ({err.msg})") from None
    return source


def with_marker(sid: str, note: str, body: str, imports: str = "import torch\n") -> str:
    return f"# vramscope: {sid}\n# {note}\n{imports}{body}"


def _segment(lines: Lines, node: ast.AST) -> str:
    seg = ast.get_source_segment(lines.text(), node)
    if seg is None:
        raise CannotRewrite("could not locate an expression in the cell")
    return seg


def _replace_in_line(line: str, start: int, end: int, text: str) -> str:
    return line[:start] + text + line[end:]


def _wrap(lines: Lines, start: int, end: int, header: str) -> None:
    """Put lines ``start..end`` under ``header`` (a ``with``/``for`` line), one level in."""
    indent = lines.indent_of(start)
    for i in range(start - 1, end):
        if lines.lines[i].strip():
            lines.lines[i] = INDENT + lines.lines[i]
    lines.lines.insert(start - 1, f"{indent}{header}")


def _before_loop(lines: Lines, region: StepRegion, text: str) -> None:
    """A line before the training loop (or before the step when there is no loop)."""
    anchor = region.loop or region.forward[0]
    lines.lines.insert(anchor.lineno - 1, f"{lines.indent_of(anchor.lineno)}{text}")


def forward_span(lines: Lines, region: StepRegion) -> tuple[int, int]:
    if not region.forward:
        raise CannotRewrite(
            "the forward and the loss are on the .backward() line: nothing to wrap on its own"
        )
    return lines.span(region.forward)


def rewrite_autocast(
    source: str,
    region: StepRegion,
    device_type: str,
    dtype: str,
    scaler: bool,
) -> str:
    """Autocast around the forward and loss; with ``scaler`` also GradScaler (fp16)."""
    lines = Lines.of(source)
    start, end = forward_span(lines, region)
    step_stmt = region.step
    if scaler:
        if step_stmt is None or not isinstance(step_stmt, ast.Expr):
            raise CannotRewrite("no optimizer .step() statement after .backward()")
        call = step_stmt.value
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
            raise CannotRewrite("the .step() call is not a plain statement")
        opt = _segment(lines, call.func.value)
        lines.span([step_stmt])
        indent = lines.indent_of(step_stmt.lineno)
        end_step = step_stmt.end_lineno or step_stmt.lineno
        lines.lines[step_stmt.lineno - 1 : end_step] = [
            f"{indent}scaler.step({opt})",
            f"{indent}scaler.update()",
        ]
        _scale_backward(lines, region.backward)
    _wrap(lines, start, end, f'with torch.autocast(device_type="{device_type}", dtype={dtype}):')
    if scaler:
        _before_loop(lines, region, f'scaler = torch.amp.GradScaler("{device_type}")')
    return checked(lines.text())


def _backward_receiver(stmt: ast.stmt) -> ast.expr:
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        func = stmt.value.func
        if isinstance(func, ast.Attribute) and func.attr == "backward":
            return func.value
    raise CannotRewrite("the .backward() call is not a plain `<loss>.backward()` statement")


def _scale_backward(lines: Lines, stmt: ast.stmt) -> None:
    receiver = _backward_receiver(stmt)
    if receiver.lineno != receiver.end_lineno:
        raise CannotRewrite("the loss before .backward() spans several lines")
    line = lines.lines[receiver.lineno - 1]
    text = line[receiver.col_offset : receiver.end_col_offset]
    new = f"scaler.scale({text})"
    lines.lines[receiver.lineno - 1] = _replace_in_line(
        line, receiver.col_offset, receiver.end_col_offset or 0, new
    )


def rewrite_accumulation(
    source: str,
    region: StepRegion,
    batch_vars: list[str],
    k: int,
    mappings: set[str] | frozenset[str] = frozenset(),
) -> str:
    """Split each step's batch into ``k`` micro-batches; gradients add up to the same step.
    ``mappings``: the batch variables that are dicts of tensors (``model(**batch)``), split
    key by key."""
    if not batch_vars:
        raise CannotRewrite("no batch variable found in the forward")
    lines = Lines.of(source)
    start, end = forward_span(lines, region)
    backward = region.backward
    lines.span([backward])
    if backward.lineno != end + 1 and any(
        lines.lines[i].strip() and not lines.lines[i].strip().startswith("#")
        for i in range(end, backward.lineno - 1)
    ):
        raise CannotRewrite("code between the loss and .backward()")
    assigned = {
        t.id
        for stmt in region.forward
        for node in ast.walk(stmt)
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign))
        for t in ast.walk(node)
        if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store)
    }
    if assigned & set(batch_vars):
        raise CannotRewrite("the batch variable is reassigned inside the forward")
    micro = {v: f"{v}_micro" for v in batch_vars}
    # rename the batch variables in the forward (right to left within a line keeps offsets)
    uses = [
        n
        for stmt in region.forward
        for n in ast.walk(stmt)
        if isinstance(n, ast.Name) and n.id in micro and isinstance(n.ctx, ast.Load)
    ]
    if not uses:
        raise CannotRewrite("the batch variable is not used in the forward")
    for node in sorted(uses, key=lambda n: (n.lineno, -n.col_offset)):
        i = node.lineno - 1
        lines.lines[i] = _replace_in_line(
            lines.lines[i], node.col_offset, node.end_col_offset or 0, micro[node.id]
        )
    receiver = _backward_receiver(backward)
    if receiver.lineno != receiver.end_lineno:
        raise CannotRewrite("the loss before .backward() spans several lines")
    bline = lines.lines[receiver.lineno - 1]
    loss_text = bline[receiver.col_offset : receiver.end_col_offset]
    lines.lines[receiver.lineno - 1] = _replace_in_line(
        bline, receiver.col_offset, receiver.end_col_offset or 0, f"({loss_text} / accum_steps)"
    )
    targets = ", ".join(micro[v] for v in batch_vars)

    def chunks(v: str) -> str:
        if v in mappings:
            return (
                f"[{{key: value.chunk(accum_steps)[i] for key, value in {v}.items()}} "
                "for i in range(accum_steps)]"
            )
        return f"{v}.chunk(accum_steps)"

    if len(batch_vars) == 1:
        header = f"for {targets} in {chunks(batch_vars[0])}:"
    else:
        header = f"for {targets} in zip({', '.join(chunks(v) for v in batch_vars)}):"
    _wrap(lines, start, backward.end_lineno or backward.lineno, header)
    _before_loop(lines, region, f"accum_steps = {k}  # micro-batches per step: same batch")
    return checked(lines.text())


def replace_call_kwarg(source: str, call: ast.Call, name: str, value: str) -> str:
    """Set keyword ``name=value`` of ``call`` (an existing keyword's value is replaced)."""
    lines = Lines.of(source)
    for kw in call.keywords:
        if kw.arg == name:
            v = kw.value
            if v.lineno != v.end_lineno:
                raise CannotRewrite(f"{name}= spans several lines")
            i = v.lineno - 1
            lines.lines[i] = _replace_in_line(
                lines.lines[i], v.col_offset, v.end_col_offset or 0, value
            )
            return checked(lines.text())
    raise CannotRewrite(f"no {name}= keyword")


def wrap_all(source: str, header: str) -> str:
    """The whole cell under ``header`` (e.g. ``with torch.inference_mode():``)."""
    lines = Lines.of(source.rstrip("\n"))
    lines.lines = [INDENT + ln if ln.strip() else ln for ln in lines.lines]
    lines.lines.insert(0, header)
    return checked(lines.text())

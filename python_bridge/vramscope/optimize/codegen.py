"""Rewrites of the user's training cell that change only the lines they are about.

Edits are made on source lines located through the AST (``lineno``/``col_offset``, byte
offsets converted to characters) and the tokenizer, never by unparsing, so every untouched
line (comments, strings, continuation lines) is kept byte for byte. Wrapping statements in a
``with``/``for`` indents their lines by one level of the cell's own indentation (after the
block's indentation, so tabs stay consistent): every line of those statements, continuation
lines included, and the comment lines among them at the block's depth or deeper; never a
line that begins inside a string literal (a multi-line string's value is kept), nor a blank
line. A loop the rewrite does not understand raises :class:`CannotRewrite` with the reason;
callers then offer a template in the user's names instead. Every result is compiled before
it is returned.
"""

from __future__ import annotations

import ast
import keyword
from dataclasses import dataclass

from .names import StepRegion
from .source_lines import Untokenizable, char_col, comment_only, indent_of, line_facts

INDENT = "    "


class CannotRewrite(Exception):
    """The training cell's step could not be rewritten; the message says why."""


def safe_word(text: str) -> str:
    """``text`` when it is a valid identifier (and no keyword); else its ``repr``, a literal
    on one line: no other name (a class's, a key's) reaches generated code, comments
    included."""
    if text.isidentifier() and not keyword.iskeyword(text):
        return text
    return repr(text)


def first_line(stmt: ast.stmt) -> int:
    """A statement's first line: its first decorator's for a decorated definition."""
    decorators = getattr(stmt, "decorator_list", None) or []
    return min([stmt.lineno, *(d.lineno for d in decorators)])


@dataclass
class Lines:
    """A cell's source as editable lines (0-based list, AST line numbers are 1-based)."""

    lines: list[str]

    @classmethod
    def of(cls, source: str) -> Lines:
        if "\r" in source.replace("\r\n", ""):
            raise CannotRewrite("the cell ends lines with a lone carriage return")
        return cls(source.split("\n"))

    def text(self) -> str:
        return "\n".join(self.lines)

    def indent_of(self, lineno: int) -> str:
        return indent_of(self.lines[lineno - 1])

    def col(self, lineno: int, byte_col: int | None) -> int:
        """The character column of an AST byte offset on 1-based line ``lineno``."""
        return char_col(self.lines[lineno - 1], byte_col)

    def span(self, stmts: list[ast.stmt]) -> tuple[int, int]:
        """First and last 1-based line of contiguous statements that own their lines."""
        first, last = stmts[0], stmts[-1]
        start, end = first_line(first), last.end_lineno or last.lineno
        head = self.lines[start - 1]
        if start != first.lineno:  # decorated: the line starts with its first decorator
            alone = head.lstrip().startswith("@")
        else:
            alone = not head[: self.col(start, first.col_offset)].strip()
        tail = self.lines[end - 1][self.col(end, last.end_col_offset) :].strip()
        if not alone or (tail and not tail.startswith("#")):
            raise CannotRewrite("a statement shares its line with another one (';')")
        return start, end


def checked(source: str) -> str:
    """``source`` when it compiles; CannotRewrite otherwise."""
    try:
        compile(source, "<vramscope rewrite>", "exec")
    except SyntaxError as err:
        raise CannotRewrite(f"the rewrite does not compile ({err.msg})") from None
    return source


def _segment(lines: Lines, node: ast.AST) -> str:
    seg = ast.get_source_segment(lines.text(), node)
    if seg is None:
        raise CannotRewrite("could not locate an expression in the cell")
    return seg


def _replace(lines: Lines, node: ast.expr, text: str) -> None:
    """Put ``text`` in place of a one-line expression, byte offsets read as characters."""
    if node.lineno != node.end_lineno:
        raise CannotRewrite("an expression to change spans several lines")
    i = node.lineno - 1
    line = lines.lines[i]
    start, end = char_col(line, node.col_offset), char_col(line, node.end_col_offset)
    lines.lines[i] = line[:start] + text + line[end:]


def _facts(lines: Lines) -> frozenset[int]:
    try:
        return line_facts(lines.text()).in_string
    except Untokenizable as err:
        raise CannotRewrite(f"the cell does not tokenize ({err})") from None


def _unit(lines: Lines, start: int, indent: str, in_string: frozenset[int]) -> str:
    """One level of the cell's own indentation at line ``start``: what the block's
    indentation adds to the line that opens it, else a tab or four spaces."""
    for i in range(start - 1, 0, -1):
        line = lines.lines[i - 1]
        if i in in_string or not line.strip() or comment_only(line):
            continue
        outer = indent_of(line)
        if len(outer) < len(indent) and indent.startswith(outer):
            return indent[len(outer) :]
        if len(outer) < len(indent):
            break
    uses_tabs = any(
        indent_of(line).startswith("\t")
        for n, line in enumerate(lines.lines, 1)
        if n not in in_string
    )
    return "\t" if uses_tabs or "\t" in indent else INDENT


def indented_lines(lines: Lines, start: int, end: int, in_string: frozenset[int]) -> list[int]:
    """The 1-based lines of ``start..end`` that wrapping them indents (see the module's
    docstring): not blank, not beginning inside a string, comments at the block's depth."""
    depth = len(lines.indent_of(start))
    return [
        n
        for n in range(start, end + 1)
        if lines.lines[n - 1].strip()
        and n not in in_string
        and not (comment_only(lines.lines[n - 1]) and len(lines.indent_of(n)) < depth)
    ]


def _wrap(lines: Lines, start: int, end: int, header: str) -> None:
    """Put lines ``start..end`` under ``header`` (a ``with``/``for`` line), one level in."""
    in_string = _facts(lines)
    indent = lines.indent_of(start)
    unit = _unit(lines, start, indent, in_string)
    for n in indented_lines(lines, start, end, in_string):
        line = lines.lines[n - 1]
        if line.startswith(indent):
            lines.lines[n - 1] = indent + unit + line[len(indent) :]
        else:  # a continuation line left of the block: its own indentation is free
            lines.lines[n - 1] = unit + line
    lines.lines.insert(start - 1, f"{indent}{header}")


def _before_loop(lines: Lines, region: StepRegion, text: str) -> None:
    """A line before the outermost loop around the step (or before the step when there is
    no loop)."""
    anchor = region.outer or region.loop or region.forward[0]
    line = first_line(anchor)
    lines.lines.insert(line - 1, f"{lines.indent_of(line)}{text}")


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
        lines.lines[first_line(step_stmt) - 1 : end_step] = [
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
    _replace(lines, receiver, f"scaler.scale({_segment(lines, receiver)})")


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
    in_fstrings = {
        id(n)
        for stmt in region.forward
        for f in ast.walk(stmt)
        if isinstance(f, ast.JoinedStr)
        for n in ast.walk(f)
    }
    # an f-string keeps its text (it may span lines): inside it the name is the whole batch
    uses = [
        n
        for stmt in region.forward
        for n in ast.walk(stmt)
        if isinstance(n, ast.Name)
        and n.id in micro
        and isinstance(n.ctx, ast.Load)
        and id(n) not in in_fstrings
    ]
    if not uses:
        raise CannotRewrite("the batch variable is not used in the forward")
    for node in sorted(uses, key=lambda n: (n.lineno, -n.col_offset)):
        _replace(lines, node, micro[node.id])
    receiver = _backward_receiver(backward)
    if receiver.lineno != receiver.end_lineno:
        raise CannotRewrite("the loss before .backward() spans several lines")
    _replace(lines, receiver, f"({_segment(lines, receiver)} / accum_steps)")
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
            if kw.value.lineno != kw.value.end_lineno:
                raise CannotRewrite(f"{name}= spans several lines")
            _replace(lines, kw.value, value)
            return checked(lines.text())
    raise CannotRewrite(f"no {name}= keyword")


def wrap_all(source: str, header: str) -> str:
    """The whole cell under ``header`` (e.g. ``with torch.inference_mode():``)."""
    lines = Lines.of(source.rstrip("\n"))
    if not any(line.strip() for line in lines.lines):
        raise CannotRewrite("the cell is empty")
    _wrap(lines, 1, len(lines.lines), header)
    return checked(lines.text())


def wrap_loop_body(source: str, region: StepRegion, header: str) -> str:
    """The body of the loop around the step under ``header`` (e.g. ``with
    accelerator.accumulate(model):``)."""
    if region.loop is None:
        raise CannotRewrite("the step is not in a for loop")
    lines = Lines.of(source)
    start, end = lines.span(region.loop.body)
    _wrap(lines, start, end, header)
    return checked(lines.text())

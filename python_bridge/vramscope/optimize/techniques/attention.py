"""Hand-written attention that keeps its n x n scores: ``scaled_dot_product_attention``.

Detected from what the measured training step made (stepwatch): square softmax outputs
(``[..., T, T]``) in the forward, which softmax saves for backward.
``torch.nn.functional.scaled_dot_product_attention`` computes the same result without keeping
the scores: it keeps one float32 log-sum-exp per row instead, and its output (laid out so
that the usual ``out.transpose(1, 2).reshape(b, t, c)`` is a view), which the projection after
it keeps in place of the copy that reshape made before. Predicted saving: the scores' bytes
minus those rows.

The module is found by its forward's code: three consecutive statements ``s = q @ k^T
[/ or * scale]``, ``p = softmax(s, dim=-1)``, ``o = p @ v`` whose ``s`` and ``p`` are used
nowhere else. When the class is the user's own (defined in the notebook), an enable cell
swaps that forward on its modules for the same code with one ``scaled_dot_product_attention``
call; otherwise (or with anything else between, masks, dropout) a template says what to
change and why it is not done in place.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any

from ...messages.optimize import Suggestion, SuggestionKind
from ..codegen import safe_word
from ..context import Context
from .base import mib, predicted, suggestion

COST = ("usually faster (a fused kernel); results equal up to float rounding", None)
FORWARD = "_sdpa_forward"


def _is_transposed_key(node: ast.expr) -> str | None:
    """``k.transpose(-2, -1)`` / ``k.transpose(-1, -2)`` / ``k.mT``: the text of ``k``."""
    if isinstance(node, ast.Attribute) and node.attr == "mT":
        return ast.unparse(node.value)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "transpose"
        and len(node.args) == 2
        and {ast.unparse(a) for a in node.args} == {"-2", "-1"}
    ):
        return ast.unparse(node.func.value)
    return None


def _product(node: ast.expr) -> tuple[ast.expr, ast.expr] | None:
    """``a @ b`` or ``torch.matmul(a, b)``."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        return node.left, node.right
    if (
        isinstance(node, ast.Call)
        and ast.unparse(node.func) in ("torch.matmul", "torch.bmm")
        and len(node.args) == 2
    ):
        return node.args[0], node.args[1]
    return None


def _scores(node: ast.expr) -> tuple[str, str, str] | None:
    """``q @ k^T [/ x | * x]``: (q, k, scale text)."""
    scale = "1.0"
    scaled = isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.Mult))
    if scaled and _product(node.left) is not None:  # type: ignore[attr-defined]
        x = ast.unparse(node.right)  # type: ignore[attr-defined]
        scale = f"1 / ({x})" if isinstance(node.op, ast.Div) else x  # type: ignore[attr-defined]
        node = node.left  # type: ignore[attr-defined]
    pair = _product(node)
    if pair is None:
        return None
    key = _is_transposed_key(pair[1])
    return (ast.unparse(pair[0]), key, scale) if key is not None else None


def _softmax_of(node: ast.expr) -> str | None:
    """``s.softmax(dim=-1)`` / ``softmax(s, dim=-1)`` (torch, F, torch.nn.functional)."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return None
    if node.func.attr != "softmax":
        return None
    args = list(node.args)
    dims = [kw.value for kw in node.keywords if kw.arg == "dim"]
    if len(node.keywords) != len(dims):
        return None
    if ast.unparse(node.func.value) in ("torch", "F", "torch.nn.functional"):
        target = args.pop(0) if args else None
    else:
        target = node.func.value
    dim = dims[0] if dims else (args[0] if len(args) == 1 else None)
    if target is None or dim is None or ast.unparse(dim) != "-1" or len(args) + len(dims) != 1:
        return None
    return ast.unparse(target)


def _assigned(stmt: ast.stmt) -> tuple[str, ast.expr] | None:
    if (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
    ):
        return stmt.targets[0].id, stmt.value
    return None


def rewrite_forward(source: str) -> str | None:
    """The forward's source with its hand-written attention replaced (renamed
    ``_sdpa_forward``), or None when the pattern is not there exactly."""
    source = textwrap.dedent(source)
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    fn = tree.body[0] if tree.body else None
    if not isinstance(fn, ast.FunctionDef) or fn.decorator_list:
        return None
    for holder in ast.walk(fn):
        body = getattr(holder, "body", None)
        if not isinstance(body, list):
            continue
        for i in range(len(body) - 2):
            a, b, c = (_assigned(s) for s in body[i : i + 3])
            if a is None or b is None or c is None:
                continue
            scores = _scores(a[1])
            if scores is None or _softmax_of(b[1]) != a[0]:
                continue
            pair = _product(c[1])
            if pair is None or ast.unparse(pair[0]) != b[0]:
                continue
            used = [
                n
                for n in ast.walk(fn)
                if isinstance(n, ast.Name) and n.id in (a[0], b[0]) and isinstance(n.ctx, ast.Load)
            ]
            if len(used) != 2:
                continue  # the scores or weights are used elsewhere (returned, stored)
            q, k, scale = scores
            v = ast.unparse(pair[1])
            lines = source.splitlines()
            indent = lines[body[i].lineno - 1][: body[i].col_offset]
            call = (
                f"{indent}{c[0]} = torch.nn.functional.scaled_dot_product_attention("
                f"{q}, {k}, {v}, scale={scale})"
            )
            start, end = body[i].lineno - 1, body[i + 2].end_lineno or body[i + 2].lineno
            lines[start:end] = [call]
            head = fn.lineno - 1
            lines[head] = lines[head].replace(f"def {fn.name}(", f"def {FORWARD}(", 1)
            return "\n".join(lines[head:]) + "\n"
    return None


def _attention_classes(model: Any) -> list[tuple[type, str, str | None]]:
    """(class, path of its first module, rewritten forward or None) for each class whose
    forward computes softmax scores by hand."""
    found: dict[type, tuple[str, str | None]] = {}
    for path, module in model.named_modules():
        cls = type(module)
        if cls in found or "forward" in vars(module):
            continue
        try:
            source = inspect.getsource(cls.forward)
        except (OSError, TypeError):
            continue
        if "softmax" not in source:
            continue
        found[cls] = (path, rewrite_forward(source))
    return [(cls, path, code) for cls, (path, code) in found.items()]


def suggest(ctx: Context) -> list[Suggestion]:
    step = ctx.step
    if ctx.model is None or step is None or not step.attention[0]:
        return []
    scores, rows = step.attention
    saving = scores - rows
    if saving <= 0:
        return []
    classes = ctx.memoized("attention", lambda: _attention_classes(ctx.model))
    sid = "attention:sdpa"
    before = ctx.activation_bytes
    why = [
        f"the measured training step keeps {mib(scores)} of n x n attention scores (square "
        "softmax outputs saved for backward)",
        f"scaled_dot_product_attention keeps one float32 per row instead ({mib(rows)}; its "
        f"output replaces the copy the next layer keeps): {mib(saving)} less",
    ]
    patchable = [c for c in classes if c[2] is not None and c[0].__module__ == "__main__"]
    if len(classes) == 1 and patchable:
        cls, path, forward = patchable[0]
        code, undo = _enable_cells(sid, cls.__name__, ctx.expr(path), ctx.expr(""), forward or "")
        kind: SuggestionKind = "enable"
        title = f"scaled_dot_product_attention in {cls.__name__}"
    else:
        code, reason = _template(sid, classes), _reason(classes)
        why.append(f"not changed in place: {reason}")
        undo, kind = None, "template"
        title = "scaled_dot_product_attention instead of hand-written attention"
    pred = predicted(before, before - saving, saving, None)
    return [suggestion(sid, "attention", title, why, pred, COST, kind, code, undo)]


def _enable_cells(sid: str, cls: str, first: str, model: str, forward: str) -> tuple[str, str]:
    cls = safe_word(cls)
    code = (
        f"# vramscope: {sid}\n"
        f"# {cls}.forward computes softmax(q @ k^T) @ v by hand and keeps the n x n scores for\n"
        "# backward. The same forward with one torch.nn.functional.scaled_dot_product_attention\n"
        f"# call, set on every {cls} module. Re-running is harmless; the undo cell restores it.\n"
        "import types\n"
        "\n"
        "import torch\n"
        "\n"
        "\n"
        f"{forward}"
        "\n"
        "\n"
        f"_attention_class = type({first})\n"
        f"for _m in {model}.modules():\n"
        '    if type(_m) is _attention_class and "forward" not in vars(_m):\n'
        f"        _m.forward = types.MethodType({FORWARD}, _m)\n"
    )
    undo = (
        f"# vramscope: undo {sid}\n"
        f"for _m in {model}.modules():\n"
        f'    if getattr(vars(_m).get("forward"), "__name__", None) == "{FORWARD}":\n'
        "        del _m.forward  # back to the class's forward\n"
    )
    return code, undo


def _reason(classes: list[tuple[type, str, str | None]]) -> str:
    if not classes:
        return "no module's forward with the softmax was found (its source is not available)"
    if len(classes) > 1:
        names = ", ".join(c[0].__name__ for c in classes)
        return (
            f"several modules compute a softmax ({names}): which one keeps the scores is not known"
        )
    cls, _, forward = classes[0]
    if forward is None:
        return (
            f"{cls.__name__}.forward is not exactly `s = q @ k^T * scale`, `p = softmax(s, "
            "dim=-1)`, `o = p @ v` (a mask, dropout, or the weights used elsewhere)"
        )
    return f"{cls.__name__} is defined in {cls.__module__}, not in this notebook"


def _template(sid: str, classes: list[tuple[type, str, str | None]]) -> str:
    one = len(classes) == 1
    where = safe_word(classes[0][0].__name__) + ".forward" if one else "the attention forward"
    return (
        f"# vramscope: {sid}\n"
        f"# TEMPLATE: in {where}, replace the hand-written attention\n"
        "#     scores = q @ k.transpose(-2, -1) * scale\n"
        "#     weights = scores.softmax(dim=-1)\n"
        "#     out = weights @ v\n"
        "# with one call that does not keep the n x n scores for backward:\n"
        "#     out = torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=scale)\n"
        "# (a boolean mask: attn_mask=<True where attended>; causal: is_causal=True;\n"
        "# dropout on the weights: dropout_p=p if self.training else 0.0)\n"
        "import torch\n"
    )

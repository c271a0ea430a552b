"""Rewrites change only the lines they are about, on a corpus of training cells.

Each cell in ``rewrite_corpus/`` (tutorial loops, the Hugging Face course, hand-written loops
with odd formatting: tabs, two- and three-space indents, semicolons, backslash continuations,
comments at odd depths, nested and ``while`` loops, decorators, f-strings, multi-line strings,
``for ... else``) is rewritten by every technique that applies, compiled, and diffed against
the original with difflib. The ground truth is computed here from the tokenizer and the AST:
the original lines that change are exactly the statement lines being wrapped (blank lines,
lines that begin inside a string literal and comments left of the block stay), each changed
line keeps its text with one more level of indentation, the only added lines are the ones the
technique inserts, and the program's syntax tree is the original's with that change only.
"""

from __future__ import annotations

import ast
import copy
import difflib
import io
import re
import tokenize
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from vramscope.optimize.codegen import (
    CannotRewrite,
    rewrite_accumulation,
    rewrite_autocast,
    wrap_all,
)
from vramscope.optimize.names import StepRegion, parse, step_region

CORPUS = Path(__file__).parent / "rewrite_corpus"
CELLS = sorted(p.name for p in CORPUS.glob("*.py"))
AUTOCAST = 'with torch.autocast(device_type="cpu", dtype=torch.bfloat16):'
# cells a rewrite must refuse, and the reason it gives (every other cell must be rewritten)
REFUSED = {
    "autocast": {
        "05_pytorch_transfer_learning.py": "on the .backward() line",
        "14_semicolon_boundary.py": "shares its line",
        "25_step_in_for_else.py": None,
    },
    "accumulation": {
        "01_pytorch_quickstart.py": "reassigned",
        "03_hf_course_full_training.py": "reassigned",
        "05_pytorch_transfer_learning.py": "on the .backward() line",
        "06_nanogpt_style.py": "reassigned",
        "14_semicolon_boundary.py": "shares its line",
    },
}
REFUSED["autocast"].pop("25_step_in_for_else.py")  # the else body is a body like any other
# GradScaler also needs the optimizer's .step() after .backward() in the same body
REFUSED["scaler"] = {**REFUSED["autocast"], "06_nanogpt_style.py": "no optimizer .step()"}


def test_the_corpus_has_at_least_40_cells() -> None:
    assert len(CELLS) >= 40
    sources = [p for p in CELLS if "# source:" in (CORPUS / p).read_text()]
    assert len(sources) >= 5  # several come from outside sources


def _source(name: str) -> str:
    return (CORPUS / name).read_text(encoding="utf-8")


def _region(source: str) -> StepRegion:
    tree = parse(source)
    assert tree is not None
    region = step_region(tree)
    assert region is not None, "no training step found"
    return region


def _in_string(source: str) -> set[int]:
    """1-based lines that begin inside a string token (the tokenizer's own account)."""
    inside: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.STRING:
            inside.update(range(tok.start[0] + 1, tok.end[0] + 1))
    return inside


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _first(stmt: ast.stmt) -> int:
    return min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", []))])


def _wrapped(source: str, start: int, end: int) -> set[int]:
    """Lines that wrapping ``start..end`` must indent: statement lines (continuations
    included) and comments at the block's depth or deeper; not blank lines, not lines that
    begin inside a string literal."""
    lines = source.split("\n")
    depth = len(_indent(lines[start - 1]))
    inside = _in_string(source)
    return {
        n
        for n in range(start, end + 1)
        if lines[n - 1].strip()
        and n not in inside
        and not (lines[n - 1].lstrip().startswith("#") and len(_indent(lines[n - 1])) < depth)
    }


def _diff(original: str, rewritten: str) -> tuple[set[int], list[str]]:
    """(1-based original lines that changed, the new lines in the changed blocks)."""
    old, new = original.split("\n"), rewritten.split("\n")
    changed: set[int] = set()
    added: list[str] = []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op != "equal":
            changed.update(range(i1 + 1, i2 + 1))
            added.extend(new[j1:j2])
    return changed, added


def _check_indented(original: str, changed: set[int], added: list[str], extra: list[str]) -> None:
    """The new lines are the changed lines one level deeper, plus exactly ``extra``."""
    old = original.split("\n")
    rest = list(added)
    for line in extra:
        assert line in rest, (line, rest)
        rest.remove(line)
    expected = sorted(old[n - 1].strip() for n in changed)
    assert sorted(line.strip() for line in rest) == expected
    widths = set()
    for n, line in zip(sorted(changed), rest):
        assert line.strip() == old[n - 1].strip()
        widths.add(len(_indent(line)) - len(_indent(old[n - 1])))
    assert len(widths) <= 1 and all(w > 0 for w in widths), widths  # one level, the same


def _strings(tree: ast.AST) -> list[object]:
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)]


Rewrite = Callable[[str, StepRegion], str]
REWRITES: dict[str, Rewrite] = {
    "autocast": lambda s, r: rewrite_autocast(s, r, "cpu", "torch.bfloat16", False),
    "scaler": lambda s, r: rewrite_autocast(s, r, "cuda", "torch.float16", True),
    "accumulation": lambda s, r: rewrite_accumulation(s, r, _batch_vars(s, r), 2),
}


@dataclass
class Rewritten:
    source: str
    region: StepRegion
    code: str
    changed: set[int]  # original lines difflib finds changed
    added: list[str]  # the new lines in the changed blocks

    @property
    def start(self) -> int:
        return _first(self.region.forward[0])

    def anchor_indent(self) -> str:
        """The indentation of the line set-up lines go before: the outermost loop's."""
        outer = self.region.outer or self.region.loop
        line = _first(outer) if outer else self.start
        return _indent(self.source.split("\n")[line - 1])


def _rewritten(name: str, technique: str) -> Rewritten | None:
    """The cell rewritten (compiled) and diffed, or None for a cell the technique must
    refuse (and does, saying why)."""
    rewrite = REWRITES[technique]
    source = _source(name)
    region = _region(source)
    if name in REFUSED[technique]:
        reason = REFUSED[technique][name]
        with pytest.raises(CannotRewrite, match=re.escape(reason) if reason else None):
            rewrite(source, region)
        return None
    code = rewrite(source, region)
    compile(code, name, "exec")
    return Rewritten(source, region, code, *_diff(source, code))


@pytest.mark.parametrize("name", CELLS)
def test_autocast_wraps_only_the_forward_statement_lines(name: str) -> None:
    done = _rewritten(name, "autocast")
    if done is None:
        return
    source, region, code, changed, added = vars(done).values()
    start = done.start
    assert changed == _wrapped(source, start, region.forward[-1].end_lineno or 0)
    assert not changed & _in_string(source)  # never a line inside a string literal
    indent = _indent(source.split("\n")[start - 1])
    _check_indented(source, changed, added, [indent + AUTOCAST])
    # the syntax tree: the original's, with the forward statements under the with
    expected = parse(source)
    assert expected is not None
    body = step_region(expected).body  # type: ignore[union-attr]
    first = next(i for i, s in enumerate(body) if _first(s) == start)
    count = len(region.forward)
    item = ast.withitem(ast.parse(AUTOCAST[5:-1], mode="eval").body, None)
    body[first : first + count] = [ast.With([item], body[first : first + count])]
    assert ast.dump(ast.parse(code)) == ast.dump(ast.fix_missing_locations(expected))


@pytest.mark.parametrize("name", CELLS)
def test_autocast_with_grad_scaler_changes_the_step_and_backward_lines(name: str) -> None:
    done = _rewritten(name, "scaler")
    if done is None:
        return
    step, backward, source = done.region.step, done.region.backward, done.source
    assert step is not None
    expected = _wrapped(source, done.start, done.region.forward[-1].end_lineno or 0)
    expected |= {backward.lineno}
    expected |= set(range(step.lineno, (step.end_lineno or 0) + 1))
    assert done.changed == expected
    assert sorted(_strings(ast.parse(done.code)), key=repr) == sorted(
        [*_strings(ast.parse(source)), "cuda", "cuda"], key=repr
    )
    assert f'{done.anchor_indent()}scaler = torch.amp.GradScaler("cuda")' in done.added
    step_indent = _indent(source.split("\n")[step.lineno - 1])
    assert f"{step_indent}scaler.update()" in done.added
    assert any("scaler.scale(" in line for line in done.added)


def _batch_vars(source: str, region: StepRegion) -> list[str]:
    declared = re.search(r"^# batch: (.*)$", source, re.M)
    if declared:
        return declared.group(1).split()
    loaded = {
        n.id
        for s in region.forward
        for n in ast.walk(s)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }
    if region.loop is None:
        return []
    return [n.id for n in ast.walk(region.loop.target) if isinstance(n, ast.Name)] or sorted(loaded)


@pytest.mark.parametrize("name", CELLS)
def test_accumulation_changes_the_wrapped_lines_and_the_renamed_names_only(name: str) -> None:
    done = _rewritten(name, "accumulation")
    if done is None:
        return
    # the changed lines: the forward, the loss and .backward() one level in, never a line
    # inside a string literal
    end = done.region.backward.end_lineno or 0
    assert done.changed == _wrapped(done.source, done.start, end)
    assert not done.changed & _in_string(done.source)
    # undo the intended token edits: the rest of each changed line is the original's
    plain = [
        re.sub(r"\((.*) / accum_steps\)", r"\1", re.sub(r"_micro\b", "", line))
        for line in done.added
    ]
    setup = f"{done.anchor_indent()}accum_steps = 2  # micro-batches per step: same batch"
    header = next(line for line in done.added if ".chunk(accum_steps)" in line)
    assert header.startswith(_indent(done.source.split("\n")[done.start - 1]) + "for ")
    _check_indented(done.source, done.changed, plain, [setup, re.sub(r"_micro\b", "", header)])
    assert sorted(_strings(ast.parse(done.code)), key=repr) == sorted(
        [*_strings(ast.parse(done.source)), 2], key=repr
    )


@pytest.mark.parametrize("name", CELLS)
def test_inference_mode_wraps_every_line_but_the_inside_of_strings(name: str) -> None:
    source = _source(name)
    if "from __future__" in source:
        return
    code = wrap_all(source, "with torch.inference_mode():")
    compile(code, name, "exec")
    body = source.rstrip("\n")
    changed, added = _diff(body, code)
    assert changed == _wrapped(body, 1, len(body.split("\n")))
    _check_indented(body, changed, added, ["with torch.inference_mode():"])
    tree = ast.parse(source)
    item = ast.withitem(ast.parse("torch.inference_mode()", mode="eval").body, None)
    wrapped = ast.Module([ast.With([item], copy.deepcopy(tree.body))], [])
    assert ast.dump(ast.parse(code)) == ast.dump(ast.fix_missing_locations(wrapped))


def test_the_multiline_string_of_the_issue_stays_byte_identical() -> None:
    source = _source("07_multiline_string_in_forward.py")
    code = rewrite_autocast(source, _region(source), "cpu", "torch.bfloat16", scaler=False)
    assert '        note = """step\ndone"""\n' in code  # its second line is not indented
    notes = [
        n.value.value
        for n in ast.walk(ast.parse(code))
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
    ]
    assert notes == ["step\ndone"]


def test_a_cell_that_does_not_tokenize_is_refused_not_mangled() -> None:
    with pytest.raises(CannotRewrite, match="does not tokenize"):
        wrap_all('x = 1\ny = """open\n', "with torch.inference_mode():")

"""The Markdown report: the summary (exports.answer) first, then devices, worst cells by peak
and by delta, breakdown, top layers, holders and optimization results. Every user string goes
through ``markdown_text``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .answer import answer
from .escape import markdown_text as md
from .summary import cell_label, fmt_time, title
from .tables import Cell, Table, insight_tables, overview_tables, summary_facts, summary_tables


def _section(table: Table) -> list[str]:
    out = [f"{'#' * table.level} {table.heading}", ""]
    if table.intro:
        out += ["".join(md(c.text) for c in table.intro), ""]
    if not table.rows and table.empty:
        return [*out, table.empty, ""]
    out += [
        "| " + " | ".join(table.header) + " |",
        "|" + "|".join("---" for _ in table.header) + "|",
    ]
    out += ["| " + " | ".join(md(c.text) for c in row) + " |" for row in table.rows]
    return [*out, ""]


def _inline(c: Cell) -> str:
    """A cell in running text: code between backticks would end at a backtick of its own,
    so code is escaped like text and set in italics."""
    return f"*{md(c.text)}*" if c.kind == "code" and c.text else md(c.text)


def _failed_cells(cells: list[Mapping[str, Any]]) -> Table:
    return Table(
        "Failed cells",
        ("cell", "error", "out of memory", "code"),
        [
            [
                Cell(cell_label(c)),
                Cell(c.get("error_type") or "error"),
                Cell("yes" if c.get("oom") else "no"),
                Cell(c.get("code_head") or "", "code"),
            ]
            for c in cells
        ],
    )


def render_markdown(report: Mapping[str, Any]) -> str:
    out: list[str] = [f"# {md(title(report))}", ""]
    kernel = report.get("kernel") or {}
    cells = report.get("cells") or []
    out += [
        f"Created {fmt_time(report.get('created'))} by vramscope "
        f"{md(report.get('bridge_version', '?'))}; Python {md(kernel.get('python', '?'))}, "
        f"torch {md(kernel.get('torch_version') or 'not imported')}; "
        f"{len(cells)} cells, {len(report.get('samples') or [])} samples.",
        "",
    ]
    summary = answer(report)
    out += ["## Summary", ""]
    out += [
        f"- **{f.label}**: " + "".join(_inline(c) for c in f.text) for f in summary_facts(summary)
    ]
    out.append("")
    for table in summary_tables(summary, report):
        out += _section(table)
    failed = [c for c in cells if not c.get("ok", True)]
    tables = [
        *overview_tables(report),
        *([_failed_cells(failed)] if failed else []),
        *insight_tables(report),
    ]
    for table in tables:
        out += _section(table)
    return "\n".join(out).rstrip("\n") + "\n"

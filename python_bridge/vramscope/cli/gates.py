"""The CI gates of ``vramscope profile``: memory budget, per-cell budget, baseline regression.

Exit codes (README, "Reports and CI"), one per reason; when several apply, the first in this
list wins (every violation is printed):

====  ===========================================================================
0     every cell ran and every gate passed
1     vramscope itself failed (a bug; the message says what)
2     usage error (bad arguments, unreadable notebook or baseline)
3     a cell failed: raised (and is not tagged ``raises-exception``), timed out, or the
      kernel died
4     ``--budget`` exceeded: the device's memory in use went over it
5     ``--cell-budget`` exceeded: a cell's peak rise went over it
6     ``--baseline``: a cell's peak grew past the baseline's by more than ``--tolerance``
====  ===========================================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..exports.summary import cell_label, fmt_bytes

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_CELL_FAILED = 3
EXIT_BUDGET = 4
EXIT_CELL_BUDGET = 5
EXIT_REGRESSION = 6
#: A peak must also grow by at least this much to count as a regression (noise floor).
MIN_GROWTH = 1 << 20


@dataclass(frozen=True)
class Violation:
    code: int
    message: str


def cell_name(cell: Mapping[str, Any]) -> str:
    """``cell [3] (id 'a1b2', x = torch.ones(...))``: how messages name a cell."""
    head = cell.get("code_head") or ""
    ident = cell.get("cell_id")
    parts = [f"id {ident!r}" if ident else None, head[:60] if head else None]
    extra = ", ".join(p for p in parts if p)
    return f"cell {cell_label(cell)}" + (f" ({extra})" if extra else "")


def pick_device(report: Mapping[str, Any], wanted: str | None) -> str:
    """``wanted``, else the first accelerator any cell touched, else ``cpu``."""
    if wanted:
        return wanted
    seen: dict[str, None] = {}
    for cell in report.get("cells") or []:
        for device in cell.get("devices") or {}:
            seen.setdefault(device, None)
    return next((d for d in seen if d != "cpu"), "cpu")


def _figures(cell: Mapping[str, Any], device: str) -> tuple[int, int, int] | None:
    d = (cell.get("devices") or {}).get(device)
    if d is None:
        return None
    return int(d["before_bytes"]), int(d["delta_bytes"]), int(d["peak_delta_bytes"])


def check_budget(report: Mapping[str, Any], device: str, budget: int) -> list[Violation]:
    """The device's in-use memory (cell before + peak, and every sample) against ``budget``."""
    cells = report.get("cells") or []
    for cell in cells:
        f = _figures(cell, device)
        if f is not None and f[0] + f[2] > budget:
            return [
                Violation(
                    EXIT_BUDGET,
                    f"budget exceeded on {device} by {cell_name(cell)}: "
                    f"{fmt_bytes(f[0] + f[2])} in use at its peak > budget {fmt_bytes(budget)}",
                )
            ]
    for sample in report.get("samples") or []:
        used = sample.get("d", {}).get(device, {}).get("used")
        if used is not None and used > budget:
            t = sample["t"]
            during = next(
                (
                    c
                    for c in cells
                    if c.get("start_time", 0) <= t <= c.get("start_time", 0) + c.get("duration", 0)
                ),
                None,
            )
            where = f"during {cell_name(during)}" if during else "between cells"
            return [
                Violation(
                    EXIT_BUDGET,
                    f"budget exceeded on {device} {where}: {fmt_bytes(used)} in use > budget "
                    f"{fmt_bytes(budget)}",
                )
            ]
    return []


def check_cell_budget(report: Mapping[str, Any], device: str, budget: int) -> list[Violation]:
    out = []
    for cell in report.get("cells") or []:
        f = _figures(cell, device)
        if f is not None and f[2] > budget:
            out.append(
                Violation(
                    EXIT_CELL_BUDGET,
                    f"cell budget exceeded on {device} by {cell_name(cell)}: peak "
                    f"{fmt_bytes(f[2], signed=True)} > cell budget {fmt_bytes(budget)}",
                )
            )
    return out


@dataclass(frozen=True)
class Pair:
    """A cell of the old and the new report (matched by cell id, else by execution count)."""

    old: Mapping[str, Any] | None
    new: Mapping[str, Any] | None


def match_cells(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Pair]:
    """Pairs in the new report's order, then the old report's cells the new one lacks.

    A cell run several times is matched with its latest run on each side.
    """

    def key(cell: Mapping[str, Any]) -> tuple[str, Any]:
        ident = cell.get("cell_id")
        return ("id", ident) if ident else ("count", cell.get("execution_count"))

    olds = {key(c): c for c in old.get("cells") or []}
    news = {key(c): c for c in new.get("cells") or []}
    pairs = [Pair(olds.get(k), c) for k, c in news.items()]
    return pairs + [Pair(c, None) for k, c in olds.items() if k not in news]


def check_baseline(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    device: str,
    tolerance: float,
    min_growth: int = MIN_GROWTH,
) -> list[Violation]:
    """A cell whose peak grew by more than ``tolerance`` (and ``min_growth``) is a regression."""
    out = []
    for pair in match_cells(old, new):
        if pair.old is None or pair.new is None:
            continue
        fo, fn = _figures(pair.old, device), _figures(pair.new, device)
        if fo is None or fn is None:
            continue
        before, after = fo[2], fn[2]
        if after - before > max(tolerance * before, min_growth - 1):
            growth = f"+{(after - before) / before:.0%}" if before else "new memory"
            out.append(
                Violation(
                    EXIT_REGRESSION,
                    f"regression on {device} in {cell_name(pair.new)}: peak "
                    f"{fmt_bytes(after, signed=True)} vs baseline "
                    f"{fmt_bytes(before, signed=True)} ({growth} > tolerance {tolerance:.0%})",
                )
            )
    return out

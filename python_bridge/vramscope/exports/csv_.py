"""CSV exports: one row per (cell, device); the samples as a second table.

``peak_source`` says how a row's peak was found: ``exact`` (counted op by op) or ``sampled``
(CPU rows of protocol 1.1 and later); empty where the record has none (CUDA and MPS peaks
come from their allocators' own peak statistics).

Text fields that a spreadsheet would evaluate (``= + - @``, tab, CR first) get a leading
``'`` (escape.csv_cell); numbers stay numbers.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from typing import Any

from .escape import csv_cell

CELL_COLUMNS = (
    "execution_count",
    "cell_id",
    "start_time",
    "duration_s",
    "ok",
    "error_type",
    "oom",
    "device",
    "before_bytes",
    "after_bytes",
    "delta_bytes",
    "peak_delta_bytes",
    "peak_source",
    "code_head",
)
SAMPLE_FIELDS = ("used", "reserved", "peak", "device_used", "device_total")


def _write(rows: list[list[Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")  # RFC 4180; CR in a field is quoted
    for row in rows:
        writer.writerow([csv_cell(v) for v in row])
    return out.getvalue()


def render_cells_csv(report: Mapping[str, Any]) -> str:
    """One row per cell and device it touched (a cell with no device gets one empty row)."""
    rows: list[list[Any]] = [list(CELL_COLUMNS)]
    for cell in report.get("cells") or []:
        head = [
            cell.get("execution_count"),
            cell.get("cell_id"),
            cell.get("start_time"),
            cell.get("duration"),
            cell.get("ok"),
            cell.get("error_type"),
            cell.get("oom"),
        ]
        devices = cell.get("devices") or {}
        if not devices:
            rows.append([*head, *[None] * 6, cell.get("code_head")])
        for device, d in devices.items():
            rows.append(
                [
                    *head,
                    device,
                    d.get("before_bytes"),
                    d.get("after_bytes"),
                    d.get("delta_bytes"),
                    d.get("peak_delta_bytes"),
                    d.get("peak_source"),
                    cell.get("code_head"),
                ]
            )
    return _write(rows)


def render_samples_csv(report: Mapping[str, Any]) -> str:
    """One row per sample: ``t`` then ``<device>.<field>`` for every device and field seen."""
    samples = report.get("samples") or []
    columns: dict[tuple[str, str], None] = {}
    for sample in samples:
        for device, values in sample.get("d", {}).items():
            for field in SAMPLE_FIELDS:
                if field in values:
                    columns.setdefault((device, field), None)
    keys = list(columns)
    rows: list[list[Any]] = [["t", *(f"{d}.{f}" for d, f in keys)]]
    for sample in samples:
        d = sample.get("d", {})
        rows.append([sample.get("t"), *(d.get(dev, {}).get(f) for dev, f in keys)])
    return _write(rows)

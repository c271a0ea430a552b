"""The data the HTML report's plotly charts draw, downsampled and with user strings escaped.

Samples become one min/max-downsampled line per (device, field) (``downsample.minmax``: every
peak kept); times are seconds after ``t0``. Labels that plotly renders (cell code, layer paths)
are HTML-escaped here, because plotly reads a small HTML subset in its text.
"""

from __future__ import annotations

import html
import operator
from collections.abc import Iterable, Mapping
from typing import Any

from .downsample import minmax
from .summary import breakdown_parts, cell_label, main_device, top_layers

#: Buckets per line: at most ~2 points per bucket, enough for a full-width chart.
BUCKETS = 1500
#: Cells drawn as bands and bars (the ones with the largest peaks when there are more).
MAX_CELLS = 1000
LINE_FIELDS = ("used", "reserved")
MAX_LAYERS = 40


#: Units a byte axis can be drawn in (binary, as fmt_bytes).
AXIS_UNITS = (("B", 1), ("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30), ("TiB", 1 << 40))


def axis_unit(values: Iterable[float]) -> dict[str, Any]:
    """The unit a byte axis reads in, chosen from the data's range: the largest unit the
    biggest magnitude reaches one of, so ticks read "1.5 GiB" or "512 MiB", never "15k MiB".
    ``{"unit": "GiB", "div": 2**30}``: the chart divides the bytes by ``div``."""
    top = max((abs(v) for v in values), default=0)
    name, div = next(((n, d) for n, d in reversed(AXIS_UNITS) if top >= d), AXIS_UNITS[0])
    return {"unit": name, "div": div}


def plot_text(value: object) -> str:
    """Text for a plotly label: ``& < >`` as entities, so it shows as typed, never as markup."""
    return html.escape(str(value), quote=False)


def _device_ids(report: Mapping[str, Any], samples: list[Mapping[str, Any]]) -> list[str]:
    """The report's devices, then any other seen in the samples (every 100th and the last)."""
    ids: dict[str, None] = {d["id"]: None for d in report.get("devices") or [] if "id" in d}
    for sample in [*samples[::100], *samples[-1:]]:
        for device in sample["d"]:
            if device not in ids:
                ids[device] = None
    return list(ids)


def _column(times: list[float], readings: list[Any], key: str) -> tuple[list[float], list[Any]]:
    """``(times, reading[key])`` for the readings that have ``key``; C-speed when all do."""
    try:
        return times, list(map(operator.itemgetter(key), readings))
    except (KeyError, TypeError):
        pairs = [(t, r[key]) for t, r in zip(times, readings) if r is not None and key in r]
        return [t for t, _ in pairs], [v for _, v in pairs]


def lines(samples: list[Mapping[str, Any]], t0: float, devices: list[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    all_times = list(map(operator.itemgetter("t"), samples))
    by_device = list(map(operator.itemgetter("d"), samples))
    for device in devices:
        times, readings = _column(all_times, by_device, device)
        for field in LINE_FIELDS:
            t, v = _column(times, readings, field)
            if not v:
                continue
            count = len(v)
            t, v = minmax(t, v, BUCKETS)
            out.append(
                {
                    "device": device,
                    "field": field,
                    "t": [round(x - t0, 3) for x in t],
                    "v": v,
                    "n": count,
                }
            )
    return out


def cells(report: Mapping[str, Any], t0: float) -> tuple[list[dict[str, Any]], int]:
    """Cells for bands and bars (capped at MAX_CELLS by peak), and how many were left out."""
    all_cells = list(report.get("cells") or [])
    chosen = list(range(len(all_cells)))
    if len(chosen) > MAX_CELLS:
        mains = [main_device(c) for c in all_cells]
        peak = [m.peak if m is not None else 0 for m in mains]
        chosen = sorted(sorted(chosen, key=lambda i: -peak[i])[:MAX_CELLS])
    out = []
    for i in chosen:
        cell = all_cells[i]
        start = float(cell.get("start_time", t0)) - t0
        out.append(
            {
                "label": cell_label(cell),
                "start": round(start, 3),
                "end": round(start + float(cell.get("duration", 0.0)), 3),
                "head": plot_text(cell.get("code_head", "")),
                "ok": bool(cell.get("ok", True)),
                "dev": {
                    device: [int(d["delta_bytes"]), int(d["peak_delta_bytes"])]
                    for device, d in (cell.get("devices") or {}).items()
                },
            }
        )
    return out, len(all_cells) - len(chosen)


def chart_data(report: Mapping[str, Any]) -> dict[str, Any]:
    samples = list(report.get("samples") or [])
    starts = [c.get("start_time") for c in report.get("cells") or []]
    firsts = [x for x in (samples[0]["t"] if samples else None, *starts[:1]) if x is not None]
    t0 = float(min(firsts)) if firsts else float(report.get("created") or 0.0)
    devices = _device_ids(report, samples)
    bands, left_out = cells(report, t0)
    drawn_lines = lines(samples, t0, devices)
    layers: list[dict[str, Any]] = [
        {
            "path": plot_text(x.get("path") or "(model)"),
            "type": plot_text(x.get("type", "")),
            "saved": int(x.get("saved_bytes", 0)),
            "peak": int(x.get("peak_saved_bytes", 0)),
        }
        for x in top_layers(report, MAX_LAYERS)
    ]
    breakdown = {
        plot_text(device): breakdown_parts(device, b)
        for device, b in (report.get("breakdown") or {}).items()
    }
    return {
        "t0": t0,
        "devices": devices,
        "lines": drawn_lines,
        "cells": bands,
        "cellsLeftOut": left_out,
        "layers": layers,
        "breakdown": breakdown,
        "axes": {
            "timeline": axis_unit(v for line in drawn_lines for v in line["v"]),
            "cells": axis_unit(v for c in bands for pair in c["dev"].values() for v in pair),
            "layers": axis_unit(v for x in layers for v in (x["saved"], x["peak"])),
            "breakdown": axis_unit(sum(parts.values()) for parts in breakdown.values()),
        },
    }

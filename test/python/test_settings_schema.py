"""The front end's settings (schema/plugin.json) and the kernel's agree (issue 21): every kernel
setting the schema offers has the kernel's default and only values the kernel accepts, and the
CPU peak setting, sent as the front end sends it (``set_settings`` on the control comm of a real
kernel), decides whether the next cell's CPU peak is exact or sampled."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vramscope.devices import CpuDevice
from vramscope.protocol import ProtocolError
from vramscope.settings import (
    MAX_HISTORY_LIMIT,
    MAX_INSIGHT_BUDGET_MS,
    MAX_SAMPLE_HZ,
    apply_settings,
    default_settings,
)

SCHEMA = json.loads((Path(__file__).parents[2] / "schema" / "plugin.json").read_text())
#: schema property -> kernel setting (src/model/settings.ts kernelSettings)
KERNEL_KEYS = {
    "sampleHz": "sample_hz",
    "cudaPeakPolicy": "cuda_peak_policy",
    "cpuPeak": "cpu_peak",
    "insight": "insight",
    "insightBudgetMs": "insight_budget_ms",
}
MIB = 1 << 20


def test_schema_defaults_and_choices_are_the_kernels() -> None:
    props = SCHEMA["properties"]
    defaults = default_settings()
    for prop, key in KERNEL_KEYS.items():
        assert props[prop]["default"] == defaults[key], prop  # type: ignore[literal-required]
        for value in props[prop].get("enum", []):
            assert apply_settings(defaults, {key: value})[key] == value  # type: ignore[literal-required]
    assert props["cpuPeak"]["enum"] == ["sampled", "exact"]
    with pytest.raises(ProtocolError):
        apply_settings(defaults, {"cpu_peak": "fast"})


def test_every_number_setting_has_an_upper_bound_the_schema_keeps_within() -> None:
    """The kernel refuses what the panel could never send, and takes the panel's maximum."""
    props, defaults = SCHEMA["properties"], default_settings()
    for prop, key, top in (
        ("sampleHz", "sample_hz", MAX_SAMPLE_HZ),
        ("insightBudgetMs", "insight_budget_ms", MAX_INSIGHT_BUDGET_MS),
    ):
        assert props[prop]["maximum"] == top, prop
        assert apply_settings(defaults, {key: props[prop]["maximum"]})[key] == top  # type: ignore[literal-required]
        for bad in (top * 1.5, 1e300, float("inf")):
            with pytest.raises(ProtocolError, match=key):
                apply_settings(defaults, {key: bad})
    with pytest.raises(ProtocolError, match="history_limit"):
        apply_settings(defaults, {"history_limit": MAX_HISTORY_LIMIT + 1})


@pytest.mark.skipif(CpuDevice().source != "mallinfo2", reason="exact peaks need glibc mallinfo2")
def test_cpu_peak_setting_decides_the_next_cells_peak(
    fresh_stream_kernel: tuple[object, str],
) -> None:
    k, stream = fresh_stream_kernel
    control = k.comm_open("control")  # type: ignore[attr-defined]
    k.run_ok("import torch", "schema-import")  # type: ignore[attr-defined]
    k.comm_data(stream, "cell")  # type: ignore[attr-defined]
    sources = {}
    for mode in ("exact", "sampled"):
        reply = k.request(control, "set_settings", {"cpu_peak": mode})  # type: ignore[attr-defined]
        assert reply["type"] == "reply" and reply["result"]["settings"]["cpu_peak"] == mode, reply
        # the old y lives until the new one is made: a 16 MiB rise that a sampler misses
        k.run_ok("y = torch.ones(4 * 1024 * 1024)\ny = torch.ones(4 * 1024 * 1024)", mode)  # type: ignore[attr-defined]
        cpu = k.comm_data(stream, "cell")["record"]["devices"]["cpu"]  # type: ignore[attr-defined]
        sources[mode] = cpu["peak_source"]
        if mode == "exact":
            assert abs(cpu["peak_delta_bytes"] - 32 * MIB) <= 64 * 1024, cpu
    assert sources == {"exact": "exact", "sampled": "sampled"}

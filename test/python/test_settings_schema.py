"""The front end's settings (schema/plugin.json) and the kernel's agree (issue 21): every kernel
setting the schema offers has the kernel's default and only values the kernel accepts, and the
CPU peak setting, sent as the front end sends it (``set_settings`` on the control comm of a real
kernel), decides whether the next cell's CPU peak is exact or sampled."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernel_harness import BOOTSTRAP, KernelHarness
from vramscope.devices.cpu import load_mallinfo2
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


@pytest.mark.skipif(load_mallinfo2() is None, reason="exact peaks need glibc mallinfo2")
@pytest.mark.parametrize("counter", ["off", "on"])
def test_cpu_peak_setting_decides_the_next_cells_peak(counter: str) -> None:
    """Without the heap counter the setting arms the op-by-op count; with it every cell's
    peak is counted, whatever the setting."""
    k = KernelHarness(env={"VRAMSCOPE_HEAP_COUNTER": "0" if counter == "off" else "1"})
    try:
        assert k.execute(BOOTSTRAP, silent=True)["content"]["status"] == "ok"
        stream = k.comm_open("stream")
        k.comm_data(stream, "hello")
        counted = k.eval(RUNTIME_CPU_SOURCE) == "malloc-counter"
        if counter == "on" and not counted:
            pytest.skip("the heap counter cannot run here")
        assert counted == (counter == "on")
        sources = _peak_sources(k, stream)
    finally:
        k.close()
    assert sources == {"exact": "exact", "sampled": "exact" if counted else "sampled"}


RUNTIME_CPU_SOURCE = "__import__('vramscope.runtime', fromlist=['x']).get_runtime().cpu.source"


def _peak_sources(k: KernelHarness, stream: str) -> dict[str, str]:
    control = k.comm_open("control")
    k.run_ok("import torch", "schema-import")
    k.comm_data(stream, "cell")
    sources = {}
    for i, mode in enumerate(("exact", "sampled")):
        reply = k.request(control, "set_settings", {"cpu_peak": mode})
        assert reply["type"] == "reply" and reply["result"]["settings"]["cpu_peak"] == mode, reply
        # the old y lives until the new one is made: a 16 MiB rise that a sampler misses
        k.run_ok("y = torch.ones(4 * 1024 * 1024)\ny = torch.ones(4 * 1024 * 1024)", mode)
        cpu = k.comm_data(stream, "cell")["record"]["devices"]["cpu"]
        sources[mode] = cpu["peak_source"]
        if cpu["peak_source"] == "exact":  # at the second, the first cell's y is there
            assert abs(cpu["peak_delta_bytes"] - (16 if i else 32) * MIB) <= 64 * 1024, cpu
    return sources

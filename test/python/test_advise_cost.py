"""The bf16 autocast cost on CPU follows the processor's bf16 support (read from its flags):
without native bf16 (AVX512-BF16 / AMX) autocast is slower, and the advice says so."""

from __future__ import annotations

from pathlib import Path

from vramscope.optimize.techniques.autocast import COST, cpu_bf16, cpu_cost

AVX2 = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma avx512f\nbugs\t\t: none\n"


def test_flags_decide(tmp_path: Path) -> None:
    plain, amx, arm = tmp_path / "plain", tmp_path / "amx", tmp_path / "arm"
    plain.write_text(AVX2)
    amx.write_text(AVX2.replace("avx512f", "avx512f amx_bf16 amx_tile"))
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd bf16\n")
    assert cpu_bf16(str(plain)) is False
    assert cpu_bf16(str(amx)) is True
    assert cpu_bf16(str(arm)) is None  # no x86 flags line: not known
    assert cpu_bf16(str(tmp_path / "missing")) is None


def test_cost_words() -> None:
    assert cpu_cost(True) == COST
    assert cpu_cost(False)[0].startswith("slower on this CPU")
    assert "depends on the CPU" in cpu_cost(None)[0]

"""The runtime baseline's logic (vramscope.torch_baseline), on CPU: what each device's
breakdown gets, clamped to the room its part has, and why it is not measured. The import
measurement itself runs in real kernels (test_kernel_runtime_baseline.py); the CUDA context
on a GPU (test_cuda_runtime_baseline.py)."""

from __future__ import annotations

import sys

import pytest

from vramscope.torch_baseline import (
    NOT_MEASURED_CPU,
    NOT_MEASURED_CUDA,
    NOT_MEASURED_THREAD,
    RuntimeBaseline,
)

MIB = 2**20


def _reader(values: list[int]):  # type: ignore[no-untyped-def]
    return lambda: values.pop(0)


def test_nothing_until_vramscope_is_installed() -> None:
    assert RuntimeBaseline().part("cpu", 100 * MIB) == {}
    assert RuntimeBaseline().part("mps", 100 * MIB) == {}


def test_torch_imported_first_is_said_not_guessed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", sys.modules.get("torch") or object())
    b = RuntimeBaseline()
    b.start(_reader([1]))
    assert b.part("cpu", 100 * MIB) == {"runtime_note": NOT_MEASURED_CPU}


def test_the_import_cost_clamped_to_the_room_of_other() -> None:
    b = RuntimeBaseline()
    b._read = _reader([10 * MIB, 90 * MIB])
    b._mark_before()
    b._mark_after()
    assert b.cpu_bytes == 80 * MIB
    assert b.part("cpu", 100 * MIB) == {"runtime_bytes": 80 * MIB}
    # what is left of "other" after the namespace's tensors is the most it can be
    assert b.part("cpu", 30 * MIB) == {"runtime_bytes": 30 * MIB}
    assert b.part("cpu", -5) == {"runtime_bytes": 0}


def test_an_import_not_seen_completing_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", sys.modules.get("torch") or object())
    b = RuntimeBaseline()
    b._read = _reader([])  # installed, armed, and torch came in on another thread
    assert b.part("cpu", MIB) == {"runtime_note": NOT_MEASURED_THREAD}


def test_cuda_context_from_the_first_reading_that_has_one() -> None:
    b = RuntimeBaseline()
    b.observe_cuda({"cpu": {"used": 5}, "cuda:0": {"used": 0, "reserved": 0}})
    assert b.part("cuda:0", MIB) == {}  # no context yet: device_used absent
    b.observe_cuda({"cuda:0": {"used": 2 * MIB, "reserved": 20 * MIB, "device_used": 520 * MIB}})
    assert b.cuda_bytes == {"cuda:0": 500 * MIB}
    # later readings do not move it (the context was measured at the first one)
    b.observe_cuda({"cuda:0": {"used": 0, "reserved": 0, "device_used": 900 * MIB}})
    assert b.part("cuda:0", 600 * MIB) == {"runtime_bytes": 500 * MIB}
    assert b.part("cuda:0", 300 * MIB) == {"runtime_bytes": 300 * MIB}
    assert b.part("cuda:1", 300 * MIB) == {}


def test_cuda_initialised_before_vramscope_is_said() -> None:
    b = RuntimeBaseline()
    b.cuda_note = NOT_MEASURED_CUDA
    b.observe_cuda({"cuda:0": {"used": 0, "reserved": 0, "device_used": 900 * MIB}})
    assert b.part("cuda:0", MIB) == {"runtime_note": NOT_MEASURED_CUDA}


def test_a_malformed_reading_never_raises() -> None:
    b = RuntimeBaseline()
    b.observe_cuda({"cuda:0": None})  # type: ignore[dict-item]
    assert b.cuda_bytes == {}

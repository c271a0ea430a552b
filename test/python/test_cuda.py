"""On a real GPU: ``pytest -m cuda test/python/test_cuda.py``.

Needs torch with CUDA only (no IPython, comm or jupyter): the device, recorder and sampler
classes are driven directly, and a fresh interpreter checks that nothing initialises CUDA.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

pytestmark = pytest.mark.cuda
torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

SRC = str(Path(__file__).resolve().parents[2] / "python_bridge")
if SRC not in sys.path:
    sys.path.insert(0, SRC)

from vramscope.devices import CudaDevice, TorchCudaBackend  # noqa: E402
from vramscope.runtime import Runtime  # noqa: E402

MIB = 1 << 20


@pytest.fixture
def dev() -> CudaDevice:
    torch.cuda.init()
    torch.empty(1, device="cuda:0")  # context exists, allocator warm
    torch.cuda.synchronize()
    return CudaDevice(0, TorchCudaBackend(torch))


def test_64_mib_delta_exact(dev: CudaDevice) -> None:
    mark = dev.begin_cell("reset")
    x = torch.empty(16 * 1024 * 1024, device="cuda:0")
    delta, _ = dev.end_cell(mark, None)
    assert delta["delta_bytes"] == 64 * MIB
    assert delta["peak_delta_bytes"] >= 64 * MIB
    del x


def test_alloc_free_peak_with_reset(dev: CudaDevice) -> None:
    mark = dev.begin_cell("reset")
    y = torch.empty(32 * 1024 * 1024, device="cuda:0")
    del y
    delta, _ = dev.end_cell(mark, None)
    assert delta["delta_bytes"] == 0
    assert delta["peak_delta_bytes"] >= 128 * MIB


def test_preserve_keeps_user_peak(dev: CudaDevice) -> None:
    big = torch.empty(64 * 1024 * 1024, device="cuda:0")  # 256 MiB: the user's peak
    del big
    user_peak = torch.cuda.max_memory_allocated(0)
    mark = dev.begin_cell("preserve")
    small = torch.empty(1024 * 1024, device="cuda:0")
    dev.end_cell(mark, None)
    assert torch.cuda.max_memory_allocated(0) == user_peak
    del small
    mark = dev.begin_cell("reset")
    dev.end_cell(mark, None)
    assert torch.cuda.max_memory_allocated(0) < user_peak  # documented: reset is global


def test_device_wide_values_in_samples(dev: CudaDevice) -> None:
    rt = Runtime()
    rt._refresh_devices()
    sample = rt.read_all()["d"]["cuda:0"]
    free, total = torch.cuda.mem_get_info(0)
    assert sample["device_total"] == total
    assert abs(sample["device_used"] - (total - free)) < 256 * MIB
    assert sample["used"] == torch.cuda.memory_allocated(0)
    info = rt.device_infos()[1]
    assert info["initialized"] is True and info["total_bytes"] == total


def test_recorder_records_cuda_cell(dev: CudaDevice) -> None:
    rt = Runtime()
    rt._refresh_devices()
    rt.recorder.pre_run_cell(SimpleNamespace(cell_id="gpu", raw_cell="z = ..."))
    z = torch.empty(16 * 1024 * 1024, device="cuda:0")
    rt.recorder.post_run_cell(
        SimpleNamespace(success=True, error_in_exec=None, error_before_exec=None, execution_count=1)
    )
    record = rt.recorder.history()[-1]
    assert record["devices"]["cuda:0"]["delta_bytes"] == 64 * MIB
    del z


def test_sampler_never_initialises_cuda() -> None:
    script = textwrap.dedent(
        """
        import time, torch
        from types import SimpleNamespace
        from vramscope.runtime import Runtime

        class Events:
            def register(self, *a): pass
            def unregister(self, *a): pass

        rt = Runtime()
        rt.install(SimpleNamespace(events=Events(), user_ns={}))
        rt.update_settings({"sample_hz": 50})
        rt.recorder.pre_run_cell(SimpleNamespace(cell_id="c", raw_cell="pass"))
        time.sleep(0.5)
        rt.recorder.post_run_cell(SimpleNamespace(success=True, error_in_exec=None,
                                                  error_before_exec=None, execution_count=1))
        rt.hello(); rt.report()
        devs = [d.id for d in rt.devices]
        assert "cuda:0" in devs, devs
        assert rt.sampler.ticks > 5, rt.sampler.ticks
        has_ctx = getattr(torch._C, "_cuda_hasPrimaryContext", lambda i: False)(0)
        print("initialized", torch.cuda.is_initialized(), "context", bool(has_ctx))
        rt.shutdown()
        """
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env
    )
    assert out.returncode == 0, out.stderr
    assert "initialized False context False" in out.stdout, out.stdout


def test_sample_reads_are_cheap(dev: CudaDevice) -> None:
    start = time.perf_counter()
    for _ in range(100):
        dev.read()
    per_read_us = (time.perf_counter() - start) / 100 * 1e6
    print(f"cuda read: {per_read_us:.1f} us")  # informational, no timed assert

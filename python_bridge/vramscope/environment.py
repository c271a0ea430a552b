"""Facts about the kernel process for ``hello`` and the report; never imports torch."""

from __future__ import annotations

import importlib.util
import os
import platform
import sys
from importlib import metadata

from .devices import CpuDevice, Device, heapcount
from .messages.records import KernelInfo


def torch_blocked() -> bool:
    """``sys.modules['torch'] = None``: every ``import torch`` in this process fails."""
    return "torch" in sys.modules and sys.modules["torch"] is None


def torch_installed() -> bool:
    if "torch" in sys.modules:
        return not torch_blocked()
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):  # a finder that refuses torch, a broken install
        return False


def torch_version() -> str | None:
    torch = sys.modules.get("torch")
    if torch is not None:
        return str(getattr(torch, "__version__", "")) or None
    if not torch_installed():
        return None
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def kernel_info() -> KernelInfo:
    torch = sys.modules.get("torch")
    cuda = mps = False
    if torch is not None:
        try:
            cuda = bool(torch.backends.cuda.is_built()) and int(torch.cuda.device_count()) > 0
        except Exception:
            cuda = False
        try:
            mps = bool(torch.backends.mps.is_available())
        except Exception:
            mps = False
    return {
        "pid": os.getpid(),
        "python": platform.python_version(),
        "torch_version": torch_version(),
        "cuda_available": cuda,
        "mps_available": mps,
    }


def warnings_for(devices: list[Device]) -> list[str]:
    notes: list[str] = []
    if not torch_installed():
        notes.append("torch is not installed in this kernel: only CPU memory is measured")
    elif "torch" not in sys.modules:
        notes.append("torch is not imported yet: CUDA/MPS devices appear once it is")
    for device in devices:
        if isinstance(device, CpuDevice):
            if device.allocator_note:
                notes.append(
                    f"{device.allocator_note} is the process allocator: CPU memory is measured "
                    "as RSS (glibc mallinfo2 would be meaningless)"
                )
            elif device.source == "rss":
                notes.append("glibc mallinfo2 is unavailable: CPU memory is measured as RSS")
            elif device.source == "mallinfo2" and heapcount.unavailable():
                notes.append(
                    f"the CPU heap counter is not running ({heapcount.unavailable()}): CPU "
                    "memory is read with glibc mallinfo2 (slow on a large model's heap) and "
                    "per-cell CPU peaks are sampled"
                )
            if not device.peak_resettable:
                notes.append("VmHWM cannot be reset here: per-cell CPU peaks come from the sampler")
    return notes

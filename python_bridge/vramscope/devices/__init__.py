"""Measured devices: the CPU always, CUDA indices and MPS once torch is imported."""

from __future__ import annotations

import sys
from typing import Any

from .base import CellMark, Device, PeakPolicy, make_delta
from .cpu import CpuDevice
from .cuda import CudaBackend, CudaDevice, CudaStats, TorchCudaBackend
from .mps import MpsDevice

__all__ = [
    "CellMark",
    "CpuDevice",
    "CudaBackend",
    "CudaDevice",
    "CudaStats",
    "Device",
    "MpsDevice",
    "PeakPolicy",
    "TorchCudaBackend",
    "accelerator_devices",
    "make_delta",
]


def accelerator_devices(torch_module: Any | None = None) -> list[Device]:
    """CUDA/MPS devices of an already imported torch; never imports torch, never inits CUDA.

    ``torch.cuda.device_count()`` asks NVML first and does not create a context.
    """
    torch = torch_module if torch_module is not None else sys.modules.get("torch")
    if torch is None:
        return []
    found: list[Device] = []
    try:
        count = int(torch.cuda.device_count()) if torch.backends.cuda.is_built() else 0
    except Exception:
        count = 0
    if count:
        backend = TorchCudaBackend(torch)
        found.extend(CudaDevice(index, backend) for index in range(count))
    try:
        if torch.backends.mps.is_available():
            found.append(MpsDevice(torch))
    except Exception:
        pass
    return found

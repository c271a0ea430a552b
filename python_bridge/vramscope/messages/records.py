"""Protocol shapes of what the kernel records (docs/protocol.md, "Common types"): a device, a
cell's record and its per-device delta, a timeline sample, the settings, the kernel.

``protocol.py`` builds its messages from these; the devices, the recorder and the reports
import them from here. Mirrors the common types of ``src/protocol.ts``. No torch here.
"""

from __future__ import annotations

from typing import Literal, TypedDict


class DeviceInfo(TypedDict):
    id: str
    kind: Literal["cpu", "cuda", "mps"]
    name: str
    total_bytes: int | None
    used_bytes: int
    reserved_bytes: int | None
    initialized: bool
    source: str


class _DeviceDeltaFields(TypedDict):
    before_bytes: int
    after_bytes: int
    delta_bytes: int
    peak_delta_bytes: int


class DeviceDelta(_DeviceDeltaFields, total=False):
    #: since 1.1, optional: how the peak was measured (CPU): "exact" (an op-by-op count
    #: armed for the whole cell) or "sampled" (VmHWM, the sampler's readings, the delta)
    peak_source: Literal["exact", "sampled"]


class _CellRecordRequired(TypedDict):
    cell_id: str | None
    execution_count: int | None
    start_time: float
    duration: float
    ok: bool
    error_type: str | None
    oom: bool
    code_head: str
    devices: dict[str, DeviceDelta]


class ProcessPeak(TypedDict):
    """A child process's peaks during one cell (since 1.1)."""

    role: str
    peak_rss: int
    peak_uss: int
    peak_device: dict[str, int]


class CellRecord(_CellRecordRequired, total=False):
    """``processes`` (since 1.1, optional): by process key, the peaks of the child processes
    and ranks that reported during the cell."""

    processes: dict[str, ProcessPeak]


class _DeviceSampleRequired(TypedDict):
    used: int


class DeviceSample(_DeviceSampleRequired, total=False):
    reserved: int
    peak: int
    device_used: int
    device_total: int


class _SampleRequired(TypedDict):
    t: float
    d: dict[str, DeviceSample]


class Sample(_SampleRequired, total=False):
    """``unread`` (since 1.1, optional): the devices not read at this tick (the CPU on a
    fragmented heap, whose readings the sampler spaces out); their lines go on."""

    unread: list[str]


class _SettingsFields(TypedDict):
    sample_hz: float
    cuda_peak_policy: Literal["reset", "preserve"]
    insight: bool
    insight_budget_ms: float
    history_limit: int


class Settings(_SettingsFields, total=False):
    #: since 1.1, optional: "exact" arms an op-by-op count of torch's CPU storages for every
    #: cell (devices/exact.py; ``vramscope profile`` turns it on), "sampled" (default) does not
    cpu_peak: Literal["sampled", "exact"]


class KernelInfo(TypedDict):
    pid: int
    python: str
    torch_version: str | None
    cuda_available: bool
    mps_available: bool


#: The longest ``error_type`` a cell record (and so a cell's metadata) carries.
MAX_ERROR_TYPE_CHARS = 200


def error_type_of(exc: BaseException | None) -> str | None:
    """A failed cell's exception class name, cut to ``MAX_ERROR_TYPE_CHARS`` with ``…``."""
    if exc is None:
        return None
    name = type(exc).__name__
    if len(name) <= MAX_ERROR_TYPE_CHARS:
        return name
    return name[: MAX_ERROR_TYPE_CHARS - 1] + "…"

"""What a process learns about itself, and the kernel about its children, from /proc and the
memory cgroup. Cheap reads through descriptors opened once; nothing here raises."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
from typing import NamedTuple

PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_PR_SET_NAME = 15


class SelfReader:
    """RSS (statm), VmHWM (status) and USS/PSS (smaps_rollup) of the calling process."""

    def __init__(self) -> None:
        self._statm = _open("/proc/self/statm")
        self._status = _open("/proc/self/status")
        self._rollup = _open("/proc/self/smaps_rollup")

    def rss(self) -> int:
        try:
            return int(os.pread(self._statm, 128, 0).split()[1]) * PAGE  # type: ignore[arg-type]
        except (OSError, TypeError, IndexError, ValueError):
            return 0

    def hwm(self) -> int | None:
        try:
            status = os.pread(self._status, 8192, 0)  # type: ignore[arg-type]
            start = status.index(b"VmHWM:") + 6
            return int(status[start : status.index(b"\n", start)].split()[0]) * 1024
        except (OSError, TypeError, IndexError, ValueError):
            return None

    def uss_pss(self) -> tuple[int | None, int | None]:
        """(USS, PSS) in bytes; costs ~1-3 ms for a few hundred MiB (the kernel walks pages)."""
        try:
            text = os.pread(self._rollup, 8192, 0)  # type: ignore[arg-type]
        except (OSError, TypeError):
            return None, None
        fields: dict[bytes, int] = {}
        for line in text.splitlines():
            name, _, rest = line.partition(b":")
            if name in (b"Pss", b"Private_Clean", b"Private_Dirty"):
                with contextlib.suppress(ValueError, IndexError):
                    fields[name] = int(rest.split()[0]) * 1024
        if b"Private_Clean" not in fields or b"Private_Dirty" not in fields:
            return None, fields.get(b"Pss")
        return fields[b"Private_Clean"] + fields[b"Private_Dirty"], fields.get(b"Pss")

    def close(self) -> None:
        for fd in (self._statm, self._status, self._rollup):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._statm = self._status = self._rollup = None


class ExitReason(NamedTuple):
    text: str  # "exit code 0", "killed by SIGKILL", "killed by the OOM killer (SIGKILL)"
    exit_code: int | None
    signal: int | None
    oom: bool


def exit_reason(exit_code: int | None, sig: int | None, oom: bool = False) -> ExitReason:
    if sig is not None:
        name = _signal_name(sig)
        if oom and sig == signal.SIGKILL:
            return ExitReason(f"killed by the OOM killer ({name})", None, sig, True)
        return ExitReason(f"killed by {name}", None, sig, False)
    if exit_code is not None:
        return ExitReason(f"exit code {exit_code}", exit_code, None, False)
    return ExitReason("ended", None, None, False)


def child_status(pidfd: int) -> tuple[int | None, int | None] | None:
    """(exit code, signal) of an exited CHILD through its pidfd, leaving it unreaped
    (``WNOWAIT``: multiprocessing still collects it); None when unknown (already reaped,
    not our child)."""
    try:
        result = os.waitid(os.P_PIDFD, pidfd, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except (OSError, AttributeError):
        return None
    if result is None:
        return None
    if result.si_code == os.CLD_EXITED:
        return result.si_status, None
    if result.si_code in (os.CLD_KILLED, os.CLD_DUMPED):
        return None, result.si_status
    return None


def oom_kills() -> int | None:
    """The memory cgroup's ``oom_kill`` count (v2 memory.events or v1 memory.oom_control)."""
    for path in _oom_files():
        try:
            with open(path, encoding="ascii", errors="replace") as fh:
                for line in fh:
                    if line.startswith("oom_kill "):
                        return int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return None


def is_alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        return stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3] != b"Z"
    except (OSError, ValueError):
        return False


def name_this_thread(name: str) -> None:
    """Set the OS name of the calling thread (``/proc/<pid>/task/<tid>/comm``), best effort."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None)
        libc.prctl(_PR_SET_NAME, name.encode("ascii")[:15], 0, 0, 0)


def _oom_files() -> list[str]:
    paths: list[str] = []
    try:
        with open("/proc/self/cgroup", encoding="ascii", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        lines = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            paths.append(f"/sys/fs/cgroup{path.rstrip('/')}/memory.events")
        elif "memory" in controllers.split(","):
            paths.append(f"/sys/fs/cgroup/memory{path.rstrip('/')}/memory.oom_control")
    paths += ["/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"]
    return paths


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _open(path: str) -> int | None:
    try:
        return os.open(path, os.O_RDONLY)
    except OSError:
        return None

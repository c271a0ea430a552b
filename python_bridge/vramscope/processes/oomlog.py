"""Evidence of the kernel's OOM killer in the kernel log, matched by pid.

The kernel writes, when its OOM killer (global or a memory cgroup's) kills a process::

    Out of memory: Killed process 4242 (python) total-vm:..., anon-rss:..., UID:1000 ...
    Memory cgroup out of memory: Killed process 4242 (python) total-vm:...
    oom-kill:constraint=CONSTRAINT_MEMCG,...,task=python,pid=4242,uid=1000
    oom_reaper: reaped process 4242 (python), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB

Read from ``/dev/kmsg`` (records ``prio,seq,usec,flags;text``; readable without root where
``kernel.dmesg_restrict`` is 0, or with CAP_SYSLOG), else from ``dmesg`` (``[secs] text``). A
record older than the process is ignored (pids are reused): the log's times are seconds since
boot on the clock of ``time.monotonic()`` (both leave out suspended time). Where neither is
readable there is no evidence either way, and the memory cgroup's ``oom_kill`` counter is all
there is.

Limits: the log's pids are those of the initial pid namespace, so inside a container with its
own pid namespace a child's pid does not match the log's (no false match either: only a kill of
that very number newer than the child counts).

Nothing here raises.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess

#: The three kinds of lines naming the killed pid (see the module's docstring).
_PATTERNS = (
    re.compile(rb"\bKilled process (\d+) \("),
    re.compile(rb"\boom-kill:.*?[,:]pid=(\d+)\b"),  # task= names may hold spaces
    re.compile(rb"\boom_reaper: reaped process (\d+) \("),
)
_DMESG = re.compile(rb"^\[\s*(\d+(?:\.\d+)?)\]\s?(.*)$")
#: At most this many records are read per call (the ring buffer holds a few thousand).
MAX_RECORDS = 100_000


def killed_pid(text: bytes) -> int | None:
    """The pid an OOM-killer log line names, or None for any other line."""
    for pattern in _PATTERNS:
        match = pattern.search(text)
        if match:
            return int(match.group(1))
    return None


def parse_kmsg(record: bytes) -> tuple[float | None, bytes]:
    """(seconds since boot, text) of one ``/dev/kmsg`` record (``prio,seq,usec,flags;text``)."""
    head, sep, text = record.partition(b";")
    if not sep:
        return None, record.rstrip(b"\n")
    fields = head.split(b",")
    try:
        seconds: float | None = int(fields[2]) / 1e6
    except (IndexError, ValueError):
        seconds = None
    return seconds, text.split(b"\n", 1)[0]  # continuation lines (" KEY=value") dropped


def parse_dmesg(line: bytes) -> tuple[float | None, bytes]:
    """(seconds since boot, text) of one ``dmesg`` line (``[ 899.298213] text``)."""
    match = _DMESG.match(line.rstrip(b"\n"))
    if match is None:
        return None, line.rstrip(b"\n")
    return float(match.group(1)), match.group(2)


class OomLog:
    """The OOM kills the kernel log names: pid -> time of the newest one (seconds since boot,
    or -1 when the line had no time). ``/dev/kmsg`` is kept open and read incrementally; the
    ``dmesg`` fallback reads the whole log at each call (it is asked only when a child died of
    SIGKILL)."""

    def __init__(self, kmsg: str = "/dev/kmsg", dmesg: tuple[str, ...] = ("dmesg",)) -> None:
        self._kmsg_path = kmsg
        self._dmesg = dmesg
        self._fd: int | None = None
        self._kmsg_ok = True
        self._dmesg_ok = bool(dmesg)
        self.kills: dict[int, float] = {}

    @property
    def readable(self) -> bool:
        """Whether some kernel log could be read (after a ``refresh``)."""
        return self._fd is not None or self._dmesg_ok

    def evidence(self, pid: int, since: float | None = None) -> bool:
        """Whether the log names ``pid`` as killed by the OOM killer at or after ``since``
        (``time.monotonic()`` seconds, e.g. when the process was first seen; None: any time)."""
        self.refresh()
        when = self.kills.get(pid)
        if when is None:
            return False
        return since is None or when < 0 or when >= since - 0.01

    def refresh(self) -> None:
        if self._kmsg_ok and self._read_kmsg():
            return
        if self._dmesg_ok:
            self._read_dmesg()

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def _note(self, seconds: float | None, text: bytes) -> None:
        pid = killed_pid(text)
        if pid is not None:
            self.kills[pid] = max(self.kills.get(pid, -1.0), -1.0 if seconds is None else seconds)

    def _read_kmsg(self) -> bool:
        if self._fd is None:
            try:
                self._fd = os.open(self._kmsg_path, os.O_RDONLY | os.O_NONBLOCK)
            except OSError:
                self._kmsg_ok = False
                return False
        for _ in range(MAX_RECORDS):
            try:
                record = os.read(self._fd, 8192)  # one record per read
            except BlockingIOError:
                return True  # read up to now
            except BrokenPipeError:
                continue  # records overwritten while reading: go on with the next one
            except OSError:
                self.close()
                self._kmsg_ok = False
                return False
            if not record:
                return True
            self._note(*parse_kmsg(record))
        return True

    def _read_dmesg(self) -> None:
        try:
            done = subprocess.run(self._dmesg, capture_output=True, timeout=2.0, check=False)
        except (OSError, subprocess.SubprocessError):
            self._dmesg_ok = False
            return
        if done.returncode != 0:
            self._dmesg_ok = False
            return
        for line in done.stdout.splitlines():
            self._note(*parse_dmesg(line))

"""Parts of the warm kernels (test/warm_kernels) that need no zygote running: the launcher's
reading of the zygote's messages (``Lines``: two in one read, one split over reads, EOF), and
``zygote.start`` when the zygote does not serve in time (kernelspecs all the same, cold
kernels, no zygote left)."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import zygote
from launch import SOCKET_ENV, Lines


def test_two_messages_in_one_read_are_both_returned() -> None:
    # a kernel that ends at once: the zygote's pid and exit lines arrive together
    ours, zygote = socket.socketpair()
    with ours, zygote:
        zygote.sendall(b'{"pid": 41}\n{"exit": -9}\n')
        lines = Lines(ours)
        assert lines.next() == {"pid": 41}
        assert lines.buffered()  # the launcher must not wait on the socket for it
        assert lines.next() == {"exit": -9}
        assert not lines.buffered()


def test_a_message_split_over_reads_and_eof() -> None:
    ours, zygote = socket.socketpair()
    with ours:
        lines = Lines(ours)
        zygote.sendall(b'{"pid"')
        zygote.sendall(b": 7}\n")
        assert lines.next() == {"pid": 7}
        zygote.close()
        assert lines.next() is None


def test_a_zygote_not_serving_in_time_leaves_kernelspecs_and_no_process(tmp_path: Path) -> None:
    before = _zygotes(tmp_path)
    env, stop = zygote.start(str(tmp_path), timeout=0.01)  # torch's import takes longer
    try:
        assert SOCKET_ENV not in env  # cold kernels
        assert env["JUPYTER_PATH"].split(os.pathsep)[0] == str(tmp_path)
        for name in ("python3", zygote.COLD_KERNEL):
            spec = json.loads((tmp_path / "kernels" / name / "kernel.json").read_text())
            assert spec["argv"][-2:] == ["-f", "{connection_file}"]
        deadline = time.monotonic() + 5
        while _zygotes(tmp_path) != before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _zygotes(tmp_path) == before  # killed, not left to serve later
    finally:
        stop()


def _zygotes(folder: Path) -> set[int]:
    """The running zygotes serving from ``folder``."""
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(folder).encode() in cmdline and any(b"zygote.py" in a for a in cmdline):
            found.add(int(pid))
    return found

"""The kernel side: receives children's reports (a Unix datagram socket in a private
directory; optionally a UDP port for remote ranks), watches local processes through pidfds
for their exit, and hands the table to ``publish`` at most every ``PUBLISH_EVERY`` seconds.

One daemon thread does everything; it never blocks a child (datagrams: the kernel's socket
queue is the bounded queue, a sender finding it full drops the report and counts it).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import select
import shutil
import signal
import socket
import tempfile
import threading
import time
from typing import Callable

from . import wire
from .oomlog import OomLog
from .procfs import child_status, exit_reason, is_alive, oom_kills
from .table import Proc, ProcessTable

PUBLISH_EVERY = 0.5
#: A remote process (no pidfd to watch) that has not reported for this long has ended.
SILENT_AFTER = 10.0
RECV_BUFFER = 4 * 1024 * 1024
THREAD_NAME = "vramscope-collector"
#: A child ended by SIGKILL is looked up in the kernel log again for this long (the OOM
#: killer's line can land just after the child's exit is seen).
OOM_RECHECK_FOR = 2.0
#: A report whose sender time is further than this from the kernel's clock is refused as
#: stale: a replayed report is only good for this long (besides its sender's ``seq``).
REPLAY_WINDOW = 120.0


class Collector:
    def __init__(
        self, table: ProcessTable, publish: Callable[[], None], oom_log: OomLog | None = None
    ) -> None:
        self.table = table
        self._publish = publish
        self.token = secrets.token_hex(32)
        self._dir: str | None = None
        self._unix: socket.socket | None = None
        self._udp: socket.socket | None = None
        self.udp_address: str | None = None
        self._wake_r, self._wake_w = -1, -1
        # fd -> proc, our child?, the cgroup's OOM kills then, when it was first seen (monotonic)
        self._pidfds: dict[int, tuple[Proc, bool, int | None, float]] = {}
        self._oom_log = oom_log
        self._oom_recheck: dict[str, tuple[Proc, float, float]] = {}  # key -> proc, since, until
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._recv_lock = threading.Lock()

    @property
    def address(self) -> str | None:
        if self._unix is None or self._dir is None:
            return None
        return f"unix:{os.path.join(self._dir, 'collector.sock')}"

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> str:
        """Bind the local socket and start the thread; returns the local address."""
        self._dir = tempfile.mkdtemp(prefix="vramscope-")  # 0700: this user only
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(os.path.join(self._dir, "collector.sock"))
        _tune(sock)
        self._unix = sock
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
        self._thread.start()
        return self.address or ""

    def listen(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Also accept remote ranks on UDP ``host:port`` (opt-in); returns ``udp:HOST:PORT``."""
        if self._udp is not None:
            return self.udp_address or ""
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_DGRAM)
        sock.bind((host, port))
        _tune(sock)
        bound_host, bound_port = sock.getsockname()[:2]
        self._udp = sock
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        self.udp_address = f"udp:{shown}:{bound_port}"
        self._wake()
        return self.udp_address

    def stop(self) -> None:
        self._stop.set()
        self._wake()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(2.0)
        with self._recv_lock:
            for sock in (self._unix, self._udp):
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.close()
            self._unix = self._udp = None
            self.udp_address = None
            for fd in (*self._pidfds, self._wake_r, self._wake_w):
                if fd >= 0:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            self._pidfds.clear()
            self._wake_r = self._wake_w = -1
            if self._oom_log is not None:
                self._oom_log.close()
            self._oom_recheck.clear()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def drain(self) -> None:
        """Take in every queued report now (e.g. the final reports of ranks that just ended,
        before their cell's record is closed)."""
        for sock, remote in ((self._unix, False), (self._udp, True)):
            if sock is not None:
                self._receive(sock, remote)
        with self._recv_lock:
            for fd in list(self._pidfds):
                self._check_exit(fd)

    # --- the thread ---------------------------------------------------------------------

    def _run(self) -> None:
        from .procfs import name_this_thread

        name_this_thread(THREAD_NAME)
        next_publish = time.monotonic() + PUBLISH_EVERY
        while not self._stop.is_set():
            try:
                self._once(max(0.0, next_publish - time.monotonic()))
                if time.monotonic() >= next_publish:
                    next_publish = time.monotonic() + PUBLISH_EVERY
                    self._sweep_silent()
                    with self._recv_lock:
                        self._recheck_oom()
                    self._publish()
            except Exception:
                time.sleep(0.1)  # never spin on a persistent failure

    def _once(self, timeout: float) -> None:
        poller = select.poll()
        sockets = {s.fileno(): (s, r) for s, r in ((self._unix, False), (self._udp, True)) if s}
        for fd in (*sockets, self._wake_r, *self._pidfds):
            if fd >= 0:
                poller.register(fd, select.POLLIN)
        for fd, _events in poller.poll(timeout * 1000):
            if fd in sockets:
                self._receive(*sockets[fd])
            elif fd == self._wake_r:
                with contextlib.suppress(OSError):
                    os.read(self._wake_r, 512)
            else:
                with self._recv_lock:
                    self._check_exit(fd)

    def _receive(self, sock: socket.socket, remote: bool) -> None:
        with self._recv_lock:
            for _ in range(10_000):
                try:
                    data = sock.recv(wire.MAX_DATAGRAM + 1)
                except (BlockingIOError, InterruptedError):
                    return
                except OSError:
                    return
                self._take(data, remote)

    def _take(self, data: bytes, remote: bool) -> None:
        table = self.table
        try:
            report = wire.decode(data, self.token.encode())
        except wire.WireError as err:
            with table.lock:
                if err.reason == "refused":
                    table.refused += 1
                else:
                    table.malformed += 1
            return
        if abs(report["t"] - time.time()) > REPLAY_WINDOW:
            with table.lock:
                table.stale += 1
            return
        proc, new = table.ingest(report, remote)
        if proc is None:
            return
        if new and not remote:
            self._watch(proc)
        if remote and report["final"]:
            table.end(proc, exit_reason(None, None)._replace(text="exited (final report)"))

    def _watch(self, proc: Proc) -> None:
        try:
            fd = os.pidfd_open(proc.pid)
        except (OSError, AttributeError):
            if not is_alive(proc.pid):
                self.table.end(proc, exit_reason(None, None))
            return
        seen = time.monotonic() - 1.0  # it started before its first report
        self._pidfds[fd] = (proc, proc.ppid == os.getpid(), oom_kills(), seen)
        self._check_exit(fd)

    def _check_exit(self, fd: int) -> None:
        entry = self._pidfds.get(fd)
        if entry is None:
            return
        proc, is_child, ooms_before, seen = entry
        status = child_status(fd) if is_child else None
        if status is None:
            if is_alive(proc.pid):
                return
            if is_child:  # it ended between the two looks: its status is there now
                status = child_status(fd)
        del self._pidfds[fd]
        with contextlib.suppress(OSError):
            os.close(fd)
        if status is None:
            reason = exit_reason(None, None)
            if proc.final_seen:
                reason = reason._replace(text="exited")
        else:
            ooms = oom_kills()
            oom = ooms is not None and ooms_before is not None and ooms > ooms_before
            if not oom and status[1] == signal.SIGKILL:
                oom = self._in_oom_log(proc, seen)
            reason = exit_reason(status[0], status[1], oom)
        self.table.end(proc, reason)

    def _in_oom_log(self, proc: Proc, seen: float) -> bool:
        """Whether the kernel log names this SIGKILLed child as the OOM killer's; when not
        (yet), it is looked up again for ``OOM_RECHECK_FOR`` seconds."""
        if self._oom_log is None:
            self._oom_log = OomLog()
        if self._oom_log.evidence(proc.pid, seen):
            return True
        if self._oom_log.readable:
            self._oom_recheck[proc.key] = (proc, seen, time.monotonic() + OOM_RECHECK_FOR)
        return False

    def _recheck_oom(self) -> None:
        if not self._oom_recheck or self._oom_log is None:
            return
        now = time.monotonic()
        for key, (proc, seen, until) in list(self._oom_recheck.items()):
            if self._oom_log.evidence(proc.pid, seen):
                self.table.amend_exit(proc, exit_reason(None, signal.SIGKILL, oom=True))
            elif now < until:
                continue
            del self._oom_recheck[key]

    def _sweep_silent(self) -> None:
        now = time.monotonic()
        watched = {entry[0].key for entry in self._pidfds.values()}
        for proc in list(self.table.procs.values()):
            silent = proc.last_seen and now - proc.last_seen > SILENT_AFTER
            if proc.ended is None and proc.key not in watched and silent:
                self.table.end(proc, exit_reason(None, None)._replace(text="stopped reporting"))

    def _wake(self) -> None:
        if self._wake_w >= 0:
            with contextlib.suppress(OSError):
                os.write(self._wake_w, b"x")


def _tune(sock: socket.socket) -> None:
    sock.setblocking(False)
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECV_BUFFER)

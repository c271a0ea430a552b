"""The child side: a daemon thread that reports this process's memory to the kernel's
collector (``wire`` datagrams, never blocking: a full queue drops the report and counts it).

Forked children (DataLoader workers, fork-started ranks) start it by themselves: the kernel's
bridge sets a ``Target`` and registers an ``os.register_at_fork`` hook. Other processes call
``vramscope.attach()`` (address and token from the arguments or from ``VRAMSCOPE_COLLECTOR``
/ ``VRAMSCOPE_TOKEN``). The thread stops silently when the collector is gone (the socket
refuses), when the forking parent died, or when the process ends (after one final report).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from . import wire
from .procfs import SelfReader, name_this_thread

ENV_ADDRESS = "VRAMSCOPE_COLLECTOR"
ENV_TOKEN = "VRAMSCOPE_TOKEN"
ENV_HZ = "VRAMSCOPE_REPORT_HZ"
DEFAULT_HZ = 2.0
#: smaps_rollup (USS/PSS) walks the page tables (~8-13 ms for a 330 MiB worker): the first
#: ``QUICK_ROLLUPS`` reads, enough for the copy-on-access signature (processes.cow), are
#: taken at most at ``QUICK_ROLLUP_SHARE`` of one core, the later ones at ``ROLLUP_CPU_SHARE``
#: (4 workers on 2 cores at 1% each took 2% of the machine from the training loop).
QUICK_ROLLUP_SHARE = 0.01
QUICK_ROLLUPS = 4
ROLLUP_CPU_SHARE = 0.0025
MAX_ROLLUP_EVERY = 10.0
FIRST_ROLLUP = 2.0
MAX_FAILURES = 3
THREAD_NAME = "vramscope-report"


@dataclass(frozen=True)
class Target:
    address: str  # "unix:/path/to/socket" or "udp:host:port"
    token: bytes
    hz: float = DEFAULT_HZ


def parse_address(address: str) -> tuple[int, Any]:
    """(socket family, sendto address) of ``unix:PATH`` or ``udp:HOST:PORT``; ValueError."""
    if address.startswith("unix:") and len(address) > 5:
        return socket.AF_UNIX, address[5:]
    if address.startswith("udp:"):
        host, _, port = address[4:].rpartition(":")
        if host and port.isdigit():
            host = host.strip("[]")
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            return family, (host, int(port))
    raise ValueError(f"collector address must be unix:PATH or udp:HOST:PORT, got {address!r}")


class Reporter:
    def __init__(self, target: Target, *, forked: bool, cell: int | None = None) -> None:
        self.target = target
        self.pid = os.getpid()
        self.ppid = os.getppid()
        self.forked = forked
        self.cell = cell
        self.host = socket.gethostname() or "localhost"
        self.seq = 0
        self.dropped = 0
        self.sent = 0
        self._failures = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._reader: SelfReader | None = None
        self._rollup_cost = 0.0
        self._next_rollup = 0.0
        self._rollups = 0
        self._thread: threading.Thread | None = None
        self._role: tuple[Any, int | None, int | None, wire.DatasetRef | None] | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._stop.is_set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def final(self) -> None:
        """One last report (the process is ending) and stop; never raises."""
        if self._stop.is_set() or os.getpid() != self.pid:
            return
        with contextlib.suppress(Exception):
            self.report(final=True)
        self._stop.set()

    def _run(self) -> None:
        name_this_thread(THREAD_NAME)
        period = 1.0 / max(0.1, self.target.hz)
        # nothing during the child's first moments (a worker's startup is on the critical path
        # of the first batches); USS/PSS, the costly read, not before FIRST_ROLLUP: a worker
        # that lives less (a short epoch's) cannot show the copy-on-access signature anyway
        self._next_rollup = time.monotonic() + FIRST_ROLLUP
        try:
            while not self._stop.wait(period):
                if self.forked and os.getppid() != self.ppid:
                    break  # the kernel that forked us is gone
                if not self.report():
                    break
        except Exception:
            pass
        finally:
            self._stop.set()
            self._close()

    def report(self, final: bool = False) -> bool:
        """Read and send one report; False once the collector is gone."""
        with self._lock:
            if self._failures >= MAX_FAILURES:
                return False
            data = wire.encode(self._read(final), self.target.token)
            try:
                self._socket().sendto(data, parse_address(self.target.address)[1])
                self.sent += 1
                self._failures = 0
            except BlockingIOError:
                self.dropped += 1  # the collector's queue is full: never wait for it
            except OSError:
                self._failures += 1  # refused / no such socket: the collector is gone
            return self._failures < MAX_FAILURES

    def _read(self, final: bool) -> wire.Report:
        reader = self._reader = self._reader or SelfReader()
        uss = pss = None
        now = time.monotonic()
        if now >= self._next_rollup:  # the final report too: it must stay cheap
            start = time.thread_time()  # CPU time: what the read costs the machine
            uss, pss = reader.uss_pss()
            cost = time.thread_time() - start
            self._rollup_cost = (
                cost if not self._rollup_cost else 0.7 * self._rollup_cost + 0.3 * cost
            )
            self._rollups += 1
            share = QUICK_ROLLUP_SHARE if self._rollups < QUICK_ROLLUPS else ROLLUP_CPU_SHARE
            every = min(MAX_ROLLUP_EVERY, self._rollup_cost / share)
            self._next_rollup = now + every
        role = _role()
        if role[0] != "child":
            self._role = role  # a rank stays a rank after destroy_process_group (final report)
        kind, index, world, dataset = self._role or role
        self.seq += 1
        return {
            "v": 1,
            "pid": self.pid,
            "ppid": self.ppid,
            "host": self.host[: wire.MAX_HOST_CHARS],
            "seq": self.seq,
            "t": time.time(),
            "kind": kind,
            "index": index,
            "world": world,
            "cell": self.cell,
            "final": final,
            "mem": {"rss": reader.rss(), "hwm": reader.hwm(), "uss": uss, "pss": pss},
            "dev": _device_figures(allow_mps=not self.forked),
            "dataset": dataset,
            "dropped": self.dropped,
        }

    def _socket(self) -> socket.socket:
        if self._sock is None:
            family, _ = parse_address(self.target.address)
            sock = socket.socket(family, socket.SOCK_DGRAM)
            sock.setblocking(False)
            self._sock = sock
        return self._sock

    def _close(self) -> None:
        with self._lock:
            sock, self._sock = self._sock, None
            reader, self._reader = self._reader, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.close()
        if reader is not None:
            reader.close()


def _role() -> tuple[Any, int | None, int | None, wire.DatasetRef | None]:
    """("worker", id, num_workers, dataset) in a DataLoader worker; ("rank", rank, world)
    once torch.distributed is initialised (or torchrun's RANK is set); else ("child", ...)."""
    modules = sys.modules
    worker = modules.get("torch.utils.data._utils.worker")
    info = worker.get_worker_info() if worker is not None else None
    if info is not None:
        dataset = getattr(info, "dataset", None)
        ref: wire.DatasetRef | None = None
        if dataset is not None:
            kind = type(dataset)
            ref = {"id": id(dataset), "type": f"{kind.__module__}.{kind.__qualname__}"[:200]}
        return "worker", int(info.id), int(info.num_workers), ref
    dist = modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return "rank", int(dist.get_rank()), int(dist.get_world_size()), None
    rank, world = os.environ.get("RANK", ""), os.environ.get("WORLD_SIZE", "")
    if rank.isdigit() and world.isdigit():
        return "rank", int(rank), int(world), None
    return "child", None, None, None


def _device_figures(allow_mps: bool) -> dict[str, wire.DeviceFigures]:
    """The CUDA allocator's figures of every device this process used (never initialises CUDA);
    MPS only outside forked children (Metal does not survive a fork)."""
    torch = sys.modules.get("torch")
    out: dict[str, wire.DeviceFigures] = {}
    if torch is None:
        return out
    with contextlib.suppress(Exception):
        if torch.cuda.is_initialized():
            from ..devices.cuda import TorchCudaBackend

            backend = TorchCudaBackend(torch)
            for index in range(int(torch.cuda.device_count())):
                st = backend.stats(index)
                if st.reserved or st.allocated:
                    out[f"cuda:{index}"] = {
                        "allocated": st.allocated,
                        "reserved": st.reserved,
                        "peak": st.allocated_peak,
                    }
    if allow_mps:
        with contextlib.suppress(Exception):
            allocated = int(torch.mps.current_allocated_memory())
            if allocated:
                driver = int(torch.mps.driver_allocated_memory())
                out["mps"] = {"allocated": allocated, "reserved": driver, "peak": allocated}
    return out


# --- process-wide state: set in the kernel, inherited by forked children -------------------

_target: Target | None = None
_cell_of_fork: Callable[[], int | None] | None = None
_reporter: Reporter | None = None
_hooks_registered = False
_forks = 0  # children this process forked since the hooks were registered


def forks() -> int:
    """How many children this process has forked (counted since ``configure``)."""
    return _forks


def _count_fork() -> None:
    global _forks
    _forks += 1


class _AfterForkAnchor:
    """Kept alive for ``multiprocessing.util.register_after_fork`` (a weak registry)."""


_ANCHOR = _AfterForkAnchor()


def configure(target: Target | None, cell_of_fork: Callable[[], int | None] | None = None) -> None:
    """In the kernel: where forked children report (None: they do not)."""
    global _target, _cell_of_fork, _hooks_registered
    _target, _cell_of_fork = target, cell_of_fork
    if target is not None and not _hooks_registered and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_in_child, after_in_parent=_count_fork)
        with contextlib.suppress(Exception):
            import multiprocessing.util as mp_util

            mp_util.register_after_fork(_ANCHOR, _after_multiprocessing_fork)
        _hooks_registered = True


def current() -> Reporter | None:
    return _reporter if _reporter is not None and _reporter.pid == os.getpid() else None


def attach(address: str | None = None, token: str | None = None, hz: float | None = None) -> bool:
    """Start reporting this process (idempotent); False when no collector is known."""
    global _reporter
    if current() is not None and current().running:  # type: ignore[union-attr]
        return True
    address = address or os.environ.get(ENV_ADDRESS) or (_target.address if _target else None)
    secret = token or os.environ.get(ENV_TOKEN) or (_target.token.decode() if _target else None)
    if not address or not secret:
        return False
    parse_address(address)  # ValueError for a bad address
    rate = hz if hz is not None else _env_hz()
    _reporter = Reporter(Target(address, secret.encode(), rate), forked=False)
    _reporter.start()
    atexit.register(_final)
    if "multiprocessing" in sys.modules:  # a spawned child leaves through os._exit
        _after_multiprocessing_fork(None)
    return True


def _env_hz() -> float:
    try:
        return min(50.0, max(0.1, float(os.environ.get(ENV_HZ, DEFAULT_HZ))))
    except ValueError:
        return DEFAULT_HZ


def _after_fork_in_child() -> None:
    global _reporter
    target = _target
    _reporter = None  # a reporter inherited from a reporting parent is not ours
    if target is None:
        return
    try:
        cell = _cell_of_fork() if _cell_of_fork is not None else None
    except Exception:
        cell = None
    with contextlib.suppress(Exception):
        reporter = Reporter(target, forked=True, cell=cell)
        reporter.start()
        _reporter = reporter


def _after_multiprocessing_fork(_anchor: object) -> None:
    """In a multiprocessing child, after it cleared the inherited finalizers: report once
    more when it exits (DataLoader workers and ranks leave through ``os._exit``)."""
    with contextlib.suppress(Exception):
        import multiprocessing.util as mp_util

        mp_util.Finalize(None, _final, exitpriority=100)


def _final() -> None:
    reporter = current()
    if reporter is not None:
        reporter.final()

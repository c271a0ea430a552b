"""The kernel's table of reporting processes: current and peak memory, history for the lanes,
per-cell peaks, ended processes with their exit reason. Thread safe (one lock); holds only
numbers and strings, never objects of the reporting processes or of the user."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any

from . import wire
from .procfs import ExitReason

#: Processes alive at once: a report from a new process beyond this is turned away and
#: counted (``processes_dropped``), so a token holder cannot grow the table without limit.
MAX_LIVE = 256
#: Ended processes kept for the panel: beyond this they are forgotten, oldest first.
MAX_ENDED = 256
MAX_PROCESSES = MAX_LIVE + MAX_ENDED
#: Forgotten processes whose last report time is still remembered (a key and a float each),
#: so a replay of their reports cannot bring them back.
REMEMBER_ENDED = 4096
HISTORY = 1200  # samples kept per process (lanes, copy-on-access detection)
#: Lane points kept across all processes (~170 B each in the table, ~46 B in a full
#: ``get_processes`` answer): 512 processes x ``HISTORY`` would be 614,400. Beyond it the
#: longest histories lose their oldest points, down to 95% of the cap (counted in
#: ``history_dropped``); 80 processes keep their full history.
MAX_HISTORY_POINTS = 96_000
MAX_PENDING = 256  # unpublished samples per process; older ones are dropped and counted

#: One lane point: (kernel time, rss, uss or None, device bytes allocated in total).
Point = tuple[float, int, "int | None", int]


@dataclass
class Proc:
    key: str
    pid: int
    ppid: int
    host: str
    remote: bool
    kind: str = "child"
    index: int | None = None
    world: int | None = None
    cell: int | None = None
    started: float = 0.0
    last_t: float = 0.0
    last_seen: float = 0.0  # monotonic
    seq: int = 0
    rss: int = 0
    uss: int | None = None
    pss: int | None = None
    peak_rss: int = 0
    peak_uss: int = 0
    devices: dict[str, wire.DeviceFigures] = field(default_factory=dict)
    peak_devices: dict[str, int] = field(default_factory=dict)
    dropped: int = 0
    reported_dropped: int = 0
    final_seen: bool = False
    ended: float | None = None
    exit: ExitReason | None = None
    dataset: wire.DatasetRef | None = None
    history: deque[Point] = field(default_factory=lambda: deque(maxlen=HISTORY))
    pending: list[Point] = field(default_factory=list)
    cell_peak: dict[str, Any] | None = None
    cell_born: bool = False  # first seen during the open cell: its VmHWM is the cell's

    @property
    def role(self) -> str:
        if self.kind == "worker":
            text = f"DataLoader worker {self.index}"
        elif self.kind == "rank":
            text = f"rank {self.index}"
        else:
            text = f"child pid {self.pid}"
        return f"{text} @ {self.host}" if self.remote else text


class ProcessTable:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.procs: dict[str, Proc] = {}
        self.received = 0
        self.refused = 0
        self.malformed = 0
        self.stale = 0
        self.processes_dropped = 0  # reports of new processes turned away (MAX_LIVE)
        self.history_dropped = 0  # lane points trimmed for MAX_HISTORY_POINTS
        self._points = 0  # lane points kept, all processes together
        self.changed = False
        self._cell_open = False
        self._live = 0
        #: key -> the sender's time of the last report of a process that ended and was
        #: forgotten (bounded: REMEMBER_ENDED, oldest first)
        self._gone: OrderedDict[str, float] = OrderedDict()

    # --- intake -----------------------------------------------------------------------

    def ingest(self, report: wire.Report, remote: bool) -> tuple[Proc | None, bool]:
        """Apply one valid report; (process, first time seen), or (None, False) when it was
        turned away: stale (replayed: a ``seq`` not above the sender's last, or a report of
        an ended process sent before its end) or a new process beyond ``MAX_LIVE``. Both
        are counted."""
        key = f"{report['host']}:{report['pid']}"
        with self.lock:
            proc = self.procs.get(key)
            if proc is None:
                last_t = self._gone.get(key)
                reused = last_t is not None  # a forgotten process's pid
            else:
                last_t = proc.last_t
                # an ended process's late report goes on its seq; a report starting the
                # count again is a new process with the same pid
                reused = proc.ended is not None and report["seq"] <= proc.seq
            if reused and last_t is not None and report["t"] <= last_t:
                self.stale += 1  # a report of an ended process, sent again
                return None, False
            new = proc is None or reused
            if new:
                if self._live >= MAX_LIVE:
                    self.processes_dropped += 1
                    return None, False
                proc = Proc(key, report["pid"], report["ppid"], report["host"], remote)
                proc.started = report["t"]
                proc.cell_born = self._cell_open
                replaced = self.procs.get(key)  # an ended process whose pid came again
                self._points -= len(replaced.history) if replaced is not None else 0
                self.procs[key] = proc
                self._gone.pop(key, None)
                self._live += 1
                self._forget_old()
            assert proc is not None
            if not new and report["seq"] <= proc.seq:
                self.stale += 1
                return None, False
            if proc.seq and report["seq"] > proc.seq + 1:
                proc.dropped += report["seq"] - proc.seq - 1
            self.received += 1
            self._apply(proc, report)
            self.changed = True
            return proc, new

    def _apply(self, proc: Proc, r: wire.Report) -> None:
        proc.seq = r["seq"]
        proc.kind, proc.index, proc.world = r["kind"], r["index"], r["world"]
        proc.cell = r["cell"] if r["cell"] is not None else proc.cell
        proc.ppid = r["ppid"]
        proc.last_t = r["t"]
        proc.last_seen = time.monotonic()
        mem = r["mem"]
        proc.rss = mem["rss"]
        if mem["uss"] is not None:
            proc.uss, proc.pss = mem["uss"], mem["pss"]
            proc.peak_uss = max(proc.peak_uss, mem["uss"])
        peak_rss = max(mem["rss"], mem["hwm"] or 0)
        proc.peak_rss = max(proc.peak_rss, peak_rss)
        proc.devices = r["dev"]
        for dev_id, figures in r["dev"].items():
            proc.peak_devices[dev_id] = max(
                proc.peak_devices.get(dev_id, 0), figures["peak"], figures["allocated"]
            )
        proc.reported_dropped = r["dropped"]
        proc.final_seen = proc.final_seen or r["final"]
        if r["dataset"] is not None:
            proc.dataset = r["dataset"]
        device_total = sum(f["allocated"] for f in r["dev"].values())
        point: Point = (r["t"], mem["rss"], mem["uss"], device_total)
        if len(proc.history) < HISTORY:  # a full deque drops its oldest itself
            self._points += 1
        proc.history.append(point)
        if self._points > MAX_HISTORY_POINTS:
            self._trim_history()
        proc.pending.append(point)
        if len(proc.pending) > MAX_PENDING:
            del proc.pending[: len(proc.pending) - MAX_PENDING]
        if self._cell_open:
            self._cell_update(proc, peak_rss if proc.cell_born else mem["rss"], mem)

    def _trim_history(self) -> None:
        """Cut the longest histories (oldest points first) to one length, so that all
        together keep at most 95% of ``MAX_HISTORY_POINTS``: amortised, a trim every ~5%."""
        target = MAX_HISTORY_POINTS * 95 // 100
        lengths = sorted((len(p.history) for p in self.procs.values()), reverse=True)
        # the largest per-process length L with sum(min(len, L)) <= target
        rest, limit = sum(lengths), 0
        for count, length in enumerate(lengths, start=1):
            rest -= length  # the points of the shorter ones, kept whole
            limit = (target - rest) // count
            if limit >= (lengths[count] if count < len(lengths) else 0):
                break
        for proc in self.procs.values():
            over = len(proc.history) - max(limit, 1)
            for _ in range(max(over, 0)):
                proc.history.popleft()
            self.history_dropped += max(over, 0)
            self._points -= max(over, 0)

    def _cell_update(self, proc: Proc, rss: int, mem: wire.HostMemory) -> None:
        peak = proc.cell_peak
        if peak is None:
            peak = proc.cell_peak = {"peak_rss": 0, "peak_uss": 0, "peak_device": {}}
        peak["peak_rss"] = max(peak["peak_rss"], rss)
        if mem["uss"] is not None:
            peak["peak_uss"] = max(peak["peak_uss"], mem["uss"])
        for dev_id, figures in proc.devices.items():
            value = max(figures["peak"], figures["allocated"])
            peak["peak_device"][dev_id] = max(peak["peak_device"].get(dev_id, 0), value)

    def end(self, proc: Proc, reason: ExitReason) -> None:
        with self.lock:
            if proc.ended is None:
                proc.ended = time.time()
                proc.exit = reason
                self.changed = True
                if self.procs.get(proc.key) is proc:
                    self._live -= 1
                    self._forget_old()

    def amend_exit(self, proc: Proc, reason: ExitReason) -> None:
        """Replace an ended process's exit reason (evidence that came later)."""
        with self.lock:
            if proc.ended is not None:
                proc.exit = reason
                self.changed = True

    def _forget_old(self) -> None:
        """Ended processes beyond ``MAX_ENDED`` are forgotten, oldest first; their keys and
        last report times are remembered (bounded) to refuse replays."""
        over = len(self.procs) - self._live - MAX_ENDED
        if over <= 0:
            return
        ended = sorted((p for p in self.procs.values() if p.ended), key=lambda p: p.ended or 0)
        for proc in ended[:over]:
            del self.procs[proc.key]
            self._points -= len(proc.history)
            self._gone[proc.key] = proc.last_t
            self._gone.move_to_end(proc.key)
        while len(self._gone) > REMEMBER_ENDED:
            self._gone.popitem(last=False)

    # --- per cell -----------------------------------------------------------------------

    def open_cell(self) -> None:
        with self.lock:
            self._cell_open = True
            for proc in self.procs.values():
                proc.cell_peak = None
                proc.cell_born = False
                if proc.ended is None:  # alive at the start: starts from its current figures
                    proc.cell_peak = {
                        "peak_rss": proc.rss,
                        "peak_uss": proc.uss or 0,
                        "peak_device": {k: v["allocated"] for k, v in proc.devices.items()},
                    }

    def close_cell(self) -> dict[str, dict[str, Any]]:
        """The peaks of every process that reported during the cell, by key."""
        with self.lock:
            self._cell_open = False
            out: dict[str, dict[str, Any]] = {}
            for proc in self.procs.values():
                peak, proc.cell_peak = proc.cell_peak, None
                if peak is not None and proc.last_seen and proc.history:
                    out[proc.key] = {"role": proc.role, **peak}
            return out

    # --- views --------------------------------------------------------------------------

    def info(self, proc: Proc) -> dict[str, Any]:
        reason = proc.exit
        return {
            "key": proc.key,
            "pid": proc.pid,
            "ppid": proc.ppid,
            "host": proc.host,
            "remote": proc.remote,
            "role": proc.role,
            "kind": proc.kind,
            "index": proc.index,
            "world": proc.world,
            "cell": proc.cell,
            "started": proc.started,
            "last_seen": proc.last_t,
            "rss": proc.rss,
            "uss": proc.uss,
            "pss": proc.pss,
            "peak_rss": proc.peak_rss,
            "peak_uss": proc.peak_uss,
            "devices": {k: dict(v) for k, v in proc.devices.items()},
            "peak_devices": dict(proc.peak_devices),
            "dropped": proc.dropped + proc.reported_dropped,
            "ended": proc.ended,
            "exit": None if reason is None else reason.text,
            "exit_code": None if reason is None else reason.exit_code,
            "signal": None if reason is None else reason.signal,
            "oom": bool(reason and reason.oom),
        }

    def stats(self) -> dict[str, int]:
        with self.lock:
            dropped = sum(p.dropped + p.reported_dropped for p in self.procs.values())
            return {
                "received": self.received,
                "dropped": dropped,
                "refused": self.refused,
                "malformed": self.malformed,
                "stale": self.stale,
                "processes_dropped": self.processes_dropped,
                "history_dropped": self.history_dropped,
            }

    def snapshot(self, history: bool) -> tuple[list[dict[str, Any]], dict[str, list[Any]]]:
        """(process infos, lane points by key): all kept points when ``history``, else the
        points not yet published (which are then marked published)."""
        with self.lock:
            infos = [self.info(p) for p in self.procs.values()]
            samples: dict[str, list[Any]] = {}
            for proc in self.procs.values():
                points = list(proc.history) if history else proc.pending
                if not history:
                    proc.pending = []
                if points:
                    samples[proc.key] = [list(p) for p in points]
            self.changed = False
            return infos, samples

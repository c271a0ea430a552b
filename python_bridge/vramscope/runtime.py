"""The one bridge instance per kernel process: wires devices, recorder, sampler, comms and
model insight to a running IPython shell, and answers the protocol's requests."""

from __future__ import annotations

import atexit
import collections
import contextlib
import sys
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any, cast

from . import gcpause, quiet
from .after_reply import AfterReply
from .bridge import Bridge
from .cell_outbox import CellOutbox, cell_messages
from .devices import CpuDevice, Device, accelerator_devices
from .estimator import ActivationMemo
from .estimator.entry import handle_request as estimate_request
from .hookguard import restore_hooks, restored_notice
from .insight_link import InsightLink
from .messages.insight import Insight
from .messages.records import CellRecord, DeviceInfo, DeviceSample, Sample, Settings
from .optimize.link import OptimizeLink
from .processes.service import ProcessesService
from .protocol import error_message, notice_message
from .recorder import CellRecorder
from .runtime_requests import Requests
from .sampler import RingBuffer, Sampler
from .selfmem import SelfMemory
from .settings import default_settings
from .torch_baseline import BASELINE
from .warmup import Warmup


class Runtime(Requests):
    def __init__(self, shell: Any = None) -> None:
        self.shell = shell
        self.session_id = uuid.uuid4().hex
        self.settings: Settings = default_settings()
        self.cpu = CpuDevice(exact=lambda: self.settings.get("cpu_peak") == "exact")
        self.devices: list[Device] = [self.cpu]  # replaced, never mutated (sampler reads it)
        self._accelerators_checked = False
        self.ring = RingBuffer(self.settings["history_limit"])
        self.bridge = Bridge(
            handlers={
                "get_report": lambda _p: self.report(),
                "get_devices": lambda _p: {"devices": self.device_infos()},
                "set_settings": lambda p: {"settings": self.update_settings(p)},
                "get_insight": self._get_insight,
                "clear_history": lambda _p: {"cleared": self.clear_history()},
                "report_error": lambda p: {"kept": self.report_client_error(p)},
                "get_samples": lambda p: {"samples": self.samples_since(p.get("since"))},
                "get_advice": lambda p: {"advice": self.optimize.advise(p.get("model"))},
                "get_processes": lambda _p: self.processes.message(history=True),
                "estimate": lambda p: estimate_request(p, self.user_ns(), self.activation_memo),
                "export_report": lambda p: self.export_report(p),
            },
            hello=self.hello,
        )
        self.sampler = Sampler(
            self.read_all,
            self.ring,
            sink=self.bridge,
            on_error=self._internal,
            prepare_thread=quiet.open_iopub_pipe,
        )
        self.recorder = CellRecorder(
            devices=lambda: self.devices,
            peak_policy=lambda: self.settings["cuda_peak_policy"],
            open_window=self.sampler.open_window,
            close_window=self.sampler.close_window,
            on_record=self._after_cell,
        )
        self.after_reply = AfterReply(
            busy=lambda: self.recorder.running, on_error=lambda exc: self._internal(exc)
        )
        self.outbox = CellOutbox(prepare_thread=quiet.open_iopub_pipe)  # records to send
        self.warmup: Warmup | None = None  # set up by install
        self._model_ran = False  # the last cell ran a measured model call
        #: (model, layers) of the last insight broadcast whole, None: send the next whole
        self._layers_sent: tuple[Any, Any] | None = None
        self.insight = InsightLink(shell, self.device_reading)
        self.optimize = OptimizeLink(self)  # advice: idle until asked for
        #: the watched models' measured saved-for-backward bytes, for the estimator
        self.activation_memo = ActivationMemo()
        #: child processes and ranks reporting to this kernel (vramscope.processes)
        self.processes = ProcessesService(
            send=self.bridge.broadcast,  # type: ignore[arg-type]
            wants=lambda: self.bridge.has_streams,
            namespace=lambda: getattr(self.shell, "user_ns", None),
            execution_count=lambda: getattr(self.shell, "execution_count", None),
        )
        self._installed_on: Any = None
        self._lock = threading.Lock()
        #: Kernel messages the front end rejected (``report_error`` requests), newest last.
        self.client_errors: collections.deque[dict[str, Any]] = collections.deque(maxlen=20)
        #: vramscope's own memory (hello/cell ``self_bytes``); the user's namespaces count 0
        self.self_memory = SelfMemory(
            lambda: self,
            lambda: [self.user_ns(), getattr(self.shell, "user_ns_hidden", None)],
        )

    # --- lifecycle ------------------------------------------------------------------------

    def install(self, shell: Any) -> None:
        """Register hooks, comm target, sampler and exit handler (idempotent)."""
        with self._lock:
            if self._installed_on is shell:
                self._guard_hooks(drop_started=True)  # put back hooks user code removed
                return
            if self._installed_on is not None:
                self._uninstall_locked()
            self.shell = shell
            self.insight = InsightLink(shell, self.device_reading)
            shell.events.register("pre_run_cell", self._pre_run_cell)
            shell.events.register("post_run_cell", self._post_run_cell)
            shell.events.register("post_execute", self._post_execute)
            self._installed_on = shell
            # registered by the front end's bootstrap or a plain import, not by %load_ext:
            # IPython must know it is loaded, or %unload_ext says "not loaded" and keeps it
            with contextlib.suppress(Exception):
                shell.extension_manager.loaded.add(__package__)
            self.cpu.resume()  # the heap counter's entries, put back by an unload
            BASELINE.start(self.cpu.walked)  # "runtime (torch import)" in the breakdown
            self.bridge.register()
            self._refresh_devices()
            self.sampler.set_rate(self.settings["sample_hz"])
            self.processes.start()
            self.warmup = Warmup(shell)  # the kernel's one-time setups, before any cell
            self.warmup.prepare()
            atexit.register(self.shutdown)

    def uninstall(self) -> None:
        with self._lock:
            self._uninstall_locked()

    def _uninstall_locked(self) -> None:
        shell, self._installed_on = self._installed_on, None
        if shell is not None:
            for event, hook in (
                ("pre_run_cell", self._pre_run_cell),
                ("post_run_cell", self._post_run_cell),
                ("post_execute", self._post_execute),
            ):
                with contextlib.suppress(ValueError):
                    shell.events.unregister(event, hook)
            with contextlib.suppress(Exception):
                shell.extension_manager.loaded.discard(__package__)
        # the cell running the unload had its pre_run_cell: it must not be closed (with a
        # bogus duration) by the post_run_cell of the cell that loads the bridge again
        self.recorder.drop_pending()
        self.after_reply.discard()
        self.outbox.clear()
        BASELINE.disarm()
        self.shutdown()
        self.cpu.suspend()  # unloaded: malloc's entries as they were
        self.bridge.unregister()
        atexit.unregister(self.shutdown)

    def shutdown(self) -> None:
        """Stop background work (kernel exit, extension unload); safe to call repeatedly."""
        self.sampler.stop()
        self.outbox.close()
        with contextlib.suppress(Exception):
            self.insight.close()
        with contextlib.suppress(Exception):
            self.processes.stop()

    @property
    def installed(self) -> bool:
        return self._installed_on is not None

    # --- measurements ---------------------------------------------------------------------

    def read_all(self) -> Sample:
        """The sampler's tick: every device's ``tick`` reading."""
        readings: dict[str, DeviceSample] = {}
        unread: list[str] = []
        for device in self.devices:
            try:
                reading = device.tick()
                if reading is not None:
                    readings[device.id] = reading
                else:  # not read this tick (a slow CPU heap): its line goes on
                    unread.append(device.id)
            except Exception:
                continue  # no reading: a gap in its line
        sample: Sample = {"t": time.time(), "d": readings}
        if unread:
            sample["unread"] = unread
        return sample

    def device_reading(self, device_id: str) -> DeviceSample | None:
        """One device's current reading (the insight breakdown's total and CUDA extras)."""
        for device in self.devices:
            if device.id == device_id:
                try:
                    return device.current()  # the CPU: the last cell's ending reading
                except Exception:
                    return None
        return None

    def device_infos(self, samples: Mapping[str, DeviceSample] | None = None) -> list[DeviceInfo]:
        infos: list[DeviceInfo] = []
        for device in self.devices:
            try:
                infos.append(device.info((samples or {}).get(device.id)))
            except Exception:
                continue
        return infos

    def _refresh_devices(self) -> bool:
        """Add CUDA/MPS devices the first time torch is seen imported.

        True that first time, even when no accelerator was found: the warnings changed
        ("torch is not imported yet" no longer holds).
        """
        if self._accelerators_checked or "torch" not in sys.modules:
            return False
        self._accelerators_checked = True
        found = accelerator_devices()
        if found:
            self.devices = [self.cpu, *found]
        return True

    # --- IPython events (never raise) -----------------------------------------------------

    def _pre_run_cell(self, info: Any) -> None:
        sent = self.bridge.sent
        with gcpause.paused():  # ends before the cell's starting reading (recorder)
            self._prepare_cell(info)
        # exact CPU peaks (`vramscope profile`): what the bridge sent just now is freed on
        # other threads, wait for that before the starting reading (~2 ms, Run All only)
        settle = self.bridge.sent != sent and self.settings.get("cpu_peak") == "exact"
        try:
            self.recorder.pre_run_cell(info, settle=settle)
        except Exception as exc:
            self._internal(exc)

    def _prepare_cell(self, info: Any) -> None:
        self._guard_hooks(drop_started=True)
        if self.warmup is not None and not self.warmup.done:
            self.warmup.prepare()
        # the previous cell's message and insight, if its reply left no time for them: done
        # before this cell's starting readings, never inside its measurement
        try:
            if self.outbox.due():  # a Run All: cells' records wait for idle, not longer
                self._publish_cells()
            else:  # ... nor for a long cell to end
                self.outbox.hold(self._send_overdue_cells)
            # insight waits for an idle kernel, unless the previous cell ran a model: its
            # figures (the training step's saved activations, for Optimize and the
            # estimator) are that cell's, not those of the whole Run All
            self.after_reply.flush(keep_keyed=not self._model_ran)
            self._model_ran = False
        except Exception as exc:
            self._internal(exc)
        try:
            # hooks in before this cell's first forward (torch may have come in where no
            # post_run_cell ran), or the moment this cell finishes importing torch
            self.insight.begin_cell(
                getattr(info, "cell_id", None),
                getattr(self.shell, "execution_count", None),
                enabled=self.settings["insight"],
            )
        except Exception as exc:
            self._internal(exc, "model insight failed")
        try:
            self.processes.open_cell()
        except Exception as exc:
            self._internal(exc)

    def _post_run_cell(self, result: Any) -> None:
        with gcpause.paused():  # the cell's ending reading comes first (recorder)
            try:
                self.recorder.post_run_cell(result)
            except Exception as exc:
                self._internal(exc)
            self._guard_hooks()

    def _post_execute(self) -> None:
        self._guard_hooks()  # also after silent executions; runs before post_run_cell

    def _guard_hooks(self, drop_started: bool = False) -> None:
        """Put back a hook that user code removed (vramscope.hookguard), with a notice."""
        hooks = {
            "pre_run_cell": self._pre_run_cell,
            "post_run_cell": self._post_run_cell,
            "post_execute": self._post_execute,
        }
        restored = restore_hooks(self._installed_on, hooks)
        if drop_started and "post_run_cell" in restored:
            self.recorder.drop_pending()  # the started cell's end event never came
        if restored:
            lost = drop_started and "post_run_cell" in restored
            self.bridge.broadcast(notice_message("warning", restored_notice(restored, lost)))

    def _after_cell(self, record: CellRecord, after: dict[str, DeviceSample]) -> None:
        """The recorder's ``on_record``: publishing waits for the execute reply."""
        BASELINE.observe_cuda(after)  # the CUDA context, at the first reading that has one
        try:
            peaks = self.processes.close_cell(record.get("execution_count"))
            if peaks:
                record["processes"] = peaks  # type: ignore[typeddict-item]
        except Exception as exc:
            self._internal(exc)
        try:
            self._model_ran = self.insight.end_cell(record.get("execution_count"))
        except Exception as exc:
            self._internal(exc, "model insight failed")
        # one append unless advice was asked for
        self.optimize.after_cell(record, self.insight.kept_forwards)
        self.outbox.add(record, after)
        self.after_reply.submit(self._publish_cells, key="cells")

    def _publish_cells(self) -> None:
        """The cells' follow-up work: send the waiting records (vramscope.cell_outbox: one
        ``cell`` message, or one ``cells`` message for the quick cells of a Run All), then
        queue model insight."""
        if self._refresh_devices():
            # Once, when torch is first seen imported: new devices and/or new warnings.
            self.bridge.broadcast(self.devices_message())
            # the cell that imported torch may have initialised CUDA: its context's size,
            # which that cell's end readings (of the devices known when it began) lack
            readings = {d.id: self.device_reading(d.id) for d in self.devices if d.kind != "cpu"}
            BASELINE.observe_cuda({k: v for k, v in readings.items() if v is not None})
        self._send_cells(with_self_bytes=True)
        if self.settings["insight"] and "torch" in sys.modules:
            # coalesced: in a Run All of quick cells only the newest insight runs, when idle
            self.after_reply.submit(self._run_insight, key="insight")

    def _send_overdue_cells(self) -> None:
        """On the outbox's sender thread, while a long cell runs."""
        self._send_cells(with_self_bytes=False)  # selfmem walks objects the cell may change

    def _send_cells(self, with_self_bytes: bool) -> None:
        with self.outbox.sending:
            batch = self.outbox.take()
            if not batch or not self.bridge.has_streams:
                return
            devices = self.device_infos(batch[-1][1])
            for message in cell_messages([record for record, _ in batch], devices):
                if with_self_bytes:
                    self._add_self_bytes(message)
                self.bridge.broadcast(message)

    def _run_insight(self, resume: bool = False) -> None:
        try:
            result = self.insight.after_cell(self.settings["insight_budget_ms"], resume=resume)
        except Exception as exc:
            self._internal(exc, "model insight failed")
            return
        if result is None:  # nothing to continue, or nothing shown changed
            self._send_insight_notes()
            return
        if not resume:  # a continued holders scan changes the holders only
            if self.insight.rows_changed:
                self.activation_memo.observe(result)
            self.optimize.after_insight(result)
        self.bridge.broadcast({"type": "insight", "insight": cast(Insight, self._slim(result))})
        if result.get("partial") and not result.get("skipped"):
            # the holders scan stopped at its budget: it goes on in the next idle moment
            self.after_reply.submit(lambda: self._run_insight(resume=True), key="insight")
        if result.get("skipped"):
            self.bridge.broadcast(notice_message("info", f"model insight: {result['skipped']}"))
        self._send_insight_notes()
        self.insight.sent()

    def _send_insight_notes(self) -> None:
        """What model insight could not measure (a forward inside a transform, ...), each
        said once, also after a cell that changed nothing else it shows."""
        for note in self.insight.notes():
            self.bridge.broadcast(notice_message("info", f"model insight: {note}"))

    def _get_insight(self, params: dict[str, Any]) -> dict[str, Any]:
        self._layers_sent = None  # the asking page now has these layers, the others not
        return {"insight": self.insight.snapshot(params.get("model"))}

    def _slim(self, insight: dict[str, Any]) -> dict[str, Any]:
        """``insight`` to broadcast: without its layer rows (``layers_unchanged``, since 1.1)
        when model and layers equal the last broadcast's, and every page got that one (no
        hello or ``get_insight`` answer since): a continued holders scan's slices, cells that
        ran no model (for a 10,000-module model, ~120 KB each)."""
        key = (insight.get("model"), insight.get("layers"))
        if key[1] and self._layers_sent is not None and key == self._layers_sent:
            return {**insight, "layers": [], "layers_unchanged": True}
        self._layers_sent = key if isinstance(key[1], list) else None
        return insight

    def user_ns(self) -> dict[str, Any]:
        """The user's namespace (empty without a shell)."""
        ns = getattr(self.shell, "user_ns", None)
        return ns if isinstance(ns, dict) else {}

    def _internal(self, exc: BaseException, what: str = "vramscope internal error") -> None:
        self.bridge.broadcast(error_message("internal", f"{what}: {type(exc).__name__}: {exc}"))


_runtime: Runtime | None = None
_runtime_lock = threading.Lock()


def get_runtime() -> Runtime:
    global _runtime
    with _runtime_lock:
        if _runtime is None:
            _runtime = Runtime()
        return _runtime


def current_runtime() -> Runtime | None:
    return _runtime


__all__ = ["Runtime", "current_runtime", "get_runtime"]

"""The protocol's requests a :class:`.runtime.Runtime` answers from what it holds: hello,
devices, the session report and its exports, settings, samples, the front end's error
reports. The runtime's comm (bridge.py) routes each request to one of these."""

from __future__ import annotations

import collections
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from . import environment
from ._version import __version__
from .messages.insight import Insight
from .messages.records import KernelInfo, Sample, Settings
from .protocol import (
    MAX_CLIENT_ERROR_CHARS,
    MAX_NAME_CHARS,
    PROTOCOL_VERSION,
    CellMessage,
    CellsMessage,
    DevicesMessage,
    HelloMessage,
)
from .report import build_report
from .settings import apply_settings

if TYPE_CHECKING:
    from .devices import Device
    from .insight_link import InsightLink
    from .messages.records import DeviceInfo, DeviceSample
    from .optimize.link import OptimizeLink
    from .recorder import CellRecorder
    from .sampler import RingBuffer, Sampler
    from .selfmem import SelfMemory


class Requests:
    """The request handlers; the runtime holds the state they read (declared here)."""

    if TYPE_CHECKING:
        session_id: str
        settings: Settings
        devices: list[Device]
        ring: RingBuffer
        sampler: Sampler
        recorder: CellRecorder
        insight: InsightLink
        optimize: OptimizeLink
        self_memory: SelfMemory
        client_errors: collections.deque[dict[str, Any]]
        _layers_sent: tuple[Any, Any] | None

        @property
        def installed(self) -> bool: ...

        def device_infos(
            self, samples: Mapping[str, DeviceSample] | None = None
        ) -> list[DeviceInfo]: ...

    def kernel_info(self) -> KernelInfo:
        return environment.kernel_info()

    def hello(self) -> HelloMessage:
        hello: HelloMessage = {
            "type": "hello",
            "protocol_version": PROTOCOL_VERSION,
            "bridge_version": __version__,
            "session_id": self.session_id,
            "kernel": self.kernel_info(),
            "devices": self.device_infos(),
            "settings": dict(self.settings),  # type: ignore[typeddict-item]
            "cells": self.recorder.history(),
            "warnings": environment.warnings_for(self.devices),
        }
        if self.insight.last is not None:  # a reloaded page shows it at once (since 1.1)
            hello["insight"] = cast(Insight, self.insight.last)
        self._layers_sent = None  # the next insight goes out whole: this page has no other
        self._add_self_bytes(hello)
        return hello

    def _add_self_bytes(self, message: HelloMessage | CellMessage | CellsMessage) -> None:
        value = self.self_memory.bytes()
        if value is not None:
            message["self_bytes"] = value

    def devices_message(self) -> DevicesMessage:
        """The current devices and bridge warnings (the latter replace hello's)."""
        return {
            "type": "devices",
            "devices": self.device_infos(),
            "warnings": environment.warnings_for(self.devices),
        }

    def report(self) -> dict[str, Any]:
        insight = self._current_insight()
        return build_report(
            session_id=self.session_id,
            kernel=self.kernel_info(),
            devices=self.device_infos(),
            settings=self.settings,
            cells=self.recorder.history(),
            samples=self.ring.snapshot(),
            insight=insight,
            measured=self.insight.measured,
            client_errors=self.client_errors,
            advice=self.optimize.report(),
        )

    def _current_insight(self) -> Mapping[str, Any]:
        """Model insight as of now (not as of the last cell end), or the last one on failure."""
        try:
            if self.settings.get("insight", True) and self.insight.engine() is not None:
                return self.insight.snapshot(None)
        except Exception:
            pass
        return self.insight.last or {}

    def export_report(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The ``export_report`` request: the report rendered as one file (vramscope.export)."""
        from .exports.request import export_result

        return export_result(self.report(), params)

    def update_settings(self, patch: Mapping[str, Any]) -> Settings:
        """Validate and apply a partial update; raises ProtocolError('invalid_params')."""
        new = apply_settings(self.settings, patch)
        self.settings = new
        self.ring.resize(new["history_limit"])
        if self.installed and new["sample_hz"] != self.sampler.rate:
            self.sampler.set_rate(new["sample_hz"])
        if not new["insight"]:
            self.insight.set_enabled(False)
        return dict(new)  # type: ignore[return-value]

    def samples_since(self, since: float | None) -> list[Sample]:
        """The kept samples newer than ``since`` (all of them when None), oldest first."""
        samples = self.ring.snapshot()
        if since is None:
            return samples
        return [s for s in samples if s["t"] > since]

    def report_client_error(self, params: Mapping[str, Any]) -> int:
        """Keep a front end's report of a kernel message it rejected (the last 20)."""
        self.client_errors.append(
            {
                "time": time.time(),
                "code": str(params["code"])[:MAX_NAME_CHARS],
                "message": str(params["message"])[:MAX_CLIENT_ERROR_CHARS],
            }
        )
        return len(self.client_errors)

    def clear_history(self) -> int:
        self.ring.clear()
        return self.recorder.clear()

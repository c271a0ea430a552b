"""The ``vramscope`` comm target: ``stream`` and ``control`` channels, version check, request
dispatch. Every callback is guarded: nothing raises into the kernel or the user's code."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping
from typing import Any, Callable, Protocol

from .messages.records import Sample
from .protocol import (
    COMM_TARGET,
    HelloMessage,
    KernelMessage,
    ProtocolError,
    check_protocol_version,
    error_message,
    reply_message,
    validate_request,
)
from .textsafe import wire_safe

Handler = Callable[[dict[str, Any]], dict[str, Any]]


class CommLike(Protocol):
    """The part of ``comm.base_comm.BaseComm`` the bridge uses."""

    def send(self, data: Any = None, metadata: Any = None, buffers: Any = None) -> None: ...

    def close(self, data: Any = None, metadata: Any = None, buffers: Any = None) -> None: ...

    def on_msg(self, callback: Callable[[dict[str, Any]], Any]) -> None: ...

    def on_close(self, callback: Callable[[dict[str, Any]], Any]) -> None: ...


class Bridge:
    """Owns the open comms; sends kernel messages; answers requests with ``handlers``."""

    def __init__(self, handlers: Mapping[str, Handler], hello: Callable[[], HelloMessage]) -> None:
        self._handlers = handlers
        self._hello = hello
        self._lock = threading.Lock()
        self._streams: list[CommLike] = []
        self._controls: list[CommLike] = []
        self._manager: Any = None
        #: messages sent on stream comms so far (any thread): the recorder asks whether the
        #: bridge sent something just before a cell's starting reading
        self.sent = 0

    # --- registration ---------------------------------------------------------------------

    def register(self) -> bool:
        """Register the comm target with the running kernel's comm manager (idempotent)."""
        try:
            import comm

            manager = comm.get_comm_manager()
            manager.register_target(COMM_TARGET, self.on_open)
        except Exception:
            return False
        self._manager = manager
        return True

    def unregister(self) -> None:
        manager, self._manager = self._manager, None
        if manager is not None:
            with contextlib.suppress(Exception):
                manager.unregister_target(COMM_TARGET, self.on_open)
        with self._lock:
            comms = self._streams + self._controls
            self._streams, self._controls = [], []
        for c in comms:
            _quiet(c.close)

    # --- comm callbacks -------------------------------------------------------------------

    def on_open(self, comm: CommLike, open_msg: dict[str, Any]) -> None:
        try:
            self._open(comm, open_msg)
        except Exception as exc:  # never raise into the kernel
            self._safe_send(comm, error_message("internal", _describe(exc)))

    def _open(self, comm: CommLike, open_msg: dict[str, Any]) -> None:
        content = open_msg.get("content") or {}
        data = content.get("data") if isinstance(content, dict) else None
        channel = data.get("channel") if isinstance(data, dict) else None
        try:
            check_protocol_version(open_msg.get("metadata"))
            if channel not in ("stream", "control"):
                raise ProtocolError(
                    "invalid_message",
                    f"comm open data needs channel 'stream' or 'control', got {channel!r}",
                )
        except ProtocolError as err:
            self._safe_send(comm, error_message(err.code, err.message))
            _quiet(comm.close)
            return
        comm.on_msg(lambda msg: self.on_msg(comm, msg, channel))
        comm.on_close(lambda _msg: self._forget(comm))
        with self._lock:
            (self._streams if channel == "stream" else self._controls).append(comm)
        if channel == "stream":
            self._safe_send(comm, self._hello())

    def on_msg(self, comm: CommLike, msg: dict[str, Any], channel: str = "control") -> None:
        """Answer one received message on ``comm`` with a reply or an error.

        Requests are served on ``control`` only; on ``stream`` they get ``invalid_message``.
        """
        request_id: str | None = None
        try:
            content = msg.get("content") if isinstance(msg, dict) else None
            data = content.get("data") if isinstance(content, dict) else None
            request = validate_request(data)
            request_id = request["id"]
            if channel != "control":
                raise ProtocolError(
                    "invalid_message",
                    f"requests go on the 'control' comm, not on {channel!r}",
                    request_id,
                )
            result = self._handlers[request["method"]](request["params"])
            self._safe_send(comm, reply_message(request_id, result))
        except ProtocolError as err:
            reply_to = err.in_reply_to if err.in_reply_to is not None else request_id
            self._safe_send(comm, error_message(err.code, err.message, reply_to))
        except Exception as exc:
            self._safe_send(comm, error_message("internal", _describe(exc), request_id))

    def _forget(self, comm: CommLike) -> None:
        with self._lock:
            self._streams = [c for c in self._streams if c is not comm]
            self._controls = [c for c in self._controls if c is not comm]

    # --- sending --------------------------------------------------------------------------

    @property
    def has_streams(self) -> bool:
        return bool(self._streams)

    def broadcast(self, message: KernelMessage) -> None:
        """Send a message on every open ``stream`` comm."""
        for c in list(self._streams):
            self._safe_send(c, message)
            self.sent += 1

    # SampleSink
    def wants_samples(self) -> bool:
        return bool(self._streams)

    def send_samples(self, samples: list[Sample], dropped: int) -> None:
        self.broadcast({"type": "samples", "samples": samples, "dropped": dropped})

    def _safe_send(self, comm: CommLike, message: Mapping[str, Any]) -> None:
        try:
            comm.send(dict(message))
        except UnicodeEncodeError:  # a user string with a lone surrogate (vramscope.textsafe)
            with contextlib.suppress(Exception):
                comm.send(wire_safe(dict(message)))
        except Exception:
            pass


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _quiet(func: Callable[[], Any]) -> None:
    with contextlib.suppress(Exception):
        func()

"""Drive a real IPython kernel through jupyter_client: execute with a cellId, open comms,
collect comm messages from iopub."""

from __future__ import annotations

import os
import queue
import time
import uuid
from collections.abc import Iterator
from typing import Any, Callable

from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager

PROTOCOL = "1.1.0"
#: In a kernel's environment: start it cold (test/warm_kernels/launch.py)
COLD_ENV = "VRAMSCOPE_COLD_KERNEL"
BOOTSTRAP = '__import__("vramscope")._bootstrap()'

Msg = dict[str, Any]


def start_kernel(
    env: dict[str, str] | None, cwd: str | None = None
) -> tuple[KernelManager, BlockingKernelClient]:
    """A kernel and a client that had its first reply. A kernel that died before replying is
    started once more, on new ports: jupyter_client picks five free TCP ports and the kernel
    binds them a moment later, and on a machine where three test workers start kernels and
    open connections, another process took one meanwhile ("Address already in use", the
    kernel dead before its first reply: fresh run 95). ``env``: variables on top of this
    process's; ``cwd``: the kernel's folder."""
    for attempt in (1, 2):
        km = KernelManager(kernel_name="python3")
        km.start_kernel(
            **({"env": {**os.environ, **env}} if env else {}), **({"cwd": cwd} if cwd else {})
        )
        kc: BlockingKernelClient = km.client()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=60)
            return km, kc
        except RuntimeError:
            kc.stop_channels()
            if attempt == 2 or km.is_alive():
                raise
            km.cleanup_resources()  # its connection file and ports
    raise AssertionError("unreachable")


class KernelHarness:
    def __init__(self, env: dict[str, str] | None = None, cold: bool = False) -> None:
        """``env``: variables set in the kernel's environment on top of this process's.
        ``cold``: a kernel started as the stock kernelspec starts it, never a warm one forked
        with torch imported (test/warm_kernels/zygote.py)."""
        if cold:
            env = {**(env or {}), COLD_ENV: "1"}
        self.km, self.kc = start_kernel(env)
        self.iopub: list[Msg] = []
        #: per comm: the records of a ``cells`` message not yet returned by comm_data
        self._cells: dict[str, list[dict[str, Any]]] = {}
        #: per comm: (model, layers) of the last insight message, for layers_unchanged
        self._insights: dict[str, tuple[Any, Any]] = {}

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=False)

    # --- iopub -----------------------------------------------------------------------------

    def _pump(self, timeout: float) -> Msg | None:
        try:
            msg: Msg = self.kc.get_iopub_msg(timeout=timeout)
        except queue.Empty:
            return None
        self._merge_layers(msg)
        self.iopub.append(msg)
        return msg

    def _merge_layers(self, msg: Msg) -> None:
        """As the front end does (src/model/insightlayers.ts): an ``insight`` message with
        ``layers_unchanged`` (since 1.1) gets the layers of the previous one on its comm, for
        the same model. The flag stays, so a test can tell the wire message was slim."""
        if msg["msg_type"] != "comm_msg":
            return
        data = msg["content"].get("data")
        if not isinstance(data, dict) or data.get("type") != "insight":
            return
        comm_id = msg["content"].get("comm_id")
        insight = data["insight"]
        previous = self._insights.get(comm_id)
        if insight.get("layers_unchanged") and previous and previous[0] == insight["model"]:
            insight["layers"] = previous[1]
        self._insights[comm_id] = (insight["model"], insight["layers"])

    def wait_iopub(self, predicate: Callable[[Msg], bool], timeout: float = 30) -> Msg:
        """Next iopub message (from now on) matching ``predicate``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = self._pump(min(0.5, max(0.01, deadline - time.monotonic())))
            if msg is not None and predicate(msg):
                return msg
        raise TimeoutError("no matching iopub message")

    def comm_data(self, comm_id: str, msg_type: str, timeout: float = 30) -> dict[str, Any]:
        """Next comm message data of ``type`` on comm ``comm_id``.

        Asked for ``"cell"``, a ``cells`` message (the records of a Run All's quick cells,
        sent together) counts as one ``cell`` message per record, in order."""
        queued = self._cells.get(comm_id)
        if msg_type == "cell" and queued:
            return queued.pop(0)
        types = ("cell", "cells") if msg_type == "cell" else (msg_type,)
        msg = self.wait_iopub(
            lambda m: (
                m["msg_type"] == "comm_msg"
                and m["content"].get("comm_id") == comm_id
                and m["content"]["data"].get("type") in types
            ),
            timeout,
        )
        data: dict[str, Any] = msg["content"]["data"]
        if data["type"] == "cells":
            rest = {k: v for k, v in data.items() if k not in ("type", "records")}
            views = [{"type": "cell", "record": r, **rest} for r in data["records"]]
            self._cells[comm_id] = views[1:]
            return views[0]
        return data

    # --- shell -----------------------------------------------------------------------------

    def send_execute(self, code: str, cell_id: str | None = None, silent: bool = False) -> str:
        content = {
            "code": code,
            "silent": silent,
            "store_history": not silent,
            "user_expressions": {},
            "allow_stdin": False,
            "stop_on_error": False,
        }
        metadata = {"cellId": cell_id} if cell_id else {}
        msg = self.kc.session.msg("execute_request", content, metadata=metadata)
        self.kc.shell_channel.send(msg)
        msg_id: str = msg["header"]["msg_id"]
        return msg_id

    def reply(self, msg_id: str, timeout: float = 60) -> Msg:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg: Msg = self.kc.get_shell_msg(timeout=deadline - time.monotonic())
            if msg["parent_header"].get("msg_id") == msg_id:
                return msg
        raise TimeoutError("no execute_reply")

    def execute(self, code: str, cell_id: str | None = None, silent: bool = False) -> Msg:
        reply = self.reply(self.send_execute(code, cell_id, silent))
        return reply

    def run_ok(self, code: str, cell_id: str | None = None) -> None:
        reply = self.execute(code, cell_id)
        assert reply["content"]["status"] == "ok", reply["content"]

    def eval(self, expr: str) -> Any:
        """Value of a Python expression in the kernel, via user_expressions (silent)."""
        content = {
            "code": "",
            "silent": True,
            "store_history": False,
            "user_expressions": {"v": expr},
            "allow_stdin": False,
        }
        msg = self.kc.session.msg("execute_request", content)
        self.kc.shell_channel.send(msg)
        reply = self.reply(msg["header"]["msg_id"])
        value = reply["content"]["user_expressions"]["v"]
        assert value["status"] == "ok", value
        return eval(value["data"]["text/plain"])

    def comm_open(self, channel: str, version: str = PROTOCOL) -> str:
        comm_id = uuid.uuid4().hex
        content = {"comm_id": comm_id, "target_name": "vramscope", "data": {"channel": channel}}
        msg = self.kc.session.msg("comm_open", content, metadata={"protocol_version": version})
        self.kc.shell_channel.send(msg)
        return comm_id

    def comm_send(self, comm_id: str, data: Any) -> None:
        msg = self.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
        self.kc.shell_channel.send(msg)

    def request(
        self, comm_id: str, method: str, params: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Send a request on a control comm; return the matching reply or error data."""
        req_id = uuid.uuid4().hex
        self.comm_send(
            comm_id, {"type": "request", "id": req_id, "method": method, "params": params or {}}
        )
        msg = self.wait_iopub(
            lambda m: (
                m["msg_type"] == "comm_msg"
                and m["content"].get("comm_id") == comm_id
                and req_id
                in (m["content"]["data"].get("id"), m["content"]["data"].get("in_reply_to"))
            )
        )
        data: dict[str, Any] = msg["content"]["data"]
        return data

    def messages_between(self, start: int, comm_id: str, msg_type: str) -> Iterator[Msg]:
        for msg in self.iopub[start:]:
            if (
                msg["msg_type"] == "comm_msg"
                and msg["content"].get("comm_id") == comm_id
                and msg["content"]["data"].get("type") == msg_type
            ):
                yield msg

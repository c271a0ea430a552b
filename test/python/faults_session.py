"""A bootstrapped real kernel with a stream and a control comm, for the fault, weakref,
hostile-string and soak tests (test_faults*.py, test_weakrefs*.py, test_hostile*.py,
test_soak*.py)."""

from __future__ import annotations

import json
import os
import signal
from typing import Any

from kernel_harness import BOOTSTRAP, KernelHarness

MIB = 1 << 20


class Session:
    """One kernel, bootstrapped like the front end does, with both comms open."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.k = KernelHarness(env=env)
        self.connect()

    def connect(self) -> dict[str, Any]:
        """Bootstrap (idempotent) and open a fresh stream + control comm; return the hello."""
        reply = self.k.execute(BOOTSTRAP, silent=True)
        assert reply["content"]["status"] == "ok", reply["content"]
        self.stream = self.k.comm_open("stream")
        self.hello = self.k.comm_data(self.stream, "hello", timeout=30)
        self.control = self.k.comm_open("control")
        return self.hello

    def close(self) -> None:
        self.k.close()

    # --- cells ----------------------------------------------------------------------------

    def cell(self, code: str, cell_id: str, ok: bool = True) -> dict[str, Any]:
        """Run a cell; return its ``cell`` message (record + devices)."""
        reply = self.k.execute(code, cell_id)
        status = reply["content"]["status"]
        assert (status == "ok") is ok, reply["content"]
        return self.cell_message(cell_id)

    def cell_message(self, cell_id: str, timeout: float = 30) -> dict[str, Any]:
        for _ in range(200):
            data = self.k.comm_data(self.stream, "cell", timeout=timeout)
            if data["record"]["cell_id"] == cell_id:
                return data
        raise AssertionError(f"no cell message for {cell_id}")

    def next_of(self, msg_type: str, timeout: float = 30) -> dict[str, Any]:
        return self.k.comm_data(self.stream, msg_type, timeout=timeout)

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.k.request(self.control, method, params)

    def result(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        answer = self.request(method, params)
        assert answer["type"] == "reply", answer
        result: dict[str, Any] = answer["result"]
        return result

    # --- process --------------------------------------------------------------------------

    def pid(self) -> int:
        pid = self.k.eval("__import__('os').getpid()")
        assert isinstance(pid, int)
        return pid

    def sigkill_and_replace(self) -> None:
        """SIGKILL the kernel process, wait for it to be gone, start a new one."""
        os.kill(self.pid(), signal.SIGKILL)
        self.k.km.provisioner.process.wait(timeout=30)  # type: ignore[union-attr]
        assert not self.k.km.is_alive()
        self.k.km.restart_kernel(now=True)
        self.k.kc.wait_for_ready(timeout=60)
        self.connect()

    def restart(self) -> None:
        self.k.km.restart_kernel(now=True)
        self.k.kc.wait_for_ready(timeout=60)
        self.connect()


def message_bytes(data: dict[str, Any]) -> int:
    """Size of a comm message's data as JSON (what goes over the wire, before framing)."""
    return len(json.dumps(data, separators=(",", ":")).encode())

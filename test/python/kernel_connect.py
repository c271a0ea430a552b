"""Load vramscope in a harness kernel the way the front end does: the bootstrap, then a
stream comm (waiting for its hello) and a control comm for requests."""

from __future__ import annotations

from kernel_harness import BOOTSTRAP, KernelHarness


def connect(k: KernelHarness) -> tuple[str, str]:
    """Bootstrap the bridge and open both comms; the (stream, control) comm ids."""
    assert k.execute(BOOTSTRAP, silent=True)["content"]["status"] == "ok"
    stream = k.comm_open("stream")
    k.comm_data(stream, "hello")
    return stream, k.comm_open("control")

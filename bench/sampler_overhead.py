"""Cost of the vramscope sampler thread on a CPU training loop.

One process, one model, one batch: the same Adam steps run in many short blocks (~0.25 s
each), paired A/B with the sampler thread on (at ``--hz``, default 10) and off, the order
alternating from pair to pair so drift and load on the shared machine hit both sides alike.
The sampler publishes as in a kernel with the panel open: a ``stream`` comm is attached through
the bridge's real open path, and every batch goes the real way (``Bridge.send_samples`` ->
``broadcast`` -> ``comm.send``) into a comm that does what ipykernel's ``Comm.publish_msg``
does: build the Jupyter ``comm_msg`` and ``Session.send`` it (json.dumps of header, parent,
metadata and content, HMAC-SHA256 signature) on a ZMQ PUB socket (inproc, no subscriber; in a
kernel the frames go to the IOPub thread instead). Printed for three clocks (wall, process CPU
with the sampler thread's CPU included, main-thread CPU): the median of the per-pair ratios
(on/off; target <= 1.01) with its quartiles and the ratio of total times; then the cost of one
sampler tick and of one tick plus its batch sent, measured directly (the floor the A/B cannot
resolve). ``--record`` writes the figures to bench/RESULTS.md. No asserts.

    python bench/sampler_overhead.py [--pairs 40] [--block 0.25] [--hz 10] [--record]
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

import torch
import zmq
from jupyter_client.session import Session

from _results import print_and_record
from vramscope.protocol import PROTOCOL_VERSION
from vramscope.runtime import Runtime


class PublishingComm:
    """A ``stream`` comm whose ``send`` is ipykernel's ``Comm.publish_msg`` up to the socket:
    ``Session.send`` of a ``comm_msg`` (JSON packing + HMAC signature) on a PUB socket."""

    def __init__(self) -> None:
        self.comm_id = uuid.uuid4().hex
        self.topic = f"comm-{self.comm_id}".encode("ascii")
        self.session = Session(key=uuid.uuid4().hex.encode("ascii"))  # signed, as in a kernel
        self._ctx = zmq.Context()
        self.socket = self._ctx.socket(zmq.PUB)
        self.socket.bind(f"inproc://vramscope-bench-{self.comm_id}")
        self.messages = 0
        self.bytes = 0
        self.samples = 0

    def send(self, data: Any = None, metadata: Any = None, buffers: Any = None) -> None:
        content = {"data": data, "comm_id": self.comm_id}  # json_clean: a no-op today
        msg = self.session.send(
            self.socket, "comm_msg", content, parent={}, ident=self.topic, metadata=metadata or {}
        )
        if msg is not None and isinstance(data, dict) and data.get("type") == "samples":
            self.messages += 1
            self.samples += len(data["samples"])
            self.bytes += len(self.session.pack(msg["content"]))

    def close(self, data: Any = None, metadata: Any = None, buffers: Any = None) -> None:
        self.socket.close(linger=0)
        self._ctx.term()

    def on_msg(self, callback: Callable[[dict[str, Any]], Any]) -> None:
        pass

    def on_close(self, callback: Callable[[dict[str, Any]], Any]) -> None:
        pass


def attach_stream(runtime: Runtime) -> PublishingComm:
    """Open a ``stream`` comm on the runtime's bridge the way the front end does."""
    comm = PublishingComm()
    open_msg = {
        "content": {"comm_id": comm.comm_id, "data": {"channel": "stream"}},
        "metadata": {"protocol_version": PROTOCOL_VERSION},
    }
    runtime.bridge.on_open(comm, open_msg)  # registers it and sends hello
    assert runtime.bridge.wants_samples(), "stream comm not attached"
    return comm


def make_step() -> Callable[[], None]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(512, 1024),
        torch.nn.ReLU(),
        torch.nn.Linear(1024, 1024),
        torch.nn.ReLU(),
        torch.nn.Linear(1024, 10),
    )
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    data, target = torch.randn(256, 512), torch.randn(256, 10)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.mse_loss(model(data), target).backward()
        opt.step()

    return step


CLOCKS = ("wall", "process CPU", "main-thread CPU")


def timed(step: Callable[[], None], steps: int) -> tuple[float, float, float]:
    """Wall, process CPU (the sampler thread's included) and main-thread CPU seconds."""
    wall, proc, thread = time.perf_counter(), time.process_time(), time.thread_time()
    for _ in range(steps):
        step()
    return (
        time.perf_counter() - wall,
        time.process_time() - proc,
        time.thread_time() - thread,
    )


def quartiles(values: list[float]) -> tuple[float, float]:
    q = statistics.quantiles(values, n=4)
    return q[0], q[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--block", type=float, default=0.25, help="seconds per block")
    parser.add_argument("--hz", type=float, default=10.0)
    parser.add_argument("--record", action="store_true", help="write to bench/RESULTS.md")
    args = parser.parse_args()

    torch.set_num_threads(1)  # shared cores: one thread keeps blocks comparable
    step = make_step()
    runtime = Runtime()
    comm = attach_stream(runtime)
    sampler = runtime.sampler
    timed(step, 5)  # warm up
    per_step = min(timed(step, 3)[0] / 3 for _ in range(3))
    steps = max(1, round(args.block / per_step))

    on: list[tuple[float, float, float]] = []
    off: list[tuple[float, float, float]] = []
    ticks = 0
    for i in range(args.pairs):
        for sampling in (True, False) if i % 2 == 0 else (False, True):
            if sampling:
                before = sampler.ticks
                sampler.set_rate(args.hz)  # starts the thread (it ticks at once)
                on.append(timed(step, steps))
                sampler.set_rate(0)  # stops and joins it
                ticks += sampler.ticks - before
            else:
                off.append(timed(step, steps))
    runtime.shutdown()
    sent, sent_samples, sent_bytes = comm.messages, comm.samples, comm.bytes

    n_ticks = 5000
    sink, sampler.sink = sampler.sink, None  # the tick alone: device reads + ring buffer
    start = time.perf_counter()
    for _ in range(n_ticks):
        sampler.tick()
    tick_us = (time.perf_counter() - start) / n_ticks * 1e6
    sampler.sink = sink  # a tick and its one-sample batch published, as at 10 Hz
    start = time.perf_counter()
    for _ in range(n_ticks):
        sampler.tick()
        sampler.flush(force=True)
    send_us = (time.perf_counter() - start) / n_ticks * 1e6
    runtime.bridge.unregister()  # closes the comm
    on_s = sum(t[0] for t in on)
    lines = [
        f"MLP 512-1024-1024-10, batch 256, Adam, 1 thread, torch {torch.__version__}",
        f"{args.pairs} A/B pairs of {steps} steps (~{steps * per_step:.2f} s per block), "
        f"order alternating; sampler thread at {args.hz:g} Hz started/stopped between blocks, "
        "publishing to a stream comm (Session.send: JSON + HMAC, on a ZMQ PUB socket)",
    ]
    for k, clock in enumerate(CLOCKS):
        ratios = [a[k] / b[k] for a, b in zip(on, off)]
        q1, q3 = quartiles(ratios)
        total_on, total_off = sum(a[k] for a in on), sum(b[k] for b in off)
        lines.append(
            f"{clock}: median per-pair ratio on/off {statistics.median(ratios):.4f} "
            f"(quartiles {q1:.4f}..{q3:.4f}); total-time ratio {total_on / total_off:.4f} "
            f"({total_on:.2f} s vs {total_off:.2f} s)"
        )
    lines += [
        "target <= 1.01; wall clock on shared cores is the noisiest, CPU time the steadiest",
        f"{ticks} ticks during the on blocks ({ticks / on_s:.1f} per s); "
        f"{sent} samples messages published ({sent / on_s:.1f} per s, "
        f"{sent_samples / max(1, sent):.2f} samples and {sent_bytes / max(1, sent):.0f} content "
        "bytes each)",
        f"one tick (all device reads + ring buffer), timed directly: {tick_us:.1f} us "
        f"= {tick_us * args.hz / 1e4:.4f}% of one core at {args.hz:g} Hz",
        f"one tick + its one-sample batch published (samples message, json, HMAC, socket), "
        f"timed directly: {send_us:.1f} us = {send_us * args.hz / 1e4:.4f}% of one core "
        f"at {args.hz:g} Hz",
    ]
    print_and_record("sampler_overhead", lines, args.record)


if __name__ == "__main__":
    main()

"""Capture one real instance of every kernel -> front-end message type from a real kernel.

Writes ``test/fixtures/kernel-messages.json``: ``{"<type>": <comm message data>}``, pretty
printed with sorted keys, every type of ``vramscope.protocol.KERNEL_MESSAGE_TYPES`` present.
Both validators read it: ``test/python/test_protocol_fixtures.py`` (Python) and the jest suite
(``src/validate.ts``), so the two sides are checked against what the bridge really sends.
Long lists (samples, cell history, layers, holders) are cut to a few entries, which keeps
every message valid. Needs torch in the kernel's environment (for ``devices``/``insight``).

    .venv/bin/python test/python/make_protocol_fixtures.py [--out PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernel_harness import BOOTSTRAP, KernelHarness
from vramscope.protocol import KERNEL_MESSAGE_TYPES

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "test" / "fixtures" / "kernel-messages.json"
KEEP = 3  # entries kept of a long list

Data = dict[str, Any]


def _comm_data(k: KernelHarness, comm_id: str, msg_type: str, timeout: float = 30) -> Data:
    return k.comm_data(comm_id, msg_type, timeout)


def _cell(k: KernelHarness, stream: str, code: str, cell_id: str) -> Data:
    reply = k.execute(code, cell_id)
    assert reply["content"]["status"] == "ok", reply["content"]
    for _ in range(50):
        data = _comm_data(k, stream, "cell")
        if data["record"]["cell_id"] == cell_id:
            return data
    raise AssertionError(f"no cell message for {cell_id}")


def _after(k: KernelHarness, start: int, comm_id: str, msg_type: str) -> list[Data]:
    return [m["content"]["data"] for m in k.messages_between(start, comm_id, msg_type)]


def capture() -> dict[str, Data]:
    k = KernelHarness()
    try:
        return _capture(k)
    finally:
        k.close()


def _capture(k: KernelHarness) -> dict[str, Data]:
    out: dict[str, Data] = {}
    assert k.eval("'torch' in __import__('sys').modules") is False, "torch must come in later"
    reply = k.execute(BOOTSTRAP, silent=True)
    assert reply["content"]["status"] == "ok", reply["content"]
    # a recorded cell before the stream opens: hello carries it in its history
    k.run_ok("numbers = list(range(1000))\ndel numbers", "fixture-before-hello")

    stream = k.comm_open("stream")
    out["hello"] = _comm_data(k, stream, "hello")
    control = k.comm_open("control")

    # a batch with several samples: sample fast for a moment
    assert k.request(control, "set_settings", {"sample_hz": 50})["type"] == "reply"
    with contextlib.suppress(TimeoutError):
        k.wait_iopub(lambda m: False, timeout=0.5)
    batches = [_comm_data(k, stream, "samples") for _ in range(3)]
    out["samples"] = max(batches, key=lambda b: len(b["samples"]))
    assert k.request(control, "set_settings", {"sample_hz": 10})["type"] == "reply"

    # since 1.1: the quick cells of a Run All (requests queued at once) go out together
    queued = [k.send_execute(f"q = {i}", f"fixture-runall-{i}") for i in range(3)]
    for msg_id in queued:
        assert k.reply(msg_id)["content"]["status"] == "ok"
    out["cells"] = k.wait_iopub(
        lambda m: (
            m["msg_type"] == "comm_msg"
            and m["content"].get("comm_id") == stream
            and m["content"]["data"].get("type") == "cells"
        )
    )["content"]["data"]

    # first cell that imports torch: devices (torch seen), cell, insight
    start = len(k.iopub)
    code = (
        "import torch\n"
        "model = torch.nn.Sequential(\n"
        "    torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)\n"
        ")\n"
        "weights = torch.ones(256, 1024)"
    )
    out["cell"] = _cell(k, stream, code, "fixture-import-torch")
    devices = _after(k, start, stream, "devices")
    assert devices, "no devices message when torch was first imported"
    out["devices"] = devices[0]
    # the forward hooks are in from the next cell on: an insight with layers
    _cell(k, stream, "y = model(torch.randn(16, 32))", "fixture-forward")
    out["insight"] = _comm_data(k, stream, "insight")

    # a holders scan with no time budget is skipped: a notice says so
    k.request(control, "set_settings", {"insight_budget_ms": 0})
    start = len(k.iopub)
    _cell(k, stream, "junk = [[i] for i in range(5000)]", "fixture-over-budget")
    out["notice"] = _comm_data(k, stream, "notice")
    k.request(control, "set_settings", {"insight_budget_ms": 20})

    # since 1.1: a forked child reports to the bridge's collector; the stream gets processes
    fork = "import os, time\n_c = os.fork()\nif _c == 0:\n    time.sleep(1)\n    os._exit(0)"
    k.run_ok(fork, "fixture-fork")
    out["processes"] = _comm_data(k, stream, "processes")

    # since 1.1 (Optimize): a training cell, advice asked for, its first suggestion applied
    # (a cell with its marker) and the training cell run again: an advice message follows
    train = (
        "batch = torch.randn(64, 32)\n"
        "for _ in range(2):\n"
        "    optimizer.zero_grad()\n"
        "    loss = model(batch).pow(2).mean()\n"
        "    loss.backward()\n"
        "    optimizer.step()"
    )
    k.run_ok("optimizer = torch.optim.SGD(model.parameters(), lr=0.1)", "fixture-opt")
    _cell(k, stream, train, "fixture-train")
    advice = k.request(control, "get_advice", {})["result"]["advice"]
    start = len(k.iopub)
    _cell(k, stream, advice["suggestions"][0]["code"], "fixture-apply")
    _cell(k, stream, train, "fixture-train-again")
    with contextlib.suppress(TimeoutError):  # the insight that completes the outcome
        k.wait_iopub(lambda m: False, timeout=1.0)
    out["advice"] = _after(k, start, stream, "advice")[-1]
    search = (
        "vramscope.find_batch_size(lambda n: model(torch.randn(n, 32)).sum().backward(),"
        " budget='1MiB', model=model)"
    )
    k.run_ok("import vramscope\n" + search, "fixture-finder")
    out["batch_search"] = _comm_data(k, stream, "batch_search")

    out["reply"] = k.request(control, "get_devices")
    out["error"] = k.request(control, "set_settings", {"sample_hz": -1})
    assert out["error"]["type"] == "error" and out["error"]["in_reply_to"], out["error"]
    for msg_type, data in out.items():
        assert data.get("type") == msg_type, (msg_type, data)
    missing = set(KERNEL_MESSAGE_TYPES) - set(out)
    assert not missing, f"no capture for kernel message type(s) {sorted(missing)}"
    return out


def shorten(messages: dict[str, Data]) -> dict[str, Data]:
    """Cut long lists to ``KEEP`` entries (a valid message stays valid)."""
    out = json.loads(json.dumps(messages))
    out["hello"]["cells"] = out["hello"]["cells"][:KEEP]
    out["samples"]["samples"] = out["samples"]["samples"][:KEEP]
    insight = out["insight"]["insight"]
    insight["layers"] = insight["layers"][:KEEP]
    insight["holders"] = insight["holders"][:KEEP]
    samples = out["processes"]["samples"]
    out["processes"]["samples"] = {key: points[:KEEP] for key, points in samples.items()}
    advice = out["advice"]["advice"]
    advice["suggestions"] = advice["suggestions"][:1]
    out["batch_search"]["search"]["tried"] = out["batch_search"]["search"]["tried"][:KEEP]
    return dict(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=FIXTURE)
    args = parser.parse_args()
    messages = shorten(capture())
    ordered = {t: messages[t] for t in sorted(messages)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(ordered, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out} ({len(text)} bytes): {', '.join(ordered)}")


if __name__ == "__main__":
    main()

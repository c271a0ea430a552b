"""The child -> collector wire format (docs/protocol.md, "Processes", since 1.1).

One datagram per report: ``b"VSP1 " + hex HMAC-SHA256(token, body) + b"\\n" + body``, where
``body`` is a UTF-8 JSON object (``Report``). The MAC proves the sender knows the collector's
token without sending it; the collector compares MACs with ``hmac.compare_digest``.
``decode`` never raises anything but ``WireError`` (``refused``: bad MAC; ``malformed``:
anything else), so hostile input is counted and dropped.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
from typing import Any, Literal, TypedDict

MAGIC = b"VSP1 "
MAC_HEX = 64
MAX_DATAGRAM = 16 * 1024
MAX_HOST_CHARS = 255
MAX_TYPE_CHARS = 200
MAX_DEVICES = 16
KINDS = ("worker", "rank", "child")
_DEVICE_ID = re.compile(r"^(cuda:\d{1,3}|mps|xpu:\d{1,3})$")


class DeviceFigures(TypedDict):
    allocated: int
    reserved: int
    peak: int


class HostMemory(TypedDict):
    rss: int
    hwm: int | None  # VmHWM: the process's own peak RSS
    uss: int | None  # private pages (smaps_rollup Private_*), None when not read this time
    pss: int | None


class DatasetRef(TypedDict):
    id: int  # id() of the worker's dataset: the same object address as in the forking kernel
    type: str


class Report(TypedDict):
    v: int
    pid: int
    ppid: int
    host: str
    seq: int
    t: float
    kind: Literal["worker", "rank", "child"]
    index: int | None
    world: int | None
    cell: int | None
    final: bool
    mem: HostMemory
    dev: dict[str, DeviceFigures]
    dataset: DatasetRef | None
    dropped: int


class WireError(Exception):
    def __init__(self, reason: Literal["refused", "malformed"], message: str) -> None:
        super().__init__(message)
        self.reason = reason


def mac(token: bytes, body: bytes) -> bytes:
    return hmac.new(token, body, hashlib.sha256).hexdigest().encode("ascii")


def encode(report: Report, token: bytes) -> bytes:
    body = json.dumps(report, separators=(",", ":")).encode("utf-8")
    return MAGIC + mac(token, body) + b"\n" + body


def decode(datagram: bytes, token: bytes) -> Report:
    """Check framing and MAC, then every field; return the report or raise WireError."""
    if len(datagram) > MAX_DATAGRAM:
        raise WireError("malformed", f"datagram of {len(datagram)} bytes is too large")
    head = len(MAGIC) + MAC_HEX
    if not datagram.startswith(MAGIC) or datagram[head : head + 1] != b"\n":
        raise WireError("malformed", "not a vramscope report (bad framing)")
    their_mac = datagram[len(MAGIC) : head]
    body = datagram[head + 1 :]
    if not hmac.compare_digest(their_mac, mac(token, body)):
        raise WireError("refused", "unknown sender (the report's MAC does not match the token)")
    try:
        obj = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise WireError("malformed", f"body is not JSON: {exc}") from None
    return validate(obj)


def validate(obj: Any) -> Report:
    if not isinstance(obj, dict):
        raise WireError("malformed", "report must be an object")
    if obj.get("v") != 1:
        raise WireError("malformed", "unsupported report version")
    for key in ("pid", "ppid", "seq", "dropped"):
        _count(obj.get(key), key)
    if obj["pid"] == 0:
        raise WireError("malformed", "pid must be positive")
    host = obj.get("host")
    if not isinstance(host, str) or not 0 < len(host) <= MAX_HOST_CHARS:
        raise WireError("malformed", "host must be a string of 1..255 chars")
    t = obj.get("t")
    if not _finite(t):
        raise WireError("malformed", "t must be a finite number")
    if obj.get("kind") not in KINDS:
        raise WireError("malformed", f"kind must be one of {', '.join(KINDS)}")
    for key in ("index", "world", "cell"):
        if obj.get(key) is not None:
            _count(obj.get(key), key)
    if not isinstance(obj.get("final"), bool):
        raise WireError("malformed", "final must be a boolean")
    mem = obj.get("mem")
    if not isinstance(mem, dict):
        raise WireError("malformed", "mem must be an object")
    _count(mem.get("rss"), "mem.rss")
    for key in ("hwm", "uss", "pss"):
        if mem.get(key) is not None:
            _count(mem.get(key), f"mem.{key}")
    dev = obj.get("dev")
    if not isinstance(dev, dict) or len(dev) > MAX_DEVICES:
        raise WireError("malformed", f"dev must be an object of at most {MAX_DEVICES} devices")
    for dev_id, figures in dev.items():
        if not isinstance(dev_id, str) or not _DEVICE_ID.match(dev_id):
            raise WireError("malformed", "dev keys must be device ids like cuda:0 or mps")
        if not isinstance(figures, dict):
            raise WireError("malformed", f"dev.{dev_id} must be an object")
        for key in ("allocated", "reserved", "peak"):
            _count(figures.get(key), f"dev.{dev_id}.{key}")
    dataset = obj.get("dataset")
    if dataset is not None:
        if not isinstance(dataset, dict):
            raise WireError("malformed", "dataset must be an object or null")
        _count(dataset.get("id"), "dataset.id")
        kind = dataset.get("type")
        if not isinstance(kind, str) or not 0 < len(kind) <= MAX_TYPE_CHARS:
            raise WireError("malformed", "dataset.type must be a short string")
    return {  # only the known fields travel on
        "v": 1,
        "pid": obj["pid"],
        "ppid": obj["ppid"],
        "host": host,
        "seq": obj["seq"],
        "t": float(t),  # type: ignore[arg-type]
        "kind": obj["kind"],
        "index": obj.get("index"),
        "world": obj.get("world"),
        "cell": obj.get("cell"),
        "final": obj["final"],
        "mem": {
            "rss": mem["rss"],
            "hwm": mem.get("hwm"),
            "uss": mem.get("uss"),
            "pss": mem.get("pss"),
        },
        "dev": {
            k: {"allocated": v["allocated"], "reserved": v["reserved"], "peak": v["peak"]}
            for k, v in dev.items()
        },
        "dataset": None if dataset is None else {"id": dataset["id"], "type": dataset["type"]},
        "dropped": obj["dropped"],
    }


def _count(value: Any, name: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**63:
        raise WireError("malformed", f"{name} must be a non-negative integer")


def _finite(value: Any) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )

"""Copy-on-access detection for DataLoader workers.

A forked worker shares the kernel's pages until it writes to them. Reading a Python object
writes its reference count, so a dataset held as Python objects (lists, dicts, pandas object
columns) is copied page by page as the workers index it: each worker's private memory (USS)
grows steadily through the epoch while its shared memory shrinks by about as much (RSS stays
flat: the batches are not growing, pages only move from shared to private). A dataset held in
numpy/Arrow arrays or tensors does not do that: their data pages are never written.

The signature, per worker, over its reports: USS rose by at least ``MIN_GROWTH``, in mostly
rising steps, and the shared part (RSS - USS) fell by at least half of that rise.
"""

from __future__ import annotations

import collections
import sys
from typing import Any

from .table import Proc

MIN_GROWTH = 8 * 1024 * 1024
MIN_POINTS = 4
RISING_SHARE = 0.6
SHARED_SHARE = 0.5
CONTAINER_TYPES = (list, tuple, dict, set, frozenset, collections.deque)
MAX_ATTRS = 32
SAMPLE_ELEMENTS = 200


def worker_growth(proc: Proc) -> int | None:
    """USS bytes copied so far when ``proc`` shows the copy-on-access signature, else None."""
    points = [(rss, uss) for _t, rss, uss, _dev in proc.history if uss is not None]
    if len(points) < MIN_POINTS:
        return None
    (rss0, uss0), (rss1, uss1) = points[0], points[-1]
    growth = uss1 - uss0
    if growth < MIN_GROWTH:
        return None
    steps = [b[1] - a[1] for a, b in zip(points, points[1:]) if b[1] != a[1]]
    if not steps or sum(1 for s in steps if s > 0) < RISING_SHARE * len(steps):
        return None
    shared_drop = (rss0 - uss0) - (rss1 - uss1)
    if shared_drop < SHARED_SHARE * growth:
        return None  # new allocations, not copied pages
    return growth


def detect(procs: list[Proc], namespace: dict[str, Any] | None) -> list[dict[str, Any]]:
    """One finding per (forking process, cell, dataset) whose workers copy on access."""
    groups: dict[tuple[int, int | None, int | None], list[tuple[Proc, int]]] = {}
    for proc in procs:
        if proc.kind != "worker":
            continue
        growth = worker_growth(proc)
        if growth is not None:
            dataset_id = proc.dataset["id"] if proc.dataset else None
            groups.setdefault((proc.ppid, proc.cell, dataset_id), []).append((proc, growth))
    findings = []
    for (_ppid, cell, _ds), members in groups.items():
        first = members[0][0]
        workers = max((p.world or 0) for p, _ in members) or len(members)
        dataset = describe_dataset(namespace, first.dataset)
        growth = sum(g for _, g in members)
        per_copy = sum(c["bytes"] for c in dataset["containers"])
        projected = max(growth, workers * per_copy)
        findings.append(
            _finding(cell, [p.key for p, _ in members], workers, growth, projected, dataset)
        )
    return findings


def _finding(
    cell: int | None,
    keys: list[str],
    workers: int,
    growth: int,
    projected: int,
    dataset: dict[str, Any],
) -> dict[str, Any]:
    name = dataset["name"] or f"the {dataset['type'].rsplit('.', 1)[-1]} dataset"
    held = ", ".join(
        f"{c['name']} ({c['type']} of {c['length']:,})" for c in dataset["containers"][:3]
    )
    where = f" in cell [{cell}]" if cell is not None else ""
    message = (
        f"Copy-on-access: {len(keys)} DataLoader worker(s){where} copy {name} page by page "
        f"as they read it (private memory +{_mib(growth)} so far"
        + (f"; it holds Python objects: {held}" if held else "")
        + "). Reading a Python object writes its reference count, so every worker ends up "
        "with its own copy."
    )
    return {
        "kind": "copy_on_access",
        "cell": cell,
        "workers": keys,
        "num_workers": workers,
        "growth_bytes": int(growth),
        "projected_saving_bytes": int(projected),
        "dataset": dataset,
        "message": message,
        "fixes": [
            "Store the samples in a numpy array, an Arrow table or a tensor instead of a list "
            "of Python objects: their pages are never written, so the workers share one copy "
            f"(projected saving ~{_mib(projected)} per epoch with {workers} workers).",
            f"Use fewer workers (num_workers < {workers}): each one makes its own copy.",
            "persistent_workers=True: workers keep what they copied across epochs instead of "
            "being forked (and copying again) every epoch.",
        ],
    }


def describe_dataset(namespace: dict[str, Any] | None, ref: Any) -> dict[str, Any]:
    """Name, type and Python containers of the worker's dataset, found in the kernel's
    namespace by identity (a forked worker's dataset has the kernel object's address)."""
    type_name = ref["type"] if ref else "unknown"
    out: dict[str, Any] = {"name": None, "type": type_name, "containers": []}
    if not ref or not namespace:
        return out
    found = _find(namespace, ref["id"], type_name)
    if found is None:
        return out
    name, dataset = found
    out["name"] = name
    out["containers"] = _containers(name, dataset)
    del dataset
    return out


def _find(namespace: dict[str, Any], target: int, type_name: str) -> tuple[str, Any] | None:
    try:
        items = list(namespace.items())
    except RuntimeError:
        return None
    data = sys.modules.get("torch.utils.data")
    loader_type = getattr(data, "DataLoader", None)
    for name, value in items:
        if name.startswith("_"):
            continue
        candidates = [(name, value)]
        if isinstance(loader_type, type) and isinstance(value, loader_type):
            # only a DataLoader's own attribute: never a getattr on arbitrary user objects
            candidates.append((f"{name}.dataset", getattr(value, "dataset", None)))
        for path, obj in candidates:
            if id(obj) == target and _type_name(obj) == type_name:
                return path, obj
    return None


def _containers(name: str, dataset: Any) -> list[dict[str, Any]]:
    candidates: list[tuple[str, Any]] = []
    if isinstance(dataset, CONTAINER_TYPES):
        candidates.append((name, dataset))
    try:
        attrs = list(vars(dataset).items())[:MAX_ATTRS]
    except TypeError:
        attrs = []
    candidates += [(f"{name}.{key}", value) for key, value in attrs]
    out: list[dict[str, Any]] = []
    for path, value in candidates:
        size = _python_bytes(value)
        if size is not None:
            out.append(
                {
                    "name": path,
                    "type": type(value).__name__,
                    "length": len(value),
                    "bytes": size,
                }
            )
    out.sort(key=lambda c: -c["bytes"])
    return out


def _python_bytes(value: Any) -> int | None:
    """Estimated bytes of a container of Python objects (container + sampled elements);
    None when ``value`` is not one (numpy arrays and tensors are not)."""
    if isinstance(value, CONTAINER_TYPES):
        items = value.items() if isinstance(value, dict) else value
        sample = []
        for i, item in enumerate(items):
            if i >= SAMPLE_ELEMENTS:
                break
            sample.append(item)
        if not sample:
            return None
        per = sum(_element_bytes(x) for x in sample) / len(sample)
        return int(sys.getsizeof(value) + per * len(value))
    frame = type(value)
    if frame.__name__ == "DataFrame" and frame.__module__.startswith("pandas"):
        try:
            columns = [c for c, dt in value.dtypes.items() if str(dt) == "object"]
            if columns:
                return int(value[columns].memory_usage(deep=True).sum())
        except Exception:
            return None
    return None


def _element_bytes(item: Any) -> int:
    if isinstance(item, tuple) and len(item) == 2:
        return sys.getsizeof(item[0]) + sys.getsizeof(item[1])
    return sys.getsizeof(item)


def _type_name(obj: Any) -> str:
    kind = type(obj)
    return f"{kind.__module__}.{kind.__qualname__}"[:200]


def _mib(value: int) -> str:
    return f"{value / 2**20:.1f} MiB"

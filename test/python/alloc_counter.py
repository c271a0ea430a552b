"""An independent ground truth for per-cell CPU peaks (issue 21): the notebook's cells run in a
plain kernel (no vramscope) with malloc_peak.c preloaded, which counts the in-use bytes of
every malloc'd block inside the allocator itself. A cell's peak is that count's high-water
mark during the cell minus its value at the cell's start, the cell being what IPython runs
between its ``pre_run_cell`` and ``post_run_cell`` events (where vramscope's own readings are
taken; the kernel's handling of the request around them is not the cell's, and counted ~17
KiB more on a 130 KiB cell): every allocation and free is seen,
inside an op too (a reading of glibc after each op misses those), and the cells run in a
kernel as ``vramscope profile`` runs them (a plain ``exec`` in a script gave one training cell
1 MiB less than every kernel: the first matmuls keep a different amount of BLAS workspace).

Without the heap counter (where vramscope counts a cell op by op), before the first cell after
torch is imported, one op runs under an empty ``TorchDispatchMode``
(the first op under a Python mode imports ~800 modules, ~24 MiB, which vramscope's exact
count does when it is first armed): without it a plain kernel pays that import inside the
first cell that happens to need it (``torch.optim.Adam(...)``). Needs glibc and a C compiler.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import nbformat

from kernel_harness import start_kernel

SOURCE = Path(__file__).with_name("malloc_peak.c")
_BUILT: dict[str, Path] = {}

# The counter's code runs in a module of its own (``_mallocpeak``): the user's namespace stays
# a plain kernel's, so its dict grows at the same cells (a resize is ~2 KiB of a small cell).
_NS = "__import__('sys').modules['_mallocpeak']"
_BODY = (
    "import ctypes as _c, json as _j\n"
    "from IPython import get_ipython\n"
    "_L = _c.CDLL(None)\n"
    "_L.mallocpeak_current.restype = _L.mallocpeak_peak.restype = _c.c_longlong\n"
    "_S, _R = [0], [0, 0]\n"
    "def _mark(info):\n"
    "    _S[0] = _L.mallocpeak_current(); _L.mallocpeak_reset()\n"
    "def _read(result):\n"
    "    _R[:] = [_L.mallocpeak_peak() - _S[0], _L.mallocpeak_current() - _S[0]]\n"
    "get_ipython().events.register('pre_run_cell', _mark)\n"
    "get_ipython().events.register('post_run_cell', _read)"
)
SETUP = (
    f"exec({_BODY!r}, __import__('sys').modules.setdefault('_mallocpeak',"
    " __import__('types').ModuleType('_mallocpeak')).__dict__)"
)
_WARM_BODY = (
    "import sys as _s\n"
    "if 'torch' in _s.modules and not globals().get('_warm'):\n"
    "    from torch.utils._python_dispatch import TorchDispatchMode as _M\n"
    "    class _Empty(_M):\n"
    "        def __torch_dispatch__(self, f, t, a=(), k=None): return f(*a, **(k or {}))\n"
    "    with _Empty(): _s.modules['torch'].ones(1).add(1)\n"
    "    _warm = True"
)
WARM = f"exec({_WARM_BODY!r}, {_NS}.__dict__)"
READ = f"{_NS}._j.dumps({_NS}._R)"


def available() -> bool:
    """glibc (mallinfo2's allocator) and a C compiler to build the counter."""
    import ctypes

    return shutil.which("cc") is not None and hasattr(ctypes.CDLL(None), "mallinfo2")


def library() -> Path:
    """malloc_peak.c built once per process (into a temporary folder)."""
    if "lib" not in _BUILT:
        out = Path(tempfile.mkdtemp(prefix="malloc-peak-")) / "libmallocpeak.so"
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(out), str(SOURCE)], check=True)
        _BUILT["lib"] = out
    return _BUILT["lib"]


def cell_peaks(
    notebook: Path, timeout: float = 600, warm: bool | None = None
) -> list[tuple[int, int]]:
    """Per code cell of ``notebook``: (peak rise, net change) of malloc's in-use bytes, run
    in a plain kernel started in the notebook's folder. Raises if a cell fails. ``warm``:
    run ``WARM`` before each cell (default: where vramscope's exact peaks would come from its
    op-by-op count, as without the heap counter)."""
    if warm is None:
        from vramscope.devices import CpuDevice

        warm = CpuDevice().heap is None
    nb = nbformat.read(str(notebook), as_version=4)
    cells = [c.source for c in nb.cells if c.cell_type == "code"]
    km, kc = start_kernel({"LD_PRELOAD": str(library())}, cwd=str(notebook.parent))
    try:
        _run(kc, SETUP, timeout, silent=True)
        peaks: list[tuple[int, int]] = []
        for code in cells:
            if warm:
                _run(kc, WARM, timeout, silent=True)
            _run(kc, code, timeout)
            reply = _run(kc, "", timeout, silent=True, expressions={"v": READ})
            value = reply["content"]["user_expressions"]["v"]["data"]["text/plain"]
            peak, net = json.loads(ast.literal_eval(value))
            peaks.append((peak, net))
        return peaks
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def median_cell_peaks(notebook: Path, runs: int = 3) -> list[int]:
    """Per code cell, the median peak rise of ``runs`` counters run at once. One plain kernel's
    other threads (the IOPub thread sending the request's messages, the shell's reply to the
    previous request) allocate inside a cell's window at times on a loaded machine: a CI run
    had one counter read a 120 KiB cell +17.9 KiB high while 8 counters alone agreed within
    64 bytes. Those bytes are another thread's, not the cell's, and land in one run, not in
    most."""
    from concurrent.futures import ThreadPoolExecutor
    from statistics import median_low

    library()  # built once, before the threads
    with ThreadPoolExecutor(runs) as pool:
        counts = list(pool.map(lambda _: cell_peaks(notebook), range(runs)))
    return [median_low(cell) for cell in zip(*([p for p, _ in c] for c in counts))]


def _run(
    kc: object,
    code: str,
    timeout: float,
    silent: bool = False,
    expressions: dict[str, str] | None = None,
) -> dict:
    msg_id = kc.execute(  # type: ignore[attr-defined]
        code, silent=silent, store_history=not silent, user_expressions=expressions or {}
    )
    while True:
        reply: dict = kc.get_shell_msg(timeout=timeout)  # type: ignore[attr-defined]
        if reply["parent_header"].get("msg_id") == msg_id:
            break
    if reply["content"]["status"] != "ok":
        content = reply["content"]
        raise RuntimeError(f"{code[:60]!r}: {content.get('ename')}: {content.get('evalue')}")
    return reply

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator

import pytest

# One torch thread per process (the tests' own and the kernels they start, which inherit it),
# unless asked otherwise, as the browser tests' kernels (ui-tests/playwright.config.ts): three
# workers with a kernel each on two cores, each kernel with torch's default of a thread per
# core, wait in each other's thread pools: the main suite took 256 s and 491 CPU-s that way,
# against 237 and 215 s, 447 and 405 CPU-s with one thread (one session, alternating, on a
# machine that was slower in the one-thread runs). Set before anything imports torch or starts
# the zygote.
os.environ.setdefault("OMP_NUM_THREADS", "1")

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "warm_kernels"))

# The tests' own processes (pytest and its workers) skip jsonschema's optional "iri" grammars
# as `vramscope profile` does (its docstring says why): ~2 s of CPU less in each process that
# imports nbformat. Kernels are other processes, untouched.
from vramscope.cli import _without_iri_grammars

_without_iri_grammars()

# IPython's folder of the kernels the tests start (and of the tests' own shells): one of this
# run's (scripts/test.sh gives one for every suite), never the user's ~/.ipython, whose
# history database every test cell was written into (~10,000 cells a run; a 79 MB file on a
# machine that ran the suites for a while), and whose startup files and config would run in
# the tests' kernels. Removed at the end when made here.
_OWN_IPYTHONDIR = (
    None if os.environ.get("IPYTHONDIR") else tempfile.mkdtemp(prefix="vramscope-ipython-")
)
os.environ["IPYTHONDIR"] = os.environ.get("IPYTHONDIR") or str(_OWN_IPYTHONDIR)

_stop_warm_kernels: Callable[[], None] | None = None


def pytest_configure(config: pytest.Config) -> None:
    """Kernels started by the tests (and by the CLI and nbclient they run) come warm, forked
    with torch imported (test/warm_kernels/zygote.py), unless VRAMSCOPE_COLD_KERNELS=1. Only
    the main process starts the zygote, unless its environment names one that serves already:
    pytest-xdist's workers inherit its environment."""
    global _stop_warm_kernels
    if hasattr(config, "workerinput") or os.environ.get("VRAMSCOPE_COLD_KERNELS") == "1":
        return
    from launch import SOCKET_ENV

    if os.path.exists(os.environ.get(SOCKET_ENV, "")):
        return  # a zygote given by the caller (scripts/test.sh shares one among its suites)
    import zygote

    env, _stop_warm_kernels = zygote.start(tempfile.mkdtemp(prefix="vramscope-warm-kernels-"))
    os.environ.update(env)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _stop_warm_kernels is not None:
        _stop_warm_kernels()
    if _OWN_IPYTHONDIR and not hasattr(config, "workerinput"):
        shutil.rmtree(_OWN_IPYTHONDIR, ignore_errors=True)


@pytest.fixture(scope="session")
def kernel() -> Iterator[object]:
    """One real kernel for all kernel tests, bootstrapped like the front end does."""
    from kernel_harness import BOOTSTRAP, KernelHarness

    harness = KernelHarness()
    reply = harness.execute(BOOTSTRAP, silent=True)
    assert reply["content"]["status"] == "ok", reply["content"]
    yield harness
    harness.close()


@pytest.fixture
def fresh_stream_kernel() -> Iterator[tuple[object, str]]:
    """A new bootstrapped kernel of its own, with a ``stream`` comm open (hello read)."""
    from kernel_harness import BOOTSTRAP, KernelHarness

    harness = KernelHarness()
    try:
        assert harness.execute(BOOTSTRAP, silent=True)["content"]["status"] == "ok"
        stream = harness.comm_open("stream")
        harness.comm_data(stream, "hello")
        yield harness, stream
    finally:
        harness.close()


#: Test files that must not run beside the main suite (scripts/test.sh runs every other file
#: on two pytest-xdist workers, then these, marked ``apart``, on two workers of their own):
#: they bound wall-clock times or rates (sampler batches, the quiet waits, a long cell's
#: records, the 10,000-module answer, /dev/kmsg, the samples of a computing cell), read memory
#: that child processes' reporters sample (DataLoader workers, OOM kills), or read exact bytes
#: where the kernel's own threads, delayed on a busy machine, have shown in a cell's delta
#: before (Run All's 64 MiB cell, the checkpointed region). The main suite keeps both cores
#: ~90% busy; these mostly wait (on samplers, reporters, child processes: one file at a time
#: kept the machine ~35% busy), so two of them at once leave it far from full. Measured on 2
#: cores: 60-63 s one at a time; two at a time 35-42 s, green in 10 of 10 runs, 4 of them with
#: a third process keeping a core busy throughout (46-49 s).
APART_FILES = frozenset(
    {
        "test_cell_batching.py",
        "test_faults_scale.py",
        "test_faults_selfmem.py",
        "test_kernel.py",
        "test_kernel_checkpoint.py",
        "test_kernel_runall.py",
        "test_processes.py",
        "test_processes_oom.py",
        "test_processes_units.py",
        "test_quiet.py",
        "test_sampler.py",
    }
)

#: The longest files (~15-40 s each on one core, longest first, as measured in a fresh-clone
#: run; the apart suite's after the main suite's): on the workers they start first, so that no
#: worker is left running one of them alone at the end (with --no-loadscope-reorder, else
#: pytest-xdist orders files by their number of tests).
LONGEST_FILES = (
    "test_soak.py",
    "test_transparency.py",
    "test_demo_flow.py",
    "test_exact_peak_cli.py",
    "test_kernel_holders_partial.py",
    "test_cli.py",
    "test_exact_peak_transparency.py",
    "test_faults.py",
    "test_cli_demo.py",
    "test_advise_steps.py",
    # the apart suite's (two workers): ~28, 18 and 14 s; its others ~7 s or less
    "test_processes.py",
    "test_kernel_checkpoint.py",
    "test_faults_scale.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in APART_FILES:
            item.add_marker(pytest.mark.apart)
    if os.environ.get("PYTEST_XDIST_WORKER"):  # a pytest-xdist worker: the longest files first
        first = {name: i for i, name in enumerate(LONGEST_FILES)}
        items.sort(key=lambda item: first.get(item.path.name, len(first)))

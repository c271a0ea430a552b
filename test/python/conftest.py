from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

sys.path.insert(0, os.path.dirname(__file__))


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

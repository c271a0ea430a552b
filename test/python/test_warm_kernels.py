"""The warm kernels the test suites start (test/warm_kernels): forked from the zygote with torch
imported, yet to jupyter_client a kernel like any other: interrupted, ended, killed and given
its exit status through the launcher it started; cold where a test or an environment asks."""

from __future__ import annotations

import os
import signal
import time

import pytest

from kernel_harness import KernelHarness

pytestmark = pytest.mark.skipif(
    not os.environ.get("VRAMSCOPE_WARM_KERNELS"),
    reason="no warm-kernel zygote in this run (VRAMSCOPE_COLD_KERNELS=1)",
)

PIDS = "(__import__('os').getpid(), __import__('os').getppid())"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_a_warm_kernel_is_forked_with_torch_imported_and_runs_the_bridge() -> None:
    k = KernelHarness()
    try:
        launcher = k.km.provisioner.pid  # type: ignore[union-attr]
        pid, parent = k.eval(PIDS)
        assert pid != launcher and parent != launcher  # the zygote's child, not the launcher
        assert k.eval("'torch' in __import__('sys').modules") is True
        assert k.execute('__import__("vramscope")._bootstrap()')["content"]["status"] == "ok"
        k.run_ok("import torch\nx = torch.ones(3)\ny = (x * 2).sum().item()")
        assert k.eval("y") == 6.0
        # the kernel's own working directory and environment, not the zygote's
        assert k.eval("__import__('os').getcwd()") == os.getcwd()
        assert k.eval("__import__('os').environ.get('JPY_PARENT_PID')") == str(os.getpid())
    finally:
        k.close()
    assert _gone_within(pid, 10)


def test_cold_when_asked_or_when_the_environment_differs_at_import_time() -> None:
    # a thread count other than the zygote's (conftest.py sets one)
    threads = str(int(os.environ.get("OMP_NUM_THREADS") or "1") + 1)
    for k in (KernelHarness(cold=True), KernelHarness(env={"OMP_NUM_THREADS": threads})):
        try:
            pid, _ = k.eval(PIDS)
            assert pid == k.km.provisioner.pid  # type: ignore[union-attr]
            assert k.eval("'torch' in __import__('sys').modules") is False
        finally:
            k.close()


def test_interrupt_reaches_the_forked_kernel() -> None:
    k = KernelHarness()
    try:
        msg_id = k.send_execute("import time\ntime.sleep(60)")
        time.sleep(1.0)
        k.km.interrupt_kernel()
        reply = k.reply(msg_id, timeout=30)
        assert reply["content"]["status"] == "error"
        assert reply["content"]["ename"] == "KeyboardInterrupt"
        assert k.eval("1 + 1") == 2  # still running
    finally:
        k.close()


def test_a_killed_launcher_takes_its_kernel_and_the_kernel_s_end_comes_back() -> None:
    k = KernelHarness()
    pid, _ = k.eval(PIDS)
    k.km.shutdown_kernel(now=True)  # SIGKILL to the launcher's process group
    k.kc.stop_channels()
    assert _gone_within(pid, 10)

    # the kernel killed (as the OOM killer does): the launcher ends by the same signal
    k = KernelHarness()
    try:
        pid, _ = k.eval(PIDS)
        os.kill(pid, signal.SIGKILL)
        process = k.km.provisioner.process  # type: ignore[union-attr]
        assert process.wait(timeout=30) == -signal.SIGKILL
    finally:
        k.kc.stop_channels()
        k.km.cleanup_resources()

    k = KernelHarness()
    try:
        pid, _ = k.eval(PIDS)
        k.send_execute("import os\nos._exit(3)")
        process = k.km.provisioner.process  # type: ignore[union-attr]
        assert process.wait(timeout=30) == 3
        assert not _alive(pid)
    finally:
        k.kc.stop_channels()
        k.km.cleanup_resources()

"""Deferred: model insight after the execute reply, coalesced, never during a running cell."""

from __future__ import annotations

import asyncio

from vramscope.deferred import Deferred


def test_without_an_event_loop_it_runs_at_once() -> None:
    runs: list[int] = []
    job = Deferred(lambda: runs.append(1))
    job.request()
    assert runs == [1] and not job.pending


def test_runs_after_the_current_callback_and_coalesces() -> None:
    async def main() -> list[str]:
        log: list[str] = []
        job = Deferred(lambda: log.append("work"), min_interval=0.05)
        job.request()
        job.request()  # coalesced with the pending one
        log.append("reply sent")  # what the kernel does before yielding to the loop
        assert job.pending
        await asyncio.sleep(0.01)
        assert log == ["reply sent", "work"]
        job.request()  # sooner than min_interval after the last run: waits for it
        await asyncio.sleep(0.01)
        assert log == ["reply sent", "work"]
        await asyncio.sleep(0.08)
        return log

    assert asyncio.run(main()) == ["reply sent", "work", "work"]


def test_a_running_cell_defers_to_its_own_end_and_flush_and_cancel() -> None:
    async def main() -> list[str]:
        log: list[str] = []
        busy = [True]
        job = Deferred(lambda: log.append("work"), min_interval=0, busy=lambda: busy[0])
        job.request()
        await asyncio.sleep(0.01)
        assert log == [] and not job.pending  # dropped: the cell's end asks again
        busy[0] = False
        job.request()
        job.flush()  # runs now, once
        await asyncio.sleep(0.01)
        assert log == ["work"]
        job.request()
        job.cancel()
        await asyncio.sleep(0.01)
        return log

    assert asyncio.run(main()) == ["work"]

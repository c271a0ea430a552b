"""AfterReply: a cell's follow-up work runs after the reply, or before the next cell starts."""

from __future__ import annotations

import asyncio

from vramscope.after_reply import AfterReply


def _queue(
    busy: list[bool] | None = None, delay_s: float = 0.0
) -> tuple[AfterReply, list[str], list[BaseException]]:
    ran: list[str] = []
    errors: list[BaseException] = []
    flag = busy if busy is not None else [False]
    queue = AfterReply(busy=lambda: flag[0], on_error=errors.append, delay_s=delay_s)
    return queue, ran, errors


def test_without_a_loop_the_work_runs_at_once() -> None:
    queue, ran, _ = _queue()
    queue.submit(lambda: ran.append("a"))
    assert ran == ["a"] and queue.pending == 0


def test_with_a_loop_the_work_waits_for_the_loop() -> None:
    queue, ran, _ = _queue()

    async def cell() -> list[str]:
        queue.submit(lambda: ran.append("a"))
        queue.submit(lambda: ran.append("b"))
        seen = list(ran)  # the hook returns: nothing has run yet
        await asyncio.sleep(0)  # the loop gets to run (ipykernel has sent the reply)
        return seen

    assert asyncio.run(cell()) == []
    assert ran == ["a", "b"]


def test_the_work_waits_the_delay_after_the_reply() -> None:
    queue, ran, _ = _queue(delay_s=0.05)

    async def cell() -> tuple[list[str], list[str]]:
        queue.submit(lambda: ran.append("a"))
        await asyncio.sleep(0)  # the reply has gone out: the front end gets the CPU first
        early = list(ran)
        await asyncio.sleep(0.2)
        return early, list(ran)

    assert asyncio.run(cell()) == ([], ["a"])


def test_a_cell_that_starts_first_flushes_the_queue() -> None:
    queue, ran, _ = _queue()

    async def run_all() -> list[str]:
        queue.submit(lambda: ran.append("cell 1"))
        queue.flush()  # cell 2's pre_run_cell, before its readings
        seen = list(ran)
        await asyncio.sleep(0)
        return seen

    assert asyncio.run(run_all()) == ["cell 1"]
    assert ran == ["cell 1"]  # the cancelled callback did not run it again


def test_a_running_cell_keeps_the_work_for_its_end() -> None:
    busy = [True]
    queue, ran, _ = _queue(busy)

    async def async_cell() -> None:
        queue.submit(lambda: ran.append("inner"))  # a nested cell ended
        await asyncio.sleep(0)  # the outer (async) cell awaits: still running
        assert ran == [] and queue.pending == 1
        busy[0] = False
        queue.submit(lambda: ran.append("outer"))  # the outer cell's post_run_cell
        await asyncio.sleep(0)

    asyncio.run(async_cell())
    assert ran == ["inner", "outer"]


def test_a_failing_job_is_reported_and_the_rest_still_run() -> None:
    queue, ran, errors = _queue()

    def boom() -> None:
        raise RuntimeError("boom")

    async def cell() -> None:
        queue.submit(boom)
        queue.submit(lambda: ran.append("after"))
        await asyncio.sleep(0)

    asyncio.run(cell())
    assert ran == ["after"]
    assert [str(e) for e in errors] == ["boom"]


def test_discard_drops_the_queue() -> None:
    queue, ran, _ = _queue()

    async def cell() -> None:
        queue.submit(lambda: ran.append("a"))
        queue.discard()
        await asyncio.sleep(0)

    asyncio.run(cell())
    assert ran == [] and queue.pending == 0


def test_run_all_sends_each_cell_message_and_one_insight_when_idle() -> None:
    """Quick cells queued back to back: every next cell's pre_run_cell flushes the unkeyed
    work (the cell message) and keeps the keyed one (insight), which the newest replaces;
    it runs once, when the kernel is idle."""
    queue, ran, _ = _queue(delay_s=0.01)

    def cell_message(n: int) -> None:
        ran.append(f"cell {n}")
        queue.submit(lambda: ran.append(f"insight {n}"), key="insight")

    async def run_all() -> list[str]:
        for n in range(1, 4):
            queue.submit(lambda n=n: cell_message(n))  # cell n's post_run_cell
            if n < 3:
                queue.flush(keep_keyed=True)  # cell n+1's pre_run_cell
                assert queue.pending == 1  # the newest insight, waiting
        seen = list(ran)
        await asyncio.sleep(0.05)  # idle: the callback fires
        return seen

    assert asyncio.run(run_all()) == ["cell 1", "cell 2"]
    assert ran == ["cell 1", "cell 2", "cell 3", "insight 3"]
    assert queue.pending == 0


def test_kept_keyed_work_runs_after_the_delay_without_another_submit() -> None:
    queue, ran, _ = _queue(delay_s=0.01)

    async def cell() -> None:
        queue.submit(lambda: ran.append("insight"), key="insight")
        queue.flush(keep_keyed=True)
        assert ran == [] and queue.pending == 1
        await asyncio.sleep(0.05)

    asyncio.run(cell())
    assert ran == ["insight"]


def test_a_run_all_keeps_keyed_work_until_the_kernel_is_idle() -> None:
    """Cells that end less than the delay apart (a Run All: each reply followed at once by the
    next cell) keep the keyed work (insight) queued; it runs once, the delay after the last."""
    # The delay is far longer than a cell here (300 ms against 5 ms), so that a stall of the
    # test process on a loaded machine (the other worker, kernels) cannot pass it between two
    # cells: a 40 ms delay against 15 ms cells failed that way once in a while.
    queue, ran, _ = _queue(delay_s=0.3)
    times: list[float] = []

    async def run_all() -> tuple[list[str], float]:
        loop = asyncio.get_running_loop()
        start = loop.time()
        for _cell in range(8):  # a cell: runs 5 ms (the loop runs between cells), then ends
            queue.flush(keep_keyed=True)  # its pre_run_cell
            await asyncio.sleep(0.005)
            queue.submit(lambda: (ran.append("insight"), times.append(loop.time())), key="ins")
        during = list(ran)
        await asyncio.sleep(0.6)
        return during, start

    during, start = asyncio.run(run_all())
    assert during == []  # 8 cells x 5 ms: the 300 ms delay never passed without a cell ending
    assert ran == ["insight"]
    assert times[0] - start >= 8 * 0.005 + 0.3 - 0.005


def test_a_callback_left_on_a_stopped_loop_does_not_strand_the_work() -> None:
    """IPython in a terminal runs a cell with a top-level ``await`` in a loop that stops after
    it: the callback scheduled there never fires. The next cells (no running loop) run their
    work at once, kept keyed work included, instead of waiting behind that callback."""
    queue, ran, _ = _queue(delay_s=0.01)
    loop = asyncio.new_event_loop()

    async def await_cell() -> None:
        queue.submit(lambda: ran.append("cells#1"), key="cells")  # its post_run_cell

    try:
        loop.run_until_complete(await_cell())
    finally:
        loop.close()
    assert ran == [] and queue.pending == 1  # the loop stopped before the callback fired
    queue.flush(keep_keyed=True)  # the next, plain cell starts
    queue.submit(lambda: ran.append("cells#2"), key="cells")  # ... and ends
    assert ran == ["cells#2"] and queue.pending == 0

"""`Handling`: the count the flusher's inline rule reads, and `answered()`, whose waiters go only after
the finished request's answer is written (the connection's shape: a request task, a writer awaiting it)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import uvloop

from exactly.broker.handling import Handling

Runner = Callable[[Coroutine[Any, Any, None]], None]


@pytest.fixture(params=["asyncio", "uvloop"])
def run(request: pytest.FixtureRequest) -> Runner:
    """The broker runs on uvloop; both loops must run the writer's step before the waiters."""
    if request.param == "uvloop":
        return uvloop.run
    return asyncio.run


def test_counts_and_alone(run: Runner) -> None:
    async def main() -> None:
        handling = Handling()
        assert handling.alone()
        assert handling.answered() is None  # nothing handled: nothing to wait for
        handling.started()
        assert handling.alone()
        handling.started()
        assert not handling.alone()
        handling.finished()
        handling.finished()
        assert handling.count == 0

    run(main())


def test_a_waiter_goes_after_the_writer_wrote_the_answer(run: Runner) -> None:
    events: list[str] = []

    async def main() -> None:
        handling = Handling()
        decided = asyncio.Event()

        async def request() -> str:  # Connection._run: a handler that starts work behind its answer
            await decided.wait()
            return "answer"

        async def writer(task: asyncio.Task[str]) -> None:  # Connection._write_responses
            events.append(f"written {await task}")

        async def behind_the_answer() -> None:  # the markers' flush
            waiter = handling.answered()
            assert waiter is not None
            await waiter
            events.append("released")

        task = asyncio.create_task(request())
        handling.track(task)  # Connection: counted from dispatch
        writing = asyncio.create_task(writer(task))
        await asyncio.sleep(0)
        behind = asyncio.create_task(behind_the_answer())
        await asyncio.sleep(0)
        decided.set()
        await asyncio.gather(writing, behind)

    run(main())
    assert events == ["written answer", "released"]


def test_a_cancelled_waiter_is_skipped(run: Runner) -> None:
    async def main() -> None:
        handling = Handling()
        handling.started()
        gone, kept = handling.answered(), handling.answered()
        assert gone is not None
        assert kept is not None
        gone.cancel()
        handling.finished()
        await kept
        assert gone.cancelled()
        assert handling.answered() is None

    run(main())


def test_tracked_requests_count_from_dispatch_until_done(run: Runner) -> None:
    """A burst dispatched in one loop turn counts as a burst before any handler runs (so the first
    one's flush is not taken for a lone request's), and a request cancelled before its first step is
    counted out."""

    async def main() -> None:
        handling = Handling()
        seen: list[bool] = []

        async def request() -> None:
            seen.append(handling.alone())

        burst = [asyncio.create_task(request()) for _ in range(3)]
        for task in burst:
            handling.track(task)
        assert handling.count == 3
        await asyncio.gather(*burst)
        assert seen == [False, False, False]  # each ran with the other two still counted
        assert handling.count == 0
        never = asyncio.create_task(request())
        handling.track(never)
        never.cancel()
        with pytest.raises(asyncio.CancelledError):
            await never
        assert handling.count == 0
        assert len(seen) == 3  # it never ran

    run(main())

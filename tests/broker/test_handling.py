"""`Handling`: the count the flusher's inline rule reads, and `answered()`, whose waiters go only after
the answer of the request whose work they are is written (the connection's shape: a request task, a
writer awaiting it)."""

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


def test_counts_from_dispatch_until_done(run: Runner) -> None:
    """A burst dispatched in one loop turn counts as a burst before any handler runs (so the first
    one's flush is not taken for a lone request's), and a request cancelled before its first step is
    counted out."""

    async def main() -> None:
        handling = Handling()
        loop = asyncio.get_running_loop()
        seen: list[bool] = []
        assert handling.alone()

        async def request() -> None:
            seen.append(handling.alone())

        burst = [handling.start(loop, request()) for _ in range(3)]
        assert handling.count == 3
        await asyncio.gather(*burst)
        assert seen == [False, False, False]  # each ran with the other two still counted
        await asyncio.sleep(0)
        assert handling.count == 0
        never = handling.start(loop, request())
        never.cancel()
        with pytest.raises(asyncio.CancelledError):
            await never
        await asyncio.sleep(0)
        assert handling.count == 0
        assert len(seen) == 3  # it never ran

    run(main())


def test_a_waiter_goes_after_the_writer_wrote_its_requests_answer(run: Runner) -> None:
    events: list[str] = []

    async def main() -> None:
        handling = Handling()
        loop = asyncio.get_running_loop()
        decided = asyncio.Event()
        assert handling.answered() is None  # no request's work: nothing to wait for

        async def behind_the_answer() -> None:  # the markers, started by the request
            waiter = handling.answered()
            assert waiter is not None
            await waiter
            events.append("released")

        async def request() -> str:  # Connection._run: a handler that starts work behind its answer
            behind.append(asyncio.create_task(behind_the_answer()))
            await decided.wait()
            return "answer"

        async def writer(task: asyncio.Task[str]) -> None:  # Connection._write_responses
            events.append(f"written {await task}")

        behind: list[asyncio.Task[None]] = []
        task = handling.start(loop, request())
        writing = asyncio.create_task(writer(task))
        for _ in range(5):
            await asyncio.sleep(0)
        assert events == []
        decided.set()
        await asyncio.gather(writing, *behind)

    run(main())
    assert events == ["written answer", "released"]


def test_another_requests_end_does_not_release_the_waiter(run: Runner) -> None:
    """The next request (the client's next AddPartitionsToTxn) may itself wait for the work behind the
    answer: finishing it must not be what the work waits for, nor is it needed once the answer is out."""

    async def main() -> None:
        handling = Handling()
        loop = asyncio.get_running_loop()
        decided, other_done, answered = asyncio.Event(), asyncio.Event(), asyncio.Event()
        waiters: list[asyncio.Future[None] | None] = []
        later: list[asyncio.Task[asyncio.Future[None] | None]] = []

        async def after_the_answer() -> asyncio.Future[None] | None:  # more work of the first request
            await answered.wait()
            return handling.answered()

        async def first() -> None:
            waiters.append(handling.answered())
            later.append(asyncio.create_task(after_the_answer()))
            await decided.wait()

        async def other() -> None:
            await other_done.wait()

        one = handling.start(loop, first())
        two = handling.start(loop, other())
        await asyncio.sleep(0)
        (waiter,) = waiters
        assert waiter is not None
        other_done.set()
        await two
        for _ in range(5):
            await asyncio.sleep(0)
        assert not waiter.done()  # the other request's end is not this answer
        decided.set()
        await one
        await waiter
        answered.set()
        assert await later[0] is None  # its request is answered: nothing to wait for

    run(main())

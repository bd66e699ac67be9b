"""HandlingTime counts the time a handler's steps run, not the time it waits; which requests a request
quota exempts; on a manual clock."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

import pytest

from exactly.broker.context import RequestContext
from exactly.broker.throttling import HandlingTime, exempt
from exactly.protocol.api import RequestHeader
from exactly.protocol.messages import ApiKey


class StepClock:
    """A manual clock: the handlers below move it forward by the work they pretend to do."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_only_the_steps_are_counted() -> None:
    clock = StepClock()

    async def handler() -> str:
        clock.now += 0.002  # 2 ms of work
        await asyncio.sleep(0.01)  # waiting: the clock moves on for others, not counted below
        clock.now += 0.003  # 3 ms of work
        return "done"

    async def scenario() -> tuple[str, float]:
        timed = HandlingTime(handler(), clock)

        async def others() -> None:
            await asyncio.sleep(0.005)
            clock.now += 1.0  # another request's work while the handler waits

        other = asyncio.create_task(others())
        result = await timed
        await other
        return result, timed.seconds

    result, seconds = asyncio.run(scenario())
    assert result == "done"
    assert seconds == pytest.approx(0.005)


def test_errors_and_cancellation_reach_the_handler() -> None:
    clock = StepClock()
    seen: list[str] = []

    async def failing() -> None:
        clock.now += 0.001
        raise ValueError("bad")

    async def parked() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            seen.append("cancelled")
            clock.now += 0.004
            raise

    async def scenario() -> float:
        timed = HandlingTime(failing(), clock)
        with pytest.raises(ValueError, match="bad"):
            await timed
        assert timed.seconds == pytest.approx(0.001)
        timed_parked = HandlingTime(parked(), clock)
        task = asyncio.ensure_future(timed_parked)
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return timed_parked.seconds

    assert asyncio.run(scenario()) == pytest.approx(0.004)
    assert seen == ["cancelled"]


def context(key: ApiKey) -> RequestContext:
    return RequestContext(cast(Any, None), RequestHeader(int(key), 0, 1, "c"), 1, "peer")


def test_cluster_actions_are_exempt() -> None:
    assert exempt(context(ApiKey.WRITE_TXN_MARKERS), None)
    assert exempt(context(ApiKey.FETCH), SimpleNamespace(replica_id=1, replica_state=None))
    assert exempt(context(ApiKey.FETCH), SimpleNamespace(replica_state=SimpleNamespace(replica_id=2)))
    assert not exempt(context(ApiKey.FETCH), SimpleNamespace(replica_id=-1, replica_state=None))
    assert not exempt(context(ApiKey.METADATA), None)

"""wait_event: set or timed out, and a cancellation that arrives in the same loop turn as the event is
never lost (Python 3.11's `asyncio.wait_for` loses it, and a broker loop sleeping on an event never
stopped)."""

from __future__ import annotations

import asyncio

import pytest

from exactly.broker.event_waits import wait_event


def test_set_is_true_and_a_timeout_is_false() -> None:
    async def scenario() -> tuple[bool, bool]:
        event = asyncio.Event()
        asyncio.get_running_loop().call_soon(event.set)
        got = await wait_event(event, 5)
        return got, await wait_event(asyncio.Event(), 0.01)

    assert asyncio.run(scenario()) == (True, False)


def test_a_cancellation_in_the_turn_the_event_is_set_stops_a_waiting_loop() -> None:
    async def scenario() -> int:
        event = asyncio.Event()
        rounds = 0

        async def sleeper() -> None:
            nonlocal rounds
            while True:  # the shape of the broker's timers and controller loop
                rounds += 1
                await wait_event(event, 30)
                event.clear()

        task = asyncio.create_task(sleeper())
        await asyncio.sleep(0)  # it waits on the event
        event.set()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            async with asyncio.timeout(5):
                await task
        return rounds

    assert asyncio.run(scenario()) == 1

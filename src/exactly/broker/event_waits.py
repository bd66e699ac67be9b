"""Waiting for an `asyncio.Event` with a time limit, in the broker's long-lived loops.

Not `asyncio.wait_for(event.wait(), timeout)`: on Python 3.11, when the waiting task is cancelled in the
same loop turn as the event is set, `wait_for` returns the event's result and the cancellation is lost
(the task stays "cancelling" and loops on). A loop that sleeps on an event then never stops: a broker's
`stop()` waits for it forever. `asyncio.timeout` keeps the cancellation (it counts it with
`Task.uncancel`), so these waits use it.
"""

from __future__ import annotations

import asyncio

__all__ = ["wait_event"]


async def wait_event(event: asyncio.Event, seconds: float) -> bool:
    """Until `event` is set (True) or `seconds` pass (False); a cancellation always propagates."""
    try:
        async with asyncio.timeout(max(0.0, seconds)):
            await event.wait()
    except TimeoutError:
        return False
    return True

"""Fetch long-poll wake-ups (the part of Kafka's delayed-fetch purgatory one process needs).

A Fetch that finds too little data takes `waiter()` *before* it reads, then waits on it for at most its
`max_wait_ms`; every append (`appended()`, called by the replica manager) completes the current waiter,
so every parked Fetch reads again. Taking the waiter before reading means an append that lands between
the read and the wait is not missed.
"""

from __future__ import annotations

import asyncio


class FetchWakeups:
    def __init__(self) -> None:
        self._waiter: asyncio.Future[None] | None = None

    def waiter(self) -> asyncio.Future[None]:
        """A future that completes at the next append (take it before reading, then wait on it)."""
        if self._waiter is None or self._waiter.done():
            self._waiter = asyncio.get_running_loop().create_future()
        return self._waiter

    def appended(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    @staticmethod
    async def wait(waiter: asyncio.Future[None], seconds: float) -> None:
        await asyncio.wait([waiter], timeout=seconds)

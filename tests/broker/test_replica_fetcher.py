"""The replica fetchers' life cycle: `stop()` ends every fetch loop, even one whose cancellation was
swallowed (asyncio.wait_for in Python 3.11 returns the inner result when the cancellation arrives as the
inner await completes): the broker's shutdown waits for these loops."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from exactly.broker.replica_fetcher import FetcherConfig, ReplicaFetchers, _LeaderFetcher
from exactly.replication.partition import Partition


@dataclass
class _Followed:
    topic: str
    index: int


def test_stop_ends_a_fetch_loop_whose_cancellation_was_swallowed() -> None:
    rounds = 0
    swallowed = 0
    fetching = asyncio.Event()

    async def swallowing_fetch_once(self: _LeaderFetcher) -> bool:
        nonlocal rounds, swallowed
        rounds += 1
        if rounds >= 3:
            fetching.set()
        try:
            await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            if swallowed:  # the first only: a second cancellation ends the loop (no hang when failing)
                raise
            swallowed += 1  # what a swallowed cancellation looks like to the loop: the round just ends
        return True

    async def run() -> None:
        fetchers = ReplicaFetchers(1, lambda broker_id: None, lambda: None, FetcherConfig(backoff_ms=10))
        original = _LeaderFetcher._fetch_once
        _LeaderFetcher._fetch_once = swallowing_fetch_once  # type: ignore[method-assign]
        try:
            partition: Partition = _Followed("t", 0)  # type: ignore[assignment]
            fetcher = _LeaderFetcher(fetchers, 2)
            fetcher.add(partition)
            fetchers._fetchers[2] = fetcher
            await asyncio.wait_for(fetching.wait(), 2)
            stopping = asyncio.ensure_future(fetchers.stop())
            await asyncio.wait([stopping], timeout=2)
            assert fetcher._task.done(), "the fetch loop went on after stop()"
            assert swallowed == 1
            await stopping
        finally:
            fetcher._task.cancel()
            _LeaderFetcher._fetch_once = original  # type: ignore[method-assign]

    asyncio.run(run())

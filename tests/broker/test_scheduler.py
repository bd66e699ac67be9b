"""The scheduler runs periodic work (a failing run is logged and the next one still happens), reads a
callable interval again each time, and cancels everything at stop."""

from __future__ import annotations

import asyncio
import logging

import pytest

from exactly.broker.scheduler import Scheduler
from tests.broker.parts import until


def test_periodic_work_survives_failures_and_stops(caplog: pytest.LogCaptureFixture) -> None:
    async def run() -> None:
        scheduler = Scheduler()
        runs: list[int] = []

        def flaky() -> None:
            runs.append(len(runs))
            if len(runs) == 2:
                raise RuntimeError("boom")

        interval_reads: list[int] = []

        def interval() -> int:
            interval_reads.append(1)
            return 1

        scheduler.every(interval, flaky)
        in_thread: list[int] = []
        scheduler.every(1, lambda: in_thread.append(1), in_thread=True)
        await until(lambda: len(runs) >= 4 and bool(in_thread))
        await scheduler.stop()
        stopped_at = len(runs)
        await asyncio.sleep(0.05)
        assert len(runs) == stopped_at
        assert len(interval_reads) >= 4

    with caplog.at_level(logging.ERROR, logger="exactly.broker.scheduler"):
        asyncio.run(run())
    assert [r.getMessage() for r in caplog.records] == ["periodic task flaky failed"]

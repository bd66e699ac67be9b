"""Periodic work on the event loop (Kafka's `KafkaScheduler`): every service that runs something every so
often asks the one scheduler, which owns the tasks and cancels them at stop.

`every(interval_ms, work)` runs `work` every `interval_ms` (a callable is read again each time: a run-time
config). `in_thread=True` is for work that only flushes or writes checkpoints (thread-safe in storage), so
an fsync never stalls the event loop. A failing run is logged and the next one happens as planned; a full
disk (OSError, KAFKA_STORAGE_ERROR) was already logged once by storage and is retried next time.
`spawn(coroutine)` runs a long-lived task of a service (a timer loop, a background load) under the same
ownership.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from exactly.errors import ErrorCode, KafkaError
from exactly.storage import files

log = logging.getLogger(__name__)

IntervalMs = int | Callable[[], int]


class Scheduler:
    def __init__(self) -> None:
        self._tasks: list[asyncio.Task[None]] = []

    def every(self, interval_ms: IntervalMs, work: Callable[[], object], *, in_thread: bool = False) -> None:
        self._tasks.append(asyncio.create_task(self._repeat(interval_ms, work, in_thread)))

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        self._tasks.append(asyncio.create_task(work))

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    @staticmethod
    async def _repeat(interval_ms: IntervalMs, work: Callable[[], object], in_thread: bool) -> None:
        loop = asyncio.get_running_loop()
        name = getattr(work, "__name__", "periodic work")
        while True:
            await asyncio.sleep((interval_ms() if callable(interval_ms) else interval_ms) / 1000)
            try:
                if in_thread:
                    await loop.run_in_executor(None, work)
                else:
                    work()
            except OSError as e:  # a full disk: logged once by storage, retried next time
                files.storage_error(e, name)
            except KafkaError as e:
                if e.code != ErrorCode.KAFKA_STORAGE_ERROR:
                    log.exception("periodic task %s failed", name)
            except Exception:
                log.exception("periodic task %s failed", name)

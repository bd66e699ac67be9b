"""Group commit for acks=all: appends that arrive while an fsync is running share the next one.

`wait_durable([(log, offset), ...])` returns once every log's recovery point covers its offset. Per log at
most one `PartitionLog.flush()` runs at a time, in a worker thread so the event loop keeps serving; whoever
arrives during a flush waits for it and then, if still not covered, for the one flush that follows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from exactly.errors import KafkaError
from exactly.storage.log import PartitionLog


class Flusher:
    def __init__(self, threads: int = 4) -> None:
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="exactly-flush")
        self._running: dict[int, asyncio.Future[int]] = {}

    async def wait_durable(self, targets: list[tuple[PartitionLog, int]]) -> None:
        """Raises the first KafkaError (KAFKA_STORAGE_ERROR when a flush failed)."""
        await asyncio.gather(*(self._durable(log, offset) for log, offset in targets))

    async def wait_durable_each(self, targets: list[tuple[PartitionLog, int]]) -> list[KafkaError | None]:
        """Like `wait_durable`, but every target's own outcome: None, or the KafkaError its flush raised."""
        results = await asyncio.gather(
            *(self._durable(log, offset) for log, offset in targets), return_exceptions=True
        )
        outcome: list[KafkaError | None] = []
        for result in results:
            if isinstance(result, KafkaError) or result is None:
                outcome.append(result)
            else:
                raise result
        return outcome

    async def _durable(self, log: PartitionLog, offset: int) -> None:
        loop = asyncio.get_running_loop()
        while log.needs_flush(offset) and not log.closed:
            key = id(log)
            running = self._running.get(key)
            if running is None or running.done():  # a finished flush is forgotten only on the next loop turn
                running = loop.run_in_executor(self._executor, log.flush)
                self._running[key] = running
                running.add_done_callback(self._forget(key))
            await asyncio.shield(running)

    def _forget(self, key: int) -> Callable[[asyncio.Future[int]], None]:
        def done(_: asyncio.Future[int]) -> None:
            self._running.pop(key, None)

        return done

    def close(self) -> None:
        self._executor.shutdown(wait=True)

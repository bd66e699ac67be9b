"""Group commit for acks=all: appends that arrive while an fsync is running share the next one.

`wait_durable([(log, offset), ...])` returns once every log's recovery point covers its offset. Per log at
most one `PartitionLog.flush()` runs at a time, in a worker thread so the event loop keeps serving; whoever
arrives during a flush waits for it and then, if still not covered, for the one flush that follows.

Many logs at once (a Produce to thousands of partitions): one fsync each would cost ~0.17 ms apiece on
ext4; instead one worker writes them all out with their fsyncs deferred and makes them durable with one
syncfs(2) of each log dir's file system (`files.synced_together`), then moves their recovery points. Should
that sync fail, the logs are still behind their targets and take the one-by-one path, which reports each
log's own error.

The flushes run on the flusher's own worker threads, handed over through one queue: a finished flush
completes its asyncio future with one `call_soon_threadsafe` (no `concurrent.futures.Future`, no
condition variable, no future chaining: a one-record transaction waits for four fsyncs, an OffsetCommit
for one, and the handover was a tenth of the broker's CPU per commit). One target, the common case,
waits for its log directly (no task per target).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from exactly.errors import KafkaError
from exactly.storage import files
from exactly.storage.log import PartitionLog

GROUP_SYNC_MIN_LOGS = 32  # from this many logs to flush at once, one syncfs beats one fsync each


class Flusher:
    def __init__(self, data_dir: Path | Sequence[Path] | None = None, threads: int = 4) -> None:
        self._data_dir = data_dir
        self._workers = _Workers(threads)
        self._running: dict[int, asyncio.Future[Any]] = {}
        self.group_syncs = 0  # syncfs calls that made many logs durable at once

    async def wait_durable(self, targets: list[tuple[PartitionLog, int]]) -> None:
        """Raises the first KafkaError (KAFKA_STORAGE_ERROR when a flush failed)."""
        if len(targets) == 1:
            log, offset = targets[0]
            if log.needs_flush(offset):
                await self._durable(log, offset)
            return
        await self._flush_together(targets)
        await asyncio.gather(*(self._durable(log, offset) for log, offset in targets))

    async def wait_durable_each(self, targets: list[tuple[PartitionLog, int]]) -> list[KafkaError | None]:
        """Like `wait_durable`, but every target's own outcome: None, or the KafkaError its flush raised."""
        if len(targets) == 1:
            log, offset = targets[0]
            try:
                if log.needs_flush(offset):
                    await self._durable(log, offset)
            except KafkaError as e:
                return [e]
            return [None]
        await self._flush_together(targets)
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

    async def _flush_together(self, targets: list[tuple[PartitionLog, int]]) -> None:
        """One syncfs for every log of `targets` that needs a flush, when there are enough of them."""
        logs = {id(log): log for log, offset in targets if log.needs_flush(offset) and not log.closed}
        if len(logs) < GROUP_SYNC_MIN_LOGS:
            return
        running = self._workers.submit(self._write_out_and_sync, list(logs.values()))
        for key in logs:
            if key not in self._running:  # a one-log flush in progress stays the one to wait for
                self._running[key] = running
                running.add_done_callback(self._forget(key, running))
        await asyncio.shield(running)

    def _write_out_and_sync(self, logs: list[PartitionLog]) -> None:
        """Never raises: a log it could not make durable is left behind its target, for `_durable`."""
        written: list[tuple[PartitionLog, int]] = []
        try:
            with files.synced_together(self._data_dir):
                for log in logs:
                    offset = log.flush_deferred()
                    if offset is not None:
                        written.append((log, offset))
        except (OSError, KafkaError):
            return
        self.group_syncs += 1
        for log, offset in written:
            log.flushed_to(offset)

    async def _durable(self, log: PartitionLog, offset: int) -> None:
        while log.needs_flush(offset) and not log.closed:
            key = id(log)
            running = self._running.get(key)
            if running is None or running.done():  # a finished flush is forgotten only on the next loop turn
                running = self._workers.submit(log.flush)
                self._running[key] = running
                running.add_done_callback(self._forget(key, running))
            await asyncio.shield(running)

    def _forget(self, key: int, future: asyncio.Future[Any]) -> Callable[[asyncio.Future[Any]], None]:
        def done(_: asyncio.Future[Any]) -> None:
            if self._running.get(key) is future:
                self._running.pop(key, None)

        return done

    def close(self) -> None:
        self._workers.close()


class _Workers:
    """Threads that run blocking calls for the event loop: `submit(fn, *args)` returns an asyncio future
    of the loop that submitted it, completed with one `call_soon_threadsafe` when `fn` returns or raises.
    The threads start at the first submit; `close()` lets them finish what was submitted and joins them."""

    def __init__(self, threads: int) -> None:
        self._count = threads
        self._queue: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...], asyncio.Future[Any]] | None]
        self._queue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if not self._threads or self._closed:
            self._start()
        self._queue.put((fn, args, future))
        return future

    def _start(self) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("the flusher is closed")
            while len(self._threads) < self._count:
                thread = threading.Thread(
                    target=self._work, name=f"exactly-flush-{len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                thread.start()

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            fn, args, future = item
            try:
                result = fn(*args)
            except BaseException as e:  # noqa: BLE001 - handed to the waiter, as an executor would
                self._deliver(future, None, e)
            else:
                self._deliver(future, result, None)

    @staticmethod
    def _deliver(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            future.get_loop().call_soon_threadsafe(_complete, future, result, error)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        for _ in threads:
            self._queue.put(None)
        for thread in threads:
            thread.join()


def _complete(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)

"""Group commit for acks=all: appends that arrive while an fsync is running share the next one.

`wait_durable([(log, offset), ...])` returns once every log's recovery point covers its offset. Per log at
most one `PartitionLog.flush()` runs at a time, in a worker thread so the event loop keeps serving; whoever
arrives during a flush waits for it and then, if still not covered, for the one flush that follows.

Many logs at once (a Produce to thousands of partitions): one fsync each would cost ~0.17 ms apiece on
ext4; instead one worker writes them all out with their fsyncs deferred and makes them durable with one
syncfs(2) of each log dir's file system (`files.synced_together`), then moves their recovery points. Should
that sync fail, the logs are still behind their targets and take the one-by-one path, which reports each
log's own error.

The threads are the flusher's own (`threads` of them, started with the first flush), fed through a
`queue.SimpleQueue`; a finished job settles its asyncio future with one `call_soon_threadsafe`. That is
all a flush costs the event loop: no `concurrent.futures.Future` (a Condition each) chained to an asyncio
one, and one Task less per request (a request of one partition awaits its flush directly, with no
`gather`). A waiter that is cancelled does not cancel the flush others wait for (each waits through
`asyncio.shield`).

Rounds (fewer wake-ups): a waiter does not hand its log to a thread by itself. The logs that need a flush
gather during one turn of the event loop (`_round`) and are handed over at its end (`loop.call_soon`)
as jobs of two to `MAX_LOGS_PER_JOB` logs, spread over the threads, each fsyncing its logs one after the
other: one wake-up of a flush thread and one back to the loop per job, not per log. Two fdatasyncs in a
row cost about what two on parallel threads do on this machine's ext4 (measured 0.70 ms against
0.54 ms) and save a wake-up pair; more in one job would serialise what parallel threads do in shared
journal commits (8 logs: 1.6 ms on 4 threads against 3.9 ms on one) and hold every waiter of the job
until its last fsync. (No syncfs here: it would sync every other writer of the file system too; only a
request's own many partitions take that path.) Every log's waiters learn their own log's outcome (a
failed fsync is that log's KAFKA_STORAGE_ERROR, not its job-mates'). `flush_soon` starts a
log's flush without waiting for it (the transaction coordinator's AddPartitionsToTxn, whose record the
Produce that follows waits for).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from exactly.errors import KafkaError
from exactly.storage import files
from exactly.storage.log import PartitionLog

GROUP_SYNC_MIN_LOGS = 32  # from this many logs to flush at once, one syncfs beats one fsync each
MAX_LOGS_PER_JOB = 4  # a round's job fsyncs at most this many logs (their waiters wait for all of them)

Job = Callable[[], None]
_Entry = tuple[PartitionLog, "asyncio.Future[Any]"]  # a log of a round, and the future its waiters await


class Flusher:
    def __init__(self, data_dir: Path | Sequence[Path] | None = None, threads: int = 4) -> None:
        self._data_dir = data_dir
        self._threads = threads
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._workers: list[threading.Thread] = []
        self._start_lock = threading.Lock()
        self._closed = False
        self._running: dict[int, asyncio.Future[Any]] = {}  # per log (by id): the flush in progress
        self._round: dict[int, _Entry] | None = None  # the logs gathered in this loop turn, by id
        self.group_syncs = 0  # syncfs calls that made many logs durable at once
        self.debug_delays: dict[str, float] = {}  # testing only: topic -> seconds each of its flushes sleeps
        self.rounds = 0  # loop turns whose logs were handed to the flush threads
        self.jobs = 0  # thread jobs of those rounds (a wake-up of a flush thread and one back each)

    async def wait_durable(self, targets: list[tuple[PartitionLog, int]]) -> None:
        """Raises the first KafkaError (KAFKA_STORAGE_ERROR when a flush failed)."""
        await self._flush_together(targets)
        if len(targets) == 1:
            await self._durable(*targets[0])
            return
        await asyncio.gather(*(self._durable(log, offset) for log, offset in targets))

    async def wait_durable_each(self, targets: list[tuple[PartitionLog, int]]) -> list[KafkaError | None]:
        """Like `wait_durable`, but every target's own outcome: None, or the KafkaError its flush raised."""
        await self._flush_together(targets)
        if len(targets) == 1:
            try:
                await self._durable(*targets[0])
            except KafkaError as e:
                return [e]
            return [None]
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
        if len(targets) < GROUP_SYNC_MIN_LOGS:
            return
        logs = {id(log): log for log, offset in targets if log.needs_flush(offset) and not log.closed}
        if len(logs) < GROUP_SYNC_MIN_LOGS:
            return
        chosen = list(logs.values())
        running = self._submit(lambda: self._write_out_and_sync(chosen))
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
        key = id(log)
        while log.needs_flush(offset) and not log.closed:
            running = self._running.get(key)
            if running is None or running.done():  # a finished flush is forgotten only on the next loop turn
                running = self._enqueue(log)
            await asyncio.shield(running)

    def flush_soon(self, log: PartitionLog, offset: int) -> None:
        """Start making `log` durable below `offset` (at the end of this loop turn) without waiting: a
        later `wait_durable` finds the flush running, or done."""
        if log.needs_flush(offset) and not log.closed:
            running = self._running.get(id(log))
            if running is None or running.done():
                self._enqueue(log)

    def _enqueue(self, log: PartitionLog) -> asyncio.Future[Any]:
        """Add `log` to this loop turn's round (opening it: handed over when the turn ends); the future
        settles when its job has flushed it."""
        loop = asyncio.get_running_loop()
        current = self._round
        if current is None:
            current = self._round = {}
            loop.call_soon(self._hand_over, current)
        key = id(log)
        future: asyncio.Future[Any] = loop.create_future()
        current[key] = (log, future)
        self._running[key] = future
        return future

    def _hand_over(self, current: dict[int, tuple[PartitionLog, asyncio.Future[Any]]]) -> None:
        """The turn ended: its logs go to the flush threads, `MAX_LOGS_PER_JOB` at most a job, at least
        two, spread over the threads."""
        if self._round is current:
            self._round = None
        entries = list(current.values())
        size = min(MAX_LOGS_PER_JOB, max(2, -(-len(entries) // self._threads)))
        chunks = [entries[i : i + size] for i in range(0, len(entries), size)]
        self.rounds += 1
        self.jobs += len(chunks)
        try:
            if not self._workers:
                self._start()
        except RuntimeError as e:  # closed: nobody flushes any more
            self._chunk_done(entries, {}, e)
            return
        loop = asyncio.get_running_loop()
        for chunk in chunks:
            self._jobs.put(self._chunk_job(loop, chunk))

    def _chunk_job(self, loop: asyncio.AbstractEventLoop, chunk: list[_Entry]) -> Job:
        def job() -> None:
            errors = self._flush_each([log for log, _ in chunk])
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits any more
                loop.call_soon_threadsafe(self._chunk_done, chunk, errors, None)

        return job

    def _chunk_done(
        self, chunk: list[_Entry], errors: dict[int, BaseException], error: BaseException | None
    ) -> None:
        running = self._running
        for log, future in chunk:
            key = id(log)
            if running.get(key) is future:
                del running[key]
            _settle(future, None, errors.get(key, error))

    def _flush_each(self, logs: list[PartitionLog]) -> dict[int, BaseException]:
        """Flush every log, one after the other; each log's error, by id (on a flush thread)."""
        errors: dict[int, BaseException] = {}
        for log in logs:
            if self.debug_delays and log.needs_flush(log.log_end_offset):
                time.sleep(self.debug_delays.get(log.topic, 0.0))
            try:
                log.flush()  # returns at once when already durable
            except BaseException as e:  # noqa: BLE001 (handed to this log's waiters, whatever it is)
                errors[id(log)] = e
        return errors

    def _forget(self, key: int, future: asyncio.Future[Any]) -> Callable[[asyncio.Future[Any]], None]:
        def done(_: asyncio.Future[Any]) -> None:
            if self._running.get(key) is future:
                self._running.pop(key, None)

        return done

    def _submit(self, work: Callable[[], object]) -> asyncio.Future[Any]:
        """Run `work` on a flush thread; the future (of this event loop) gets its result or exception."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()

        def job() -> None:
            try:
                result, error = work(), None
            except BaseException as e:  # noqa: BLE001 (handed to the waiter, whatever it is)
                result, error = None, e
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits any more
                loop.call_soon_threadsafe(_settle, future, result, error)

        if not self._workers:
            self._start()
        self._jobs.put(job)
        return future

    def _start(self) -> None:
        with self._start_lock:
            if self._workers:
                return
            if self._closed:
                raise RuntimeError("the flusher is closed")
            for i in range(self._threads):
                worker = threading.Thread(target=self._work, name=f"exactly-flush_{i}", daemon=True)
                worker.start()
                self._workers.append(worker)

    def _work(self) -> None:
        jobs = self._jobs
        while (job := jobs.get()) is not None:
            job()

    def close(self) -> None:
        """Finish the flushes queued so far, then stop the threads."""
        with self._start_lock:
            self._closed = True
            workers, self._workers = self._workers, []
        for _ in workers:
            self._jobs.put(None)
        for worker in workers:
            worker.join()


def _settle(future: asyncio.Future[Any], result: object, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)

"""Group commit for acks=all: appends that arrive while an fsync is running share the next one.

`wait_durable([(log, offset), ...])` returns once every log's recovery point covers its offset. Per log at
most one `PartitionLog.flush()` runs at a time, in a worker thread so the event loop keeps serving; whoever
arrives during a flush waits for it and then, if still not covered, for the one flush that follows.

Many logs at once (a Produce to thousands of partitions): one fsync each would cost ~0.17 ms apiece on
ext4; instead one worker writes them all out with their fsyncs deferred and makes them durable with one
syncfs(2) of each log dir's file system (`files.synced_together`), then moves their recovery points. Should
that sync fail, the logs are still behind their targets and take the one-by-one path, which reports each
log's own error.

Flushes inline: when `inline_when()` says nothing else is being handled (the broker: no request but
the one waiting; a parked Fetch, a follower's included, counts) and no flush is running, a log is flushed
on the event loop itself. Nobody else needs the loop during that fsync, and the two thread hand-overs it
saves (waking a flush thread, then the loop) are ~100 us of broker CPU: 447 -> 350 us per serial
OffsetCommit (bench/cpu-profile.md). Requests that arrive meanwhile wait in the socket for at most that
fsync. With two requests in flight the threads take the flush, so group commit is unchanged.

Behind an answer: the transaction coordinator's markers start while the EndTxn that decided them is being
answered; flushed at once they would hold that answer for their fsync. `answer_written()` is what they
await first (`TransactionService.write_markers`): when that request is all the loop has (`inline_when()`,
no flush running) it returns once the request is answered (`answered()`: resolved on the loop turn after
the writer wrote the answer of the request whose work this is; exactly.broker.handling), and the flush
that follows runs inline; otherwise it returns at once and the flush goes to the threads while the loop
writes the answer. The inline way saves the two thread hand-overs and the GIL hand-overs around them
(strace of serial one-record transactions: ~15 futex calls and an eventfd write and read per EndTxn).

The threads are the flusher's own (`threads` of them, started with the first flush), fed through a
`queue.SimpleQueue`; a finished job settles its asyncio future with one `call_soon_threadsafe`. That is
all a flush costs the event loop: no `concurrent.futures.Future` (a Condition each) chained to an asyncio
one, and one Task less per request (a request of one partition awaits its flush directly, with no
`gather`). A waiter that is cancelled does not cancel the flush others wait for (each waits through
`asyncio.shield`).
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

Job = Callable[[], None]


class Flusher:
    def __init__(self, data_dir: Path | Sequence[Path] | None = None, threads: int = 4) -> None:
        self._data_dir = data_dir
        self._threads = threads
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._workers: list[threading.Thread] = []
        self._start_lock = threading.Lock()
        self._closed = False
        self._running: dict[int, asyncio.Future[Any]] = {}  # per log (by id): the flush in progress
        self.group_syncs = 0  # syncfs calls that made many logs durable at once
        self.inline_when: Callable[[], bool] | None = None  # nothing else needs the loop: flush inline
        # the broker: a future resolved once the request whose work this is is answered; None: it is
        self.answered: Callable[[], asyncio.Future[None] | None] | None = None
        self.inline_flushes = 0
        self.thread_flushes = 0  # one-log flushes on the threads

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
            *(self._durable(log, offset) for log, offset in targets),
            return_exceptions=True,
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
            log.drop_behind()

    async def _durable(self, log: PartitionLog, offset: int) -> None:
        when = self.inline_when
        alone = when is not None and not self._running and when()
        if alone and log.needs_flush(offset) and not log.closed:
            self.inline_flushes += 1
            log.flush()  # KafkaError (KAFKA_STORAGE_ERROR) as from a flush thread
            return
        while log.needs_flush(offset) and not log.closed:
            key = id(log)
            running = self._running.get(key)
            if running is None or running.done():  # a finished flush is forgotten only on the next loop turn
                running = self._submit(log.flush)
                self.thread_flushes += 1
                self._running[key] = running
                running.add_done_callback(self._forget(key, running))
            await asyncio.shield(running)

    async def answer_written(self) -> bool:
        """True once the answer being written is out, when the loop has nothing else to do; False at once
        when it has (other requests, a flush running): then the threads take the flush. The markers wait
        for it before they are appended (`TransactionService.write_markers`)."""
        when, answered = self.inline_when, self.answered
        if when is None or answered is None or self._running or not when():
            return False
        waiter = answered()
        if waiter is not None:
            await waiter
        return True

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

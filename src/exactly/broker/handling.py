"""The requests being handled now, on every connection: what the flusher asks before an fsync.

`Connection` hands every request's task to `track()` as it dispatches it: the request counts from then
until its task is done (answer encoded, failed, or cancelled, also before its first step). Counting from
dispatch, not from the handler's first step, makes requests read in one loop turn a burst before any of
them runs: the first one's flush sees the others and goes to the threads, the loop appends theirs
meanwhile. Counted from the first step, each would see itself alone and fsync on the loop while the next
waited (2 producers, 1 MiB batches: 497 -> 565 MB/s counted at dispatch, same CPU per GB;
bench/cpu-profile.md). The flusher asks two things (exactly.broker.flusher):

* `alone()`: at most one request is being handled (the one about to wait for its flush), so an fsync may
  run on the event loop itself instead of a flush thread;
* `answered()`: a future resolved once the next request to finish has had its answer written, or None when
  no request is being handled. The transaction coordinator's markers start while the EndTxn that decided
  them is still being handled; their fsync waits for this so that it does not hold that answer.

When is an answer written? When the request's task finishes, its done callbacks are scheduled in the order
they were added: `finished()` (added at dispatch) first, then the wakeup of its connection's writer (which
started awaiting the task later), whose step writes the answer. The waiters are released two turns after
`finished()` (`call_soon` of a `call_soon`): asyncio and uvloop run ready callbacks in the order they were
scheduled, so the writer's step comes first.
"""

from __future__ import annotations

import asyncio
from typing import Any


class Handling:
    def __init__(self) -> None:
        self.count = 0
        self._waiters: list[asyncio.Future[None]] = []

    def track(self, task: asyncio.Future[Any]) -> None:
        """Count `task` as a request being handled until it is done."""
        self.started()
        task.add_done_callback(self._done)

    def started(self) -> None:
        self.count += 1

    def _done(self, _: asyncio.Future[Any]) -> None:
        self.finished()

    def finished(self) -> None:
        self.count -= 1
        if self._waiters:
            waiters, self._waiters = self._waiters, []
            loop = asyncio.get_running_loop()
            loop.call_soon(loop.call_soon, _release, waiters)

    def alone(self) -> bool:
        return self.count <= 1

    def answered(self) -> asyncio.Future[None] | None:
        if not self.count:
            return None
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        return waiter


def _release(waiters: list[asyncio.Future[None]]) -> None:
    for waiter in waiters:
        if not waiter.done():
            waiter.set_result(None)

"""The requests being handled now, on every connection: what the flusher asks before an fsync.

`Connection` calls `started()` before a request's handler runs and `finished()` once it is done (its
answer encoded, or none). The flusher asks two things (exactly.broker.flusher):

* `alone()`: at most one request is being handled (the one about to wait for its flush), so an fsync may
  run on the event loop itself instead of a flush thread;
* `answered()`: a future resolved once the next request to finish has had its answer written, or None when
  no request is being handled. The transaction coordinator's markers start while the EndTxn that decided
  them is still being handled; their fsync waits for this so that it does not hold that answer.

When is an answer written? The request's task finishes right after `finished()`; its connection's writer,
which awaits that task, is woken on the next loop turn and writes the answer in that step. The waiters are
released one turn later (`call_soon` of a `call_soon`): asyncio and uvloop run ready callbacks in the order
they were scheduled, so the writer's step comes first.
"""

from __future__ import annotations

import asyncio


class Handling:
    def __init__(self) -> None:
        self.count = 0
        self._waiters: list[asyncio.Future[None]] = []

    def started(self) -> None:
        self.count += 1

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

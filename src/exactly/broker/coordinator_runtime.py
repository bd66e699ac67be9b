"""The coordinator runtime shared by the group and the transaction coordinators (Kafka's
`CoordinatorRuntime` with its `PartitionWriter`, in the shape one event loop needs).

A coordinator keeps its state in a compacted internal topic (`__consumer_offsets`,
`__transaction_state`), one shard of its pure, synchronous state machine per partition. The runtime is
what turns such a shard into a service:

* **Loading** (`became_leader(partition)`): the partition's records, from its log start to its high
  watermark, are replayed into the shard by the service's `load` function. `load_all()` does it for every
  partition at start-up (one broker leads them all), before the broker listens. `resigned(partition)`
  is the other hook: the partition is no longer ours, its appends answer NOT_COORDINATOR and the
  service's `unload` forgets what the shard held for it. The cluster calls both when leadership moves
  (`leadership_changed`); a new leader loads its partition to the log end (records above its high
  watermark are its own log's, committed once the followers catch up; the answers that could reveal
  them wait for that: `wait_durable`, `wait_partition_durable`).
* **Ownership** (`check_owner(partition)`): every request of a coordinator first asks whether this
  broker coordinates the key's partition: NOT_COORDINATOR when it does not (the client looks the
  coordinator up again), COORDINATOR_LOAD_IN_PROGRESS while the partition is loading.
* **Writing** (`write`): the service has run an operation on its shard and holds the records it returned
  (as one batch) and its result. The runtime appends the batch to the partition through the replica
  manager (as the leader, like any produce), lets the service `replay` the records at once if its shard
  applies records as they are appended (groups), then waits until the batch is durable (fsync, shared
  with concurrent appends), after which the service applies (transactions) and completes its waiters.
  A failed append raises KafkaError with the code a coordinator's client sees (Kafka's
  `appendGroupMetadataErrorToResponseError`), logged once; the service rolls its shard back.
* **Timers** (`DeadlineTimer`): a task sleeps until the shard's next deadline (typed deadline values live
  in the shard) and runs its `tick`; `kick()` wakes it when an operation set an earlier one. Periodic
  scans (offset expiry, transaction timeouts) go to the broker's `Scheduler`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator

from exactly.broker.event_waits import wait_event
from exactly.broker.replica_manager import ReplicaManager
from exactly.broker.topic_manager import TopicManager
from exactly.errors import ErrorCode, KafkaError
from exactly.records.batch import RecordBatch
from exactly.replication.partition import AppendResult, Partition
from exactly.storage.log import Buffer, VerificationGuard, scan_batches
from exactly.storage.producer_state import AppendOrigin

__all__ = ["CoordinatorRuntime", "CoordinatorWriteError", "DeadlineTimer", "append_error"]

log = logging.getLogger(__name__)

_MAX_SLEEP_S = 1.0

ShardLoader = Callable[[int, Iterator[RecordBatch]], int]  # (partition, its batches) -> records replayed


def append_error(code: ErrorCode) -> ErrorCode:
    """The code a client gets when a coordinator append failed (Kafka's
    `appendGroupMetadataErrorToResponseError`)."""
    if code in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return code


class CoordinatorWriteError(KafkaError):
    """A coordinator write failed: `code` is what its client sees (`append_error`), `cause` the append's
    or replication's own code (a service may answer some causes differently: a SyncGroup whose write timed
    out answers REBALANCE_IN_PROGRESS, an offset commit's timeout is returned unchanged)."""

    def __init__(self, code: ErrorCode, cause: ErrorCode, message: str = "") -> None:
        super().__init__(code, message)
        self.cause = cause


_REPLICATION_TIMEOUT_S = 30.0  # a coordinator's acks=all write (Kafka: the request timeout)


class CoordinatorRuntime:
    def __init__(
        self,
        topic: str,
        num_partitions: int,
        segment_bytes: int,
        replicas: ReplicaManager,
        topics: TopicManager,
        load: ShardLoader,
        unload: Callable[[int], None] = lambda partition: None,
        *,
        replication_factor: int = 1,
        min_isr: int = 1,
    ) -> None:
        self.topic = topic
        self.replication_factor = replication_factor
        self.min_isr = min_isr
        self.num_partitions = num_partitions
        self._segment_bytes = segment_bytes
        self._replicas = replicas
        self._topics = topics
        self._load = load
        self._unload = unload
        self._resigned: set[int] = set()  # partitions another broker leads now
        self._loading: set[int] = set()  # partitions being replayed into their shard
        # partition loads since start (Kafka's partition-load-time-avg/max of the coordinator metrics)
        self.loads = 0
        self.load_seconds_total = 0.0
        self.load_seconds_max = 0.0

    # --- the internal topic and its partitions' leadership ---------------------------------------------

    async def ensure_topic(self) -> None:
        """Create the compacted internal topic on first use (one partition per shard)."""
        await self._topics.ensure_internal_topic(
            self.topic, self.num_partitions, self._segment_bytes, self.replication_factor, self.min_isr
        )

    def load_all(self) -> tuple[int, float]:
        """Load every partition this broker leads (start-up): (records replayed, seconds)."""
        start = time.perf_counter()
        count = 0
        for p in range(self._topics.partitions(self.topic)):
            found = self._replicas.partition(self.topic, p)
            if found is not None and not found.is_leader:
                self._resigned.add(p)
                continue
            count += self.became_leader(p)
        return count, time.perf_counter() - start

    def leadership_changed(self, partition: Partition) -> None:
        """The replica manager's hook: a partition of our topic became leader (load it) or follower
        (resign it). Kafka's coordinators follow their topic's leadership the same way."""
        if partition.topic != self.topic:
            return
        if partition.is_leader:
            records = self.became_leader(partition.index)
            log.info("%s-%d: coordinator loaded (%d records)", self.topic, partition.index, records)
        elif partition.index not in self._resigned:
            self.resigned(partition.index)
            log.info("%s-%d: coordinator resigned", self.topic, partition.index)

    def became_leader(self, partition: int) -> int:
        """Replay the partition into its shard; from now on this broker coordinates it. In a cluster
        the replay goes to the log end: what the previous leader acknowledged may still lie above this
        new leader's high watermark (it learns the high watermark on its next fetch)."""
        self._resigned.discard(partition)
        found = self._replicas.partition(self.topic, partition)
        if found is None:
            return 0
        self._loading.add(partition)
        start = time.perf_counter()
        try:
            return self._load(partition, scan_batches(found.log, to_end=self._replicas.cluster))
        finally:
            self._loading.discard(partition)
            took = time.perf_counter() - start
            self.loads += 1
            self.load_seconds_total += took
            self.load_seconds_max = max(self.load_seconds_max, took)

    def is_leader(self, partition: int) -> bool:
        """This broker coordinates the partition (it has not resigned it; in a cluster, it leads it)."""
        if partition in self._resigned:
            return False
        if not self._replicas.cluster:
            return True
        found = self._replicas.partition(self.topic, partition)
        return found is not None and found.is_leader

    def coordinates(self, partition: int) -> bool:
        """This broker answers clients for the partition's keys: it leads it (`is_leader`) and its view of
        leadership is current (a leader cut off from ZooKeeper may already have been replaced). Internal
        bookkeeping (markers reaching the partition, the shard's own transitions) follows `is_leader`."""
        return self.is_leader(partition) and self._replicas.leadership_current()

    def is_loading(self, partition: int) -> bool:
        return partition in self._loading

    @property
    def loading(self) -> bool:
        """Some partition is being loaded (ListGroups answers COORDINATOR_LOAD_IN_PROGRESS meanwhile)."""
        return bool(self._loading)

    def check_owner(self, partition: int) -> None:
        """Raise KafkaError unless this broker coordinates the partition's keys now: NOT_COORDINATOR when
        it does not lead it (or resigned it) or cannot be sure it still does (`coordinates`),
        COORDINATOR_LOAD_IN_PROGRESS while it loads it."""
        if partition in self._loading:
            raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, f"{self.topic}-{partition} is loading")
        if not self.is_leader(partition):
            raise KafkaError(ErrorCode.NOT_COORDINATOR, f"{self.topic}-{partition} is led by another broker")
        if not self._replicas.leadership_current():
            stale = f"{self.topic}-{partition}: this broker's view of its leadership may be stale"
            raise KafkaError(ErrorCode.NOT_COORDINATOR, stale)

    def resigned(self, partition: int) -> None:
        """Another broker leads the partition now: its appends answer NOT_COORDINATOR, its state goes."""
        self._resigned.add(partition)
        self._unload(partition)

    # --- writing ----------------------------------------------------------------------------------------

    async def write(
        self,
        partition: int,
        batch: Buffer,
        what: str,
        *,
        replay: Callable[[AppendResult], None] | None = None,
        verification_guard: VerificationGuard | None = None,
        wait_durable: bool = True,
    ) -> AppendResult:
        """Append `batch`, `replay` it into the shard, then wait until it is durable (unless told not to)."""
        appended = self.append(partition, batch, what, verification_guard=verification_guard)
        if replay is not None:
            replay(appended)
        if wait_durable:
            await self.wait_durable(appended, what)
        return appended

    def append(
        self, partition: int, batch: Buffer, what: str, *, verification_guard: VerificationGuard | None = None
    ) -> AppendResult:
        """Append synchronously (nothing else runs on the event loop in between, so the shard's state
        and its log stay in step). KafkaError: the coordinator client's code."""
        try:
            if partition in self._resigned:
                raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{self.topic}-{partition} moved")
            target = self._replicas.online_partition(self.topic, partition)
            return self._replicas.append_records(
                target, batch, origin=AppendOrigin.COORDINATOR, verification_guard=verification_guard
            )
        except (KafkaError, OSError) as e:
            raise self._failed(e, what) from e

    async def wait_durable(self, appended: AppendResult, what: str) -> None:
        """Durable on this broker (its flush policy) and, in a cluster, on the ISR (acks=all)."""
        try:
            if appended.durable_offset is not None:
                await self._replicas.wait_durable([(appended.partition, appended.durable_offset)])
            if appended.partition.replicated:
                end = appended.info.last_offset + 1
                (code,) = await self._replicas.wait_replicated(
                    [(appended.partition, end)], _REPLICATION_TIMEOUT_S
                )
                if code != ErrorCode.NONE:
                    raise KafkaError(
                        code, f"{self.topic}-{appended.partition.index}: not replicated ({code.name})"
                    )
        except (KafkaError, OSError) as e:
            raise self._failed(e, what) from e

    async def wait_partition_durable(self, partition: int, what: str = "a read") -> None:
        """Everything appended to the partition so far is durable (read-only operations wait for it) and,
        in a cluster, committed in the ISR (a new leader's state loaded from above its high watermark)."""
        found = self._replicas.partition(self.topic, partition)
        if found is None:
            return
        try:
            await self._replicas.wait_end_durable(found)
            if found.replicated:
                end = found.log_end_offset
                if found.high_watermark < end:
                    (code,) = await self._replicas.wait_replicated([(found, end)], _REPLICATION_TIMEOUT_S)
                    if code != ErrorCode.NONE:
                        raise KafkaError(code, f"{self.topic}-{partition}: not replicated ({code.name})")
        except (KafkaError, OSError) as e:
            raise self._failed(e, what) from e

    def _failed(self, e: KafkaError | OSError, what: str) -> CoordinatorWriteError:
        cause = e.code if isinstance(e, KafkaError) else ErrorCode.KAFKA_STORAGE_ERROR
        code = append_error(cause)
        # storage logged its errors; losing leadership is the cluster's ordinary business
        quiet = cause in (ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        log.log(
            logging.DEBUG if quiet else logging.ERROR, "cannot append to %s for %s: %s", self.topic, what, e
        )
        return CoordinatorWriteError(code, cause, str(e))


class DeadlineTimer:
    """Sleeps until a shard's next deadline and runs its `tick(now)`; `kick()` after an operation that
    may have set an earlier deadline."""

    def __init__(
        self,
        name: str,
        next_deadline: Callable[[], int | None],
        tick: Callable[[int], None],
        now: Callable[[], int],
    ) -> None:
        self._name = name
        self._next_deadline = next_deadline
        self._tick = tick
        self._now = now
        self._wakeup = asyncio.Event()
        self._sleep_until: int | None = None

    def kick(self) -> None:
        deadline = self._next_deadline()
        if deadline is not None and (self._sleep_until is None or deadline < self._sleep_until):
            self._wakeup.set()

    async def run(self) -> None:
        while True:
            try:
                now = self._now()
                deadline = self._next_deadline()
                if deadline is not None and deadline <= now:
                    self._tick(now)
                    await asyncio.sleep(0)
                    continue
                self._sleep_until = deadline
                self._wakeup.clear()
                timeout = _MAX_SLEEP_S if deadline is None else min(_MAX_SLEEP_S, (deadline - now) / 1000)
                await wait_event(self._wakeup, timeout)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s timer failed", self._name)
                await asyncio.sleep(0.1)

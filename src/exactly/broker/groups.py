"""The asyncio side of the group coordinator: append its records, wait for them, answer parked requests.

`exactly.group.GroupCoordinator` is synchronous and never touches a socket or a file; this module drives
it on the coordinator runtime (broker/coordinator_runtime.py), which appends, loads and waits:

* `call(op)` runs one coordinator operation, then — before anything else can run on the event loop —
  appends the records it returned to the group's partition of `__consumer_offsets` as one batch and
  replays them (so the coordinator's state changes only through its own log, ARCHITECTURE invariant 2).
  It then waits until that batch (or, when it wrote nothing, the partition up to its end) is durable
  (fsync, shared with concurrent appends), delivers the completions (responses of JoinGroup/SyncGroup
  requests parked earlier) and returns the caller's response, or waits for the caller's own completion
  when it was parked. Responses therefore never reveal state that a crash could take back.
* `read(group_id, op)` is the same for read-only operations (OffsetFetch, DescribeGroups): the answer
  is computed at once and sent when everything it could have seen is durable.
* A timer task sleeps until the coordinator's next deadline (session, join, sync) and runs `tick`;
  another runs offset expiry every `offsets.retention.check.interval.ms`.
* `load()` replays every partition of `__consumer_offsets` at start-up, before the broker listens.

`__consumer_offsets` (compacted, `offsets.topic.num.partitions` partitions) is created on first use.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from exactly.broker.config import BrokerConfig
from exactly.broker.context import RequestContext
from exactly.broker.coordinator_runtime import CoordinatorRuntime, DeadlineTimer
from exactly.broker.replica_manager import ReplicaManager
from exactly.broker.scheduler import Scheduler
from exactly.broker.topic_manager import TopicManager
from exactly.clock import Clock
from exactly.errors import ErrorCode, KafkaError
from exactly.group import ClientInfo, GroupConfig, GroupCoordinator, Parked, Result, build_batch
from exactly.protocol.messages.join_group import JoinGroupResponse
from exactly.protocol.messages.sync_group import SyncGroupResponse
from exactly.records.batch import RecordBatch
from exactly.replication.partition import AppendResult
from exactly.storage.log import PartitionLog, VerificationGuard, scan_batches

__all__ = ["OFFSETS_TOPIC", "GroupService", "load_batches", "load_partition"]

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"

T = TypeVar("T")


class GroupService:
    """Built from what it uses: the broker's configs (a value), the replica manager and topic manager
    (through its `CoordinatorRuntime`), the clock and the scheduler."""

    def __init__(
        self,
        config: BrokerConfig,
        replicas: ReplicaManager,
        topics: TopicManager,
        clock: Clock,
        scheduler: Scheduler,
    ) -> None:
        self._config = config
        self._topics = topics
        self._clock = clock
        self._scheduler = scheduler
        existing = topics.partitions(OFFSETS_TOPIC)
        partitions = existing or config.offsets_topic_num_partitions
        if existing and existing != config.offsets_topic_num_partitions:
            log.warning(
                "%s has %d partitions; offsets.topic.num.partitions=%d is ignored",
                OFFSETS_TOPIC,
                existing,
                config.offsets_topic_num_partitions,
            )
        self.coordinator = GroupCoordinator(
            GroupConfig(
                num_partitions=partitions,
                offsets_retention_ms=config.offsets_retention_ms,
                min_session_timeout_ms=config.group_min_session_timeout_ms,
                max_session_timeout_ms=config.group_max_session_timeout_ms,
                initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
            ),
            clock,
        )
        self.runtime = CoordinatorRuntime(
            OFFSETS_TOPIC,
            partitions,
            config.offsets_topic_segment_bytes,
            replicas,
            topics,
            lambda partition, batches: load_batches(self.coordinator, batches),
            self.coordinator.unload_partition,
            replication_factor=config.offsets_topic_replication_factor,
            min_isr=config.log.min_insync_replicas,
        )
        replicas.leadership_listeners.append(self.runtime.leadership_changed)
        self._timer = DeadlineTimer(
            "group coordinator", self.coordinator.next_deadline, self._tick, clock.monotonic_ms
        )
        self._waiters: dict[int, asyncio.Future[Any]] = {}
        self._deliveries: set[asyncio.Task[None]] = set()
        self.loaded_records = 0
        self.load_seconds = 0.0

    # --- lifecycle ---------------------------------------------------------------------------------------

    def load(self) -> None:
        """Replay every partition of `__consumer_offsets` (start-up, before the broker listens)."""
        self.loaded_records, self.load_seconds = self.runtime.load_all()
        log.info(
            "loaded %d groups (%d records) from %s in %.3f s",
            len(self.coordinator.groups),
            self.loaded_records,
            OFFSETS_TOPIC,
            self.load_seconds,
        )

    def start(self) -> None:
        """Load, then start the timer and offset-expiry tasks (the scheduler owns and cancels them)."""
        self.load()
        self._scheduler.spawn(self._timer.run())
        self._scheduler.every(self._config.offsets_retention_check_interval_ms, self.expire_offsets)

    async def stop(self) -> None:
        for task in list(self._deliveries):
            task.cancel()
        await asyncio.gather(*self._deliveries, return_exceptions=True)
        for future in self._waiters.values():
            if not future.done():
                future.cancel()
        self._waiters.clear()

    def partition_for(self, key: str) -> int:
        """The partition of the internal topic whose leader coordinates `key`."""
        return self.coordinator.partition_for(key)

    async def ensure_topic(self) -> None:
        """Create `__consumer_offsets` on first use (compacted, one partition per coordinator shard)."""
        await self.runtime.ensure_topic()

    @staticmethod
    def client(ctx: RequestContext) -> ClientInfo:
        host = ctx.peer.rsplit(":", 1)[0] if ":" in ctx.peer else ctx.peer
        return ClientInfo(ctx.header.client_id or "", f"/{host}", ctx.version)

    # --- running operations ------------------------------------------------------------------------------

    async def call(
        self,
        op: Callable[[GroupCoordinator], Result[T]],
        verification_guard: VerificationGuard | None = None,
    ) -> T:
        """Run a coordinator operation: append + replay its records, wait for durability, answer.

        A transactional offset commit's records are appended as one transactional batch of its producer
        (checked by `verification_guard`, KIP-890 part 1) and replayed as pending offsets."""
        await self.ensure_topic()
        result = op(self.coordinator)
        future: asyncio.Future[Any] | None = None
        if isinstance(result.response, Parked):
            future = asyncio.get_running_loop().create_future()
            self._waiters[result.response.waiter] = future
        try:
            appended = self._append(result, verification_guard)
        except KafkaError:
            if future is not None and isinstance(result.response, Parked):
                self._waiters.pop(result.response.waiter, None)
            raise
        self._timer.kick()
        await self._deliver(result, appended)
        if future is not None:
            response: T = await future
            return response
        assert not isinstance(result.response, Parked)
        assert result.response is not None
        return result.response

    async def read(self, group_id: str, op: Callable[[GroupCoordinator], T]) -> T:
        """A read-only operation, answered once everything it could have seen is durable."""
        partition = self.coordinator.partition_for(group_id)
        if not self.runtime.is_leader(partition):
            raise KafkaError(ErrorCode.NOT_COORDINATOR, f"{OFFSETS_TOPIC}-{partition} moved")
        response = op(self.coordinator)
        await self.runtime.wait_partition_durable(partition)
        return response

    def _append(
        self, result: Result[Any], verification_guard: VerificationGuard | None = None
    ) -> AppendResult | None:
        """Append and replay `result`'s records (synchronously); on failure answer its completions with
        the error and let the coordinator fall back, then raise KafkaError with the client's code."""
        if not result.records:
            return None
        pid = result.producer_id
        batch = build_batch(
            result.records,
            self._clock.milliseconds(),
            producer_id=pid,
            producer_epoch=result.producer_epoch,
            transactional=pid >= 0,
        )
        try:
            appended = self.runtime.append(
                self.coordinator.partition_for(result.group_id),
                batch,
                f"group {result.group_id!r}",
                verification_guard=verification_guard,
            )
        except KafkaError as e:
            self._fail_completions(result.completions, e.code)
            fallback = self.coordinator.on_append_failed(result)
            self._complete(fallback.completions)
            raise
        for index, record in enumerate(result.records):
            self.coordinator.replay(appended.info.first_offset + index, pid, record)
        return appended

    def complete_transaction(self, partition: int, producer_id: int, committed: bool) -> None:
        """A COMMIT/ABORT marker was appended to `partition`: materialise or drop the pending offsets."""
        del partition  # pending offsets are kept per producer, whatever their partition
        self.coordinator.replay_end_txn_marker(producer_id, committed)

    async def _deliver(self, result: Result[Any], appended: AppendResult | None) -> None:
        """Answer once what `result` wrote (or, writing nothing, could have seen) is durable."""
        if not result.completions and isinstance(result.response, Parked):
            return
        if appended is not None:
            await self.runtime.wait_durable(appended, f"group {result.group_id!r}")
        elif result.group_id:
            await self.runtime.wait_partition_durable(self.coordinator.partition_for(result.group_id))
        self._complete(result.completions)

    def _complete(self, completions: list[tuple[int, Any]]) -> None:
        for waiter, response in completions:
            future = self._waiters.pop(waiter, None)
            if future is not None and not future.done():
                future.set_result(response)

    def _fail_completions(self, completions: list[tuple[int, Any]], code: ErrorCode) -> None:
        failed: list[tuple[int, Any]] = []
        for waiter, response in completions:
            if isinstance(response, JoinGroupResponse):
                failed.append(
                    (
                        waiter,
                        JoinGroupResponse(error_code=code, member_id=response.member_id, protocol_name=None),
                    )
                )
            elif isinstance(response, SyncGroupResponse):
                failed.append((waiter, SyncGroupResponse(error_code=code)))
        self._complete(failed)

    # --- time --------------------------------------------------------------------------------------------

    def _tick(self, now: int) -> None:
        for result in self.coordinator.tick(now):
            self._run_background(result)

    def expire_offsets(self) -> None:
        """offsets.retention.minutes: append tombstones for expired offsets and empty groups."""
        if not self._topics.partitions(OFFSETS_TOPIC):
            return
        for result in self.coordinator.expire_offsets():
            self._run_background(result)

    def _run_background(self, result: Result[Any]) -> None:
        """Apply a result nobody waits for (timers, expiry) and deliver its completions in a task."""
        try:
            appended = self._append(result)
        except KafkaError:
            return
        if result.completions:
            task = asyncio.create_task(self._deliver(result, appended))
            self._deliveries.add(task)
            task.add_done_callback(self._deliveries.discard)


def load_batches(coordinator: GroupCoordinator, batches: Iterable[RecordBatch]) -> int:
    """Replay one partition's batches of `__consumer_offsets` (from its log start to its high watermark)."""
    key_cache: dict[bytes, object] = {}
    return sum(coordinator.load_batch(batch, key_cache) for batch in batches)


def load_partition(coordinator: GroupCoordinator, plog: PartitionLog) -> int:
    """Replay one partition log of `__consumer_offsets`."""
    return load_batches(coordinator, scan_batches(plog))

"""The asyncio side of the group coordinator: append its records, wait for them, answer parked requests.

`exactly.group.GroupCoordinator` is synchronous and never touches a socket or a file; this module drives
it on the coordinator runtime (broker/coordinator_runtime.py), which appends, loads and waits:

* `call(group_id, op)` runs one coordinator operation, then — before anything else can run on the event loop —
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

In a cluster the group coordinator of a group is the leader of its partition of `__consumer_offsets`
(Kafka's `GroupMetadataManager`): `call`, `read` and `list_groups` serve only the groups of partitions
this broker coordinates now (NOT_COORDINATOR otherwise, COORDINATOR_LOAD_IN_PROGRESS while loading), so
nothing is answered from stale or empty state. When the partition moves away (`_resigned`), its groups,
offsets and deadlines are forgotten and its parked JoinGroup/SyncGroup requests answer NOT_COORDINATOR
at once, so their clients find the new coordinator, which loads the partition from its replicated log
(groups, committed offsets, and pending transactional offsets, decided by the markers in that log). A
COMMIT/ABORT marker appended later to a partition this broker leads — by its own transaction coordinator
or by another broker's, through WriteTxnMarkers — reaches the coordinator through the replica manager's
`marker_listeners`. A write that failed answers as Kafka's does: NOT_COORDINATOR when the partition
moved, COORDINATOR_NOT_AVAILABLE when the ISR is too small, REBALANCE_IN_PROGRESS for a SyncGroup whose
assignment could not be replicated in time, REQUEST_TIMED_OUT for an offset commit that could not.

`__consumer_offsets` (compacted, `offsets.topic.num.partitions` partitions) is created on first use.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from exactly.broker.config import BrokerConfig
from exactly.broker.context import RequestContext
from exactly.broker.coordinator_runtime import CoordinatorRuntime, CoordinatorWriteError, DeadlineTimer
from exactly.broker.replica_manager import ReplicaManager
from exactly.broker.scheduler import Scheduler
from exactly.broker.topic_manager import TopicManager
from exactly.clock import Clock
from exactly.errors import ErrorCode, KafkaError
from exactly.group import ClientInfo, GroupConfig, GroupCoordinator, Parked, Result, build_batch
from exactly.group.share.manager import ShareGroupSettings
from exactly.protocol.messages.join_group import JoinGroupResponse
from exactly.protocol.messages.list_groups import ListedGroup
from exactly.protocol.messages.offset_commit import OffsetCommitResponse
from exactly.protocol.messages.sync_group import SyncGroupResponse
from exactly.protocol.messages.txn_offset_commit import TxnOffsetCommitResponse
from exactly.records.batch import RecordBatch
from exactly.replication.partition import AppendResult, Partition
from exactly.storage.log import PartitionLog, VerificationGuard, scan_batches

__all__ = ["OFFSETS_TOPIC", "GroupService", "load_batches", "load_partition", "write_error_answer"]

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
                consumer_session_timeout_ms=config.group_consumer_session_timeout_ms,
                consumer_heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
                consumer_max_size=config.group_consumer_max_size,
                consumer_assignors=config.group_consumer_assignors,
                consumer_migration_policy=config.group_consumer_migration_policy,
            ),
            clock,
            topics=topics.topic_image,
            share=ShareGroupSettings(
                session_timeout_ms=config.group_share_session_timeout_ms,
                heartbeat_interval_ms=config.group_share_heartbeat_interval_ms,
                max_size=config.group_share_max_size,
            ),
        )
        self.runtime = CoordinatorRuntime(
            OFFSETS_TOPIC,
            partitions,
            config.offsets_topic_segment_bytes,
            replicas,
            topics,
            lambda partition, batches: load_batches(self.coordinator, batches, partition),
            self._resigned,
            replication_factor=config.offsets_topic_replication_factor,
            min_isr=config.log.min_insync_replicas,
        )
        replicas.leadership_listeners.append(self.runtime.leadership_changed)
        replicas.marker_listeners.append(self._marker_appended)
        self._timer = DeadlineTimer(
            "group coordinator", self.coordinator.next_deadline, self._tick, clock.monotonic_ms
        )
        self._waiters: dict[int, asyncio.Future[Any]] = {}
        self._waiter_groups: dict[int, str] = {}  # parked request -> its group
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
        self._waiter_groups.clear()

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

    async def check_coordinator(self, group_id: str) -> None:
        """Create __consumer_offsets if needed; KafkaError (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS)
        when this broker does not coordinate `group_id` now."""
        await self.ensure_topic()
        self.runtime.check_owner(self.coordinator.partition_for(group_id))

    async def call(
        self,
        group_id: str,
        op: Callable[[GroupCoordinator], Result[T]],
        verification_guard: VerificationGuard | None = None,
    ) -> T:
        """Run a coordinator operation on `group_id`: append + replay its records, wait for durability,
        answer. KafkaError (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS) when this broker does not
        coordinate the group now, or the client's code when the write failed.

        A transactional offset commit's records are appended as one transactional batch of its producer
        (checked by `verification_guard`, KIP-890 part 1) and replayed as pending offsets."""
        await self.check_coordinator(group_id)
        result = op(self.coordinator)
        future: asyncio.Future[Any] | None = None
        if isinstance(result.response, Parked):
            future = asyncio.get_running_loop().create_future()
            self._waiters[result.response.waiter] = future
            self._waiter_groups[result.response.waiter] = group_id
        try:
            appended = self._append(result, verification_guard)
        except KafkaError:
            if future is not None and isinstance(result.response, Parked):
                self._waiters.pop(result.response.waiter, None)
                self._waiter_groups.pop(result.response.waiter, None)
            raise
        self._timer.kick()
        try:
            await self._deliver(result, appended)
        except CoordinatorWriteError as e:
            raise KafkaError(write_error_answer(e, result.response), e.message) from e
        if future is not None:
            response: T = await future
            return response
        assert not isinstance(result.response, Parked)
        assert result.response is not None
        return result.response

    async def read(self, group_id: str, op: Callable[[GroupCoordinator], T]) -> T:
        """A read-only operation, answered once everything it could have seen is durable (in a cluster:
        committed in the ISR). KafkaError as `call`'s when this broker does not coordinate the group."""
        partition = self.coordinator.partition_for(group_id)
        self.runtime.check_owner(partition)
        response = op(self.coordinator)
        await self.runtime.wait_partition_durable(partition, f"group {group_id!r}")
        return response

    def list_groups(
        self, states: list[str] | None = None, types: list[str] | None = None
    ) -> list[ListedGroup]:
        """ListGroups: the groups of the partitions this broker coordinates now. KafkaError
        COORDINATOR_LOAD_IN_PROGRESS while a partition loads (Kafka's answer: the list would be partial)."""
        if self.runtime.loading:
            raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, f"{OFFSETS_TOPIC} is loading")
        owned = self.runtime.coordinates
        partition_for = self.coordinator.partition_for
        return [g for g in self.coordinator.list_groups(states, types) if owned(partition_for(g.group_id))]

    def _resigned(self, partition: int) -> None:
        """The partition moved to another broker: forget its groups (with their deadlines and offsets)
        and answer their parked JoinGroup/SyncGroup requests NOT_COORDINATOR now (Kafka's
        `onResignation`: the clients look the coordinator up again)."""
        self.coordinator.unload_partition(partition)
        moved = KafkaError(ErrorCode.NOT_COORDINATOR, f"{OFFSETS_TOPIC}-{partition} moved to another broker")
        for waiter, group_id in list(self._waiter_groups.items()):
            if self.coordinator.partition_for(group_id) != partition:
                continue
            del self._waiter_groups[waiter]
            future = self._waiters.pop(waiter, None)
            if future is not None and not future.done():
                future.set_exception(moved)

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
            self._fail_completions(result.completions, e)
            fallback = self.coordinator.on_append_failed(result)
            self._complete(fallback.completions)
            raise
        for index, record in enumerate(result.records):
            self.coordinator.replay(appended.info.first_offset + index, pid, record)
        return appended

    def _marker_appended(self, partition: Partition, producer_id: int, committed: bool) -> None:
        """A COMMIT/ABORT marker was appended to a partition this broker leads (the replica manager's
        hook, whoever sent it): on `__consumer_offsets`, materialise or drop the producer's pending
        offsets of that partition's groups."""
        if partition.topic != OFFSETS_TOPIC or not self.runtime.is_leader(partition.index):
            return
        self.coordinator.replay_end_txn_marker(producer_id, committed, partition.index)

    def complete_transaction(self, partition: int, producer_id: int, committed: bool) -> None:
        """A COMMIT/ABORT marker reached `partition` of `__consumer_offsets` (tests, tools)."""
        self.coordinator.replay_end_txn_marker(producer_id, committed, partition)

    async def _deliver(self, result: Result[Any], appended: AppendResult | None) -> None:
        """Answer once what `result` wrote (or, writing nothing, could have seen) is durable. When that
        fails (the partition moved, the ISR could not take it in time), the completions are answered with
        the error and CoordinatorWriteError is raised."""
        if not result.completions and isinstance(result.response, Parked):
            return
        what = f"group {result.group_id!r}"
        try:
            if appended is not None:
                await self.runtime.wait_durable(appended, what)
            elif result.group_id:
                await self.runtime.wait_partition_durable(
                    self.coordinator.partition_for(result.group_id), what
                )
        except CoordinatorWriteError as e:
            self._fail_completions(result.completions, e)
            raise
        self._complete(result.completions)

    def _complete(self, completions: list[tuple[int, Any]]) -> None:
        for waiter, response in completions:
            self._waiter_groups.pop(waiter, None)
            future = self._waiters.pop(waiter, None)
            if future is not None and not future.done():
                future.set_result(response)

    def _fail_completions(self, completions: list[tuple[int, Any]], error: KafkaError) -> None:
        failed: list[tuple[int, Any]] = []
        for waiter, response in completions:
            code = write_error_answer(error, response)
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
            task = asyncio.create_task(self._deliver_quietly(result, appended))
            self._deliveries.add(task)
            task.add_done_callback(self._deliveries.discard)

    async def _deliver_quietly(self, result: Result[Any], appended: AppendResult | None) -> None:
        with contextlib.suppress(CoordinatorWriteError):  # its completions were answered with the error
            await self._deliver(result, appended)


def write_error_answer(error: KafkaError, response: object) -> ErrorCode:
    """What a request whose coordinator write failed answers (Kafka's `GroupMetadataManager`): a
    SyncGroup whose assignment timed out rebalances, an offset commit's timeout is returned unchanged,
    anything else is the runtime's client code (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, ...)."""
    if isinstance(error, CoordinatorWriteError) and error.cause == ErrorCode.REQUEST_TIMED_OUT:
        if isinstance(response, SyncGroupResponse):
            return ErrorCode.REBALANCE_IN_PROGRESS
        if isinstance(response, OffsetCommitResponse | TxnOffsetCommitResponse):
            return ErrorCode.REQUEST_TIMED_OUT
    return error.code


def load_batches(
    coordinator: GroupCoordinator, batches: Iterable[RecordBatch], partition: int | None = None
) -> int:
    """Replay one partition's batches of `__consumer_offsets` (from its log start to its high watermark,
    or, a new leader in a cluster, to its log end)."""
    key_cache: dict[bytes, object] = {}
    return sum(coordinator.load_batch(batch, key_cache, partition) for batch in batches)


def load_partition(coordinator: GroupCoordinator, plog: PartitionLog) -> int:
    """Replay one partition log of `__consumer_offsets`."""
    return load_batches(coordinator, scan_batches(plog))

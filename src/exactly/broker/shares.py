"""The asyncio side of share groups' record delivery (KIP-932): ShareFetch, ShareAcknowledge, share
sessions, acquisition-lock expiry and `__share_group_state`.

A share partition (`exactly.group.share.partition.SharePartition`) lives on the leader of its topic
partition, made on the first ShareFetch of its group: from the state stored in `__share_group_state`,
or with no state from `share.auto.offset.reset` (latest: the high watermark; earliest: the log start).
This service

* keeps the share sessions (`exactly.group.share.session`) and the share partitions of this broker;
* reads the log for a ShareFetch from the share partition's `fetch_offset()` (to the high watermark, or
  the last stable offset under `share.isolation.level=read_committed`), lets the share partition
  acquire, and returns the batches that hold acquired records; with nothing acquired it waits up to
  MaxWaitMs for an append or a release (`FetchWakeups`). The read is sized to what the window can
  still take (chunks of the bytes per offset seen so far times the offsets wanted), never the client's
  whole MaxBytes: librdkafka asks for 50 MiB, and reading (and classifying) that for a window of 200
  offsets made every fetch cost as much as the log left to read (issue 24);
* applies acknowledgements (ShareAcknowledge, or carried by a ShareFetch) and persists the changed
  partitions before answering, their writes' fsyncs awaited together; a closed or replaced session
  releases what its member held;
* runs a timer over the acquisition locks: expired ones release their records (AVAILABLE, or ARCHIVED
  at the delivery limit), persisted in the background, and wake parked fetches.

Transactional acknowledgements (exactly's extension, docs/share-transactional-acks.md): `add_pending`
validates a member's acknowledgements against the share partition, holds them for a producer's
transaction (`SharePartition.add_pending`), and appends them to the share partition's `__share_group_state`
partition as a transactional record of that producer, which the caller has added to the transaction;
answered once durable. The transaction coordinator's COMMIT/ABORT marker on that partition — appended
here, whoever coordinates — reaches `_marker_appended` through the replica manager's
`marker_listeners`: it applies or releases the producer's pending acks of every share partition whose
state lives there, and a new snapshot follows. The marker is durable before it is answered, and with the
pending-ack records before it, it is the decision: a restart replays both (`_load`) and the open
transactions' pending acks are put back on their share partitions when they are made.

Persistence (`exactly.group.share.records`): every change writes a full ShareSnapshot record of the
share partition to its partition of `__share_group_state` (`abs(javaHash("group:topicId:partition")) %
partitions`, Kafka's key), through a `CoordinatorRuntime`; at start-up the topic is replayed into a
`ShareStateStore`. The share coordinator is this broker's own: in a cluster, a share partition whose
state partition another broker leads cannot persist (its write fails and is logged; exactly has no
Read/WriteShareGroupState RPCs yet).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from typing import Any

from exactly.broker.config import BrokerConfig
from exactly.broker.context import RequestContext
from exactly.broker.coordinator_runtime import CoordinatorRuntime, DeadlineTimer
from exactly.broker.guard import allowed
from exactly.broker.replica_manager import ReplicaManager
from exactly.broker.scheduler import Scheduler
from exactly.broker.topic_manager import TopicManager
from exactly.clock import Clock
from exactly.errors import ErrorCode, KafkaError
from exactly.group.partitioning import partition_for
from exactly.group.share.partition import (
    AckBatch,
    AcquiredRange,
    BatchKind,
    SharePartition,
    ShareState,
)
from exactly.group.share.reading import classify, delivered_bytes
from exactly.group.share.records import (
    SHARE_STATE_TOPIC,
    PendingAckRecord,
    SharePartitionKey,
    ShareStateStore,
    StoredShareState,
    encode_key,
    encode_pending,
    encode_value,
)
from exactly.group.share.session import ShareSession, ShareSessionCache
from exactly.protocol.messages import ApiKey
from exactly.records.batch import RecordBatch
from exactly.records.builder import BatchBuilder
from exactly.records.control import ControlRecordType, parse_end_txn_marker
from exactly.replication.partition import Partition
from exactly.storage.log import Isolation, VerificationGuard

__all__ = ["Acquired", "ShareOffsets", "ShareService", "acknowledge_partitions", "resolve"]

log = logging.getLogger(__name__)

_MIN_READ_BYTES = 16 * 1024  # the smallest log read of a ShareFetch


@dataclass(frozen=True, slots=True)
class ShareOffsets:
    """What DescribeShareGroupOffsets and `exactly groups describe` show of one share partition."""

    start_offset: int  # SPSO
    leader_epoch: int  # of the last state written, -1 when none was
    in_flight: int  # SPEO - SPSO + 1: offsets in the window


@dataclass(frozen=True, slots=True)
class Acquired:
    """What one share partition gave a ShareFetch."""

    records: bytes
    ranges: list[AcquiredRange]


def coordinator_key(key: SharePartitionKey) -> str:
    """Kafka's `SharePartitionKey.asCoordinatorKey`: group:topicId:partition (the id as Kafka prints it)."""
    printed = base64.urlsafe_b64encode(key.topic_id.bytes).rstrip(b"=").decode()
    return f"{key.group_id}:{printed}:{key.partition}"


class ShareService:
    def __init__(
        self,
        config: BrokerConfig,
        replicas: ReplicaManager,
        topics: TopicManager,
        clock: Clock,
        scheduler: Scheduler,
    ) -> None:
        self._config = config
        self._replicas = replicas
        self._topics = topics
        self._clock = clock
        self._scheduler = scheduler
        self.partitions: dict[SharePartitionKey, SharePartition] = {}
        self.sessions = ShareSessionCache()
        self.store = ShareStateStore()
        self._stored: dict[SharePartitionKey, StoredShareState] = {}
        self._topic_names: dict[SharePartitionKey, str] = {}
        existing = topics.partitions(SHARE_STATE_TOPIC)
        self.num_partitions = existing or config.share_coordinator_state_topic_num_partitions
        self.runtime = CoordinatorRuntime(
            SHARE_STATE_TOPIC,
            self.num_partitions,
            config.offsets_topic_segment_bytes,
            replicas,
            topics,
            self._load,
            self._unload,
            replication_factor=config.offsets_topic_replication_factor,
            min_isr=config.log.min_insync_replicas,
        )
        replicas.leadership_listeners.append(self.runtime.leadership_changed)
        replicas.marker_listeners.append(self._marker_appended)
        self._timer = DeadlineTimer("share partitions", self.next_deadline, self._tick, clock.monotonic_ms)
        self._writes: set[asyncio.Task[None]] = set()
        self._bytes_per_offset: dict[SharePartitionKey, float] = {}  # of the last read: sizes the next

    @property
    def enabled(self) -> bool:
        return self._config.group_share_enable

    # --- lifecycle ---------------------------------------------------------------------------------------

    def start(self) -> None:
        if not self.enabled:
            return
        records, seconds = self.runtime.load_all()
        log.info("loaded %d share partition states from %s in %.3f s", records, SHARE_STATE_TOPIC, seconds)
        self._scheduler.spawn(self._timer.run())

    async def stop(self) -> None:
        for task in list(self._writes):
            task.cancel()
        await asyncio.gather(*self._writes, return_exceptions=True)

    def _load(self, partition: int, batches: Iterator[RecordBatch]) -> int:
        count = 0
        for batch in batches:
            producer_id = batch.header().producer_id
            if batch.is_control:
                marker = parse_end_txn_marker(batch)
                self.store.replay_marker(partition, producer_id, marker.type == ControlRecordType.COMMIT)
                continue
            for record in batch.records():
                if record.key is None:
                    continue
                value = None if record.value is None else bytes(record.value)
                self.store.replay(bytes(record.key), value, partition, producer_id)
                count += 1
        return count

    def _unload(self, partition: int) -> None:
        self.store.forget(lambda key: self.state_partition(key) == partition)

    def state_partition(self, key: SharePartitionKey) -> int:
        return partition_for(coordinator_key(key), self.num_partitions)

    # --- share partitions --------------------------------------------------------------------------------

    def share_partition(self, key: SharePartitionKey, topic: str) -> SharePartition:
        """The share partition, made from its stored state or `share.auto.offset.reset` on first use.
        KafkaError NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION when this broker cannot serve it."""
        found = self._replicas.partition(topic, key.partition)
        if found is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{key.partition} is not here")
        if not found.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{topic}-{key.partition} is led elsewhere")
        share = self.partitions.get(key)
        if share is None:
            stored = self.store.get(key)
            if stored is not None:
                state = stored.state
                self._stored[key] = stored
            elif self._config.share_auto_offset_reset == "earliest":
                state = ShareState(found.log_start_offset)
            else:
                state = ShareState(found.high_watermark)
            share = SharePartition(
                state,
                delivery_limit=self._config.group_share_delivery_count_limit,
                lock_duration_ms=self._config.group_share_record_lock_duration_ms,
                max_in_flight=self._config.group_share_partition_max_record_locks,
            )
            for pending in self.store.pending_for(key):  # open transactions' acks, read at load
                share.restore_pending(pending.member_id, pending.producer_id, pending.acks)
            self.partitions[key] = share
            self._topic_names[key] = topic
            log.info("%s: share partition from offset %d", key, share.start_offset)
        if share.start_offset < found.log_start_offset:
            share.advance_start_to(found.log_start_offset)
        return share

    def acquire(
        self, key: SharePartitionKey, topic: str, member_id: str, max_records: int, max_bytes: int
    ) -> Acquired:
        """Read the log from the share partition's `fetch_offset()` and acquire for `member_id`.

        The read is bounded by what the share partition can take, not by the client's `MaxBytes` alone
        (librdkafka asks for 50 MiB, of which a window of `max_in_flight` offsets uses a few hundred KiB):
        it goes in chunks sized from the bytes per offset seen so far, until `max_records` are acquired,
        the window is full, the log (HW or LSO) ends, or `max_bytes` are read."""
        share = self.share_partition(key, topic)
        if not share.can_acquire():
            return Acquired(b"", [])
        found = self._replicas.online_partition(topic, key.partition)
        committed = self._config.share_isolation_level == "read_committed"
        isolation = Isolation.READ_COMMITTED if committed else Isolation.READ_UNCOMMITTED
        now = self._clock.monotonic_ms()
        offset = share.fetch_offset()
        ranges: list[AcquiredRange] = []
        parts: list[bytes] = []
        archived = False
        acquired = 0
        bytes_left = max_bytes
        while bytes_left > 0 and acquired < max(max_records, 1):
            window_end = share.start_offset + share.max_in_flight  # first offset the window cannot take
            wanted = max(1, min(max_records - acquired, window_end - offset))
            chunk = min(bytes_left, max(_MIN_READ_BYTES, int(self._bytes_per_offset.get(key, 1024) * wanted)))
            data = found.read(offset, chunk, isolation, min_one_message=not parts)
            if not data.records and parts and chunk < bytes_left:  # the next batch is larger than guessed
                data = found.read(offset, bytes_left, isolation, min_one_message=False)
            if not data.records:
                break
            read = len(data.records)
            self._bytes_per_offset[key] = read / max(1, data.next_offset - offset)
            batches = classify(data.records, data.aborted_transactions if committed else None)
            got = share.acquire(member_id, batches, max_records - acquired, now)
            archived = archived or any(b.kind is not BatchKind.DATA for b in batches)
            if got:
                ranges.extend(_joined(ranges.pop(), got) if ranges else got)
                parts.append(delivered_bytes(data.records, got))
                acquired += sum(r.last_offset - r.first_offset + 1 for r in got)
            bytes_left -= read
            if data.next_offset >= window_end or data.next_offset <= offset or not share.can_acquire():
                break
            offset = max(data.next_offset, share.fetch_offset())
        if ranges:
            self._timer.kick()
        if archived:
            self._persist_later(key)  # archived markers / aborted records moved SPSO
        return Acquired(b"".join(parts), ranges)

    async def acknowledge(
        self, key: SharePartitionKey, topic: str, member_id: str, acks: list[AckBatch]
    ) -> ErrorCode:
        try:
            share = self.share_partition(key, topic)
        except KafkaError as e:
            return e.code
        code = share.acknowledge(member_id, acks)
        if code == ErrorCode.NONE:
            self._replicas.wakeups.appended()  # released records may be fetched again
            try:
                await self.persist(key)
            except KafkaError as e:
                log.warning("%s: share state not persisted: %s", key, e)
        return code

    # --- acknowledgements inside transactions (docs/share-transactional-acks.md) ----------------------

    async def add_pending(
        self,
        key: SharePartitionKey,
        topic: str,
        member_id: str,
        producer_id: int,
        producer_epoch: int,
        acks: list[AckBatch],
        guard: VerificationGuard | None,
    ) -> ErrorCode:
        """Hold `acks` of `member_id` for the producer's transaction, whose partitions include this share
        partition's `__share_group_state` partition (`guard` checks it at the append): validated and
        applied to the share partition, appended as a transactional record of the producer, durable
        before it returns. A failed append gives back the producer's pending acks of the partition (its
        client got an error: the transaction cannot commit)."""
        try:
            share = self.share_partition(key, topic)
        except KafkaError as e:
            return e.code
        if key not in self._stored and self.store.get(key) is None:
            try:  # a snapshot first, so a commit replayed after a restart has a window to apply to
                await self.persist(key)
            except KafkaError as e:
                return e.code
        code = share.add_pending(member_id, producer_id, acks)
        if code != ErrorCode.NONE:
            return code
        wanted = {o for a in acks for o in range(a.first_offset, a.last_offset + 1)}
        held = tuple((o, t) for o, t in share.pending_of(producer_id) if o in wanted)
        raw_key, raw_value = encode_pending(PendingAckRecord(key, producer_id, member_id, held))
        builder = BatchBuilder(producer_id=producer_id, producer_epoch=producer_epoch, is_transactional=True)
        builder.append(self._clock.milliseconds(), raw_key, raw_value)
        what = f"pending acks of producer {producer_id} on {key}"
        try:
            appended = self.runtime.append(
                self.state_partition(key), builder.build(), what, verification_guard=guard
            )
        except KafkaError as e:
            share.end_pending(producer_id, commit=False)
            self._replicas.wakeups.appended()
            return e.code
        try:
            await self.runtime.wait_durable(appended, what)
        except KafkaError as e:
            return e.code
        return ErrorCode.NONE

    def _marker_appended(self, partition: Partition, producer_id: int, committed: bool) -> None:
        """A COMMIT/ABORT marker reached a partition of `__share_group_state` this broker leads: the
        producer's pending acks there are applied or released, and the changed share partitions
        persisted."""
        if partition.topic != SHARE_STATE_TOPIC:
            return
        self.store.replay_marker(partition.index, producer_id, committed)
        decided = False
        for key, share in self.partitions.items():
            if self.state_partition(key) == partition.index and share.end_pending(producer_id, committed):
                decided = True
                self._persist_later(key)
        if decided:
            self._replicas.wakeups.appended()  # released records may be fetched again

    # --- sessions ----------------------------------------------------------------------------------------

    def release_session(self, session: ShareSession) -> None:
        """A closed, replaced or evicted session: its member's acquired records go back."""
        for topic_id, index in session.partitions:
            key = SharePartitionKey(session.group_id, topic_id, index)
            share = self.partitions.get(key)
            if share is not None and share.release_member(session.member_id):
                self._persist_later(key)
        self._replicas.wakeups.appended()

    # --- persistence -------------------------------------------------------------------------------------

    async def persist(self, key: SharePartitionKey) -> None:
        """Write the share partition's state to `__share_group_state` and wait until it is durable."""
        share = self.partitions.get(key)
        if share is None:
            return
        await self.runtime.ensure_topic()
        now = self._clock.milliseconds()
        previous = self._stored.get(key)
        stored = StoredShareState(
            share.snapshot(),
            snapshot_epoch=(previous.snapshot_epoch + 1) & 0xFFFF if previous else 0,
            state_epoch=previous.state_epoch if previous else 0,
            leader_epoch=max(0, self._leader_epoch(key)),
            create_timestamp=previous.create_timestamp if previous else now,
            write_timestamp=now,
        )
        builder = BatchBuilder()
        builder.append(now, encode_key(key), encode_value(stored))
        partition = self.state_partition(key)
        self._stored[key] = stored
        self.store.states[key] = stored
        await self.runtime.write(partition, builder.build(), f"share state of {key}")

    def _leader_epoch(self, key: SharePartitionKey) -> int:
        topic = self._topic_names.get(key)
        found = self._replicas.partition(topic, key.partition) if topic is not None else None
        return found.leader_epoch if found is not None else 0

    def _persist_later(self, key: SharePartitionKey) -> None:
        async def write() -> None:
            try:
                await self.persist(key)
            except KafkaError as e:
                log.warning("%s: share state not persisted: %s", key, e)

        task = asyncio.get_running_loop().create_task(write())
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    # --- acquisition locks -------------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        deadlines = [d for s in self.partitions.values() if (d := s.next_lock_deadline()) is not None]
        return min(deadlines) if deadlines else None

    def _tick(self, now: int) -> None:
        released = False
        for key, share in self.partitions.items():
            if share.expire_locks(now):
                released = True
                self._persist_later(key)
        if released:
            self._replicas.wakeups.appended()

    # --- administration (Describe/Alter/DeleteShareGroupOffsets) ---------------------------------------

    def group_keys(self, group_id: str) -> list[SharePartitionKey]:
        """The share partitions of `group_id` this broker knows: loaded, or stored in its state partitions."""
        keys = {k for k in self.partitions if k.group_id == group_id}
        keys |= {k for k in self.store.states if k.group_id == group_id}
        return sorted(keys, key=lambda k: (str(k.topic_id), k.partition))

    def knows_group(self, group_id: str) -> bool:
        return bool(self.group_keys(group_id))

    def describe(self, key: SharePartitionKey) -> ShareOffsets | None:
        """SPSO, leader epoch and in-flight count of a share partition; None when it has no state."""
        share = self.partitions.get(key)
        stored = self._stored.get(key) or self.store.get(key)
        epoch = stored.leader_epoch if stored is not None else -1
        if share is not None:
            return ShareOffsets(share.start_offset, epoch, share.in_flight)
        if stored is None:
            return None
        return ShareOffsets(stored.state.start_offset, epoch, SharePartition(stored.state).in_flight)

    async def alter(self, key: SharePartitionKey, start_offset: int) -> None:
        """AlterShareGroupOffsets (the group has no members): the share partition starts again from
        `start_offset` with an empty window, under a new state epoch, written to `__share_group_state`."""
        share = self.partitions.get(key)
        if share is not None:
            share.reset(start_offset)
        previous = self._stored.get(key) or self.store.get(key)
        now = self._clock.milliseconds()
        stored = StoredShareState(
            ShareState(start_offset),
            snapshot_epoch=0,
            state_epoch=(previous.state_epoch + 1) if previous else 0,
            leader_epoch=previous.leader_epoch if previous else 0,
            create_timestamp=now,
            write_timestamp=now,
        )
        self._stored[key] = stored
        self.store.states[key] = stored
        builder = BatchBuilder()
        builder.append(now, encode_key(key), encode_value(stored))
        await self.runtime.ensure_topic()
        await self.runtime.write(self.state_partition(key), builder.build(), f"share state of {key}")

    async def delete(self, key: SharePartitionKey) -> None:
        """DeleteShareGroupOffsets: forget the share partition and write its tombstone; the next fetch
        of the group starts from `share.auto.offset.reset`."""
        self.forget(key)
        builder = BatchBuilder()
        builder.append(self._clock.milliseconds(), encode_key(key), None)
        await self.runtime.ensure_topic()
        await self.runtime.write(self.state_partition(key), builder.build(), f"share state of {key} deleted")

    def forget(self, key: SharePartitionKey) -> None:
        self.partitions.pop(key, None)
        self._bytes_per_offset.pop(key, None)
        self.store.states.pop(key, None)
        self._stored.pop(key, None)
        self._topic_names.pop(key, None)

    def start_offset(self, key: SharePartitionKey) -> int:
        found = self.describe(key)
        return found.start_offset if found is not None else -1

    @staticmethod
    def topic_key(group_id: str, topic_id: uuid.UUID, partition: int) -> SharePartitionKey:
        return SharePartitionKey(group_id, topic_id, partition)


def _joined(last: AcquiredRange, more: list[AcquiredRange]) -> list[AcquiredRange]:
    """`more` after `last`, the two joined when a chunk's first range continues the previous one's."""
    first = more[0]
    if first.first_offset == last.last_offset + 1 and first.delivery_count == last.delivery_count:
        return [AcquiredRange(last.first_offset, first.last_offset, last.delivery_count), *more[1:]]
    return [last, *more]


def resolve(ctx: RequestContext, api: ApiKey, topic_id: uuid.UUID) -> tuple[str | None, ErrorCode]:
    """A topic id's name, or why it cannot be served: UNKNOWN_TOPIC_ID, TOPIC_AUTHORIZATION_FAILED."""
    info = ctx.broker.metadata.by_id(topic_id)
    if info is None:
        return None, ErrorCode.UNKNOWN_TOPIC_ID
    if not allowed(ctx, api, "topic", info.name):
        return None, ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return info.name, ErrorCode.NONE


async def acknowledge_partitions(
    ctx: RequestContext,
    api: ApiKey,
    group_id: str,
    member_id: str,
    acks: dict[tuple[uuid.UUID, int], list[tuple[int, int, list[int]]]],
) -> dict[tuple[uuid.UUID, int], ErrorCode]:
    """Apply each partition's acknowledgement batches (first, last, types): its error code."""
    out: dict[tuple[uuid.UUID, int], ErrorCode] = {}
    applying: dict[tuple[uuid.UUID, int], Coroutine[Any, Any, ErrorCode]] = {}
    for (topic_id, index), batches in acks.items():
        name, error = resolve(ctx, api, topic_id)
        if name is None:
            out[(topic_id, index)] = error
            continue
        key = SharePartitionKey(group_id, topic_id, index)
        wanted = [AckBatch(first, last, tuple(types)) for first, last, types in batches]
        applying[(topic_id, index)] = ctx.broker.shares.acknowledge(key, name, member_id, wanted)
    # the partitions' states are written at once and their fsyncs awaited together, not one after another
    codes = (
        await asyncio.gather(*applying.values())
        if len(applying) > 1
        else [await c for c in applying.values()]
    )
    out.update(zip(applying, codes, strict=True))
    return out


async def offsets_alterable(ctx: RequestContext, group_id: str) -> ErrorCode:
    """Alter/DeleteShareGroupOffsets' check of the group, at its coordinator: NONE for an empty share
    group (or one known only by its stored share-partition state: membership is not persisted),
    NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND; KafkaError NOT_COORDINATOR & co. from the coordinator."""
    if not group_id:
        return ErrorCode.INVALID_GROUP_ID
    found = await ctx.broker.groups.read(group_id, lambda c: c.share_group_offsets_alterable(group_id))
    if found is not None:
        return found
    return ErrorCode.NONE if ctx.broker.shares.knows_group(group_id) else ErrorCode.GROUP_ID_NOT_FOUND

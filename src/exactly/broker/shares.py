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

Persistence: a share partition's state is stored by its share coordinator — the leader of the key's
partition of `__share_group_state` (exactly.broker.share_coordinator), often another broker — through
the persister (exactly.broker.share_persister: in process when the coordinator is this broker, else the
share coordinator RPCs, retried while the coordinator moves or loads). A share partition is loaded on
its first use on this leader (`load`): ReadShareGroupState with the data partition's leader epoch (which
fences the previous leader's writes), or with no state InitializeShareGroupState at
`share.auto.offset.reset`'s offset; fetches and acknowledgements wait for it. Every change is written
as WriteShareGroupState carrying only the ranges that changed since the last successful write
(`state_delta`; the coordinator stores it as a ShareUpdate record), one write at a time per share
partition. A write fenced by a newer leader or state epoch drops the share partition (the next fetch
reads the state again). When this broker stops leading a data partition, or leads it in a new epoch,
its share partitions are dropped: the next leader reads the stored state, in which records acquired
but not acknowledged are AVAILABLE with their delivery counts.

Transactional acknowledgements (exactly's extension, docs/share-transactional-acks.md): `add_pending`
validates a member's acknowledgements against the share partition, holds them for a producer's
transaction (`SharePartition.add_pending`), and has the share coordinator append them to the share
partition's `__share_group_state` partition as a transactional record of that producer, which the caller
has added to the transaction; answered once durable. That needs the share coordinator to be this broker
(the data partition's leader also leads the state partition): elsewhere the record could not be written
as the producer's nor the marker's decision reach the share partition, so the answer is NOT_COORDINATOR
with a message. The transaction coordinator's COMMIT/ABORT marker on that partition is replayed by the
share coordinator's shard (a commit applies the acks to the stored state) and reaches `_decided`: it
applies or releases the producer's pending acks of every share partition held here whose state lives
there, and their new states are written. A share partition loaded while its coordinator is this broker
takes back the pending acks of open transactions from the shard (`pending_for`), in the same step as its
stored state.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from exactly.broker.config import BrokerConfig
from exactly.broker.context import RequestContext
from exactly.broker.coordinator_runtime import DeadlineTimer
from exactly.broker.guard import allowed
from exactly.broker.replica_manager import ReplicaManager
from exactly.broker.scheduler import Scheduler
from exactly.broker.share_coordinator import Decision, ShareCoordinatorService
from exactly.broker.share_persister import SharePersister
from exactly.broker.topic_manager import TopicManager
from exactly.clock import Clock
from exactly.errors import ErrorCode, KafkaError
from exactly.group.share.coordinator import StateWrite
from exactly.group.share.partition import AckBatch, AcquiredRange, BatchKind, SharePartition, ShareState
from exactly.group.share.reading import classify, delivered_bytes
from exactly.group.share.records import PendingAckRecord, SharePartitionKey, state_delta
from exactly.group.share.session import ShareSession, ShareSessionCache
from exactly.protocol.messages import ApiKey
from exactly.replication.partition import Partition
from exactly.storage.log import Isolation, VerificationGuard

__all__ = ["Acquired", "ShareOffsets", "ShareService", "acknowledge_partitions", "resolve"]

log = logging.getLogger(__name__)

_MIN_READ_BYTES = 16 * 1024  # the smallest log read of a ShareFetch
_FENCED = frozenset({ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.FENCED_STATE_EPOCH})


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


@dataclass(slots=True)
class _Loaded:
    """What this leader knows of a share partition's stored state: what it last wrote (or read), under
    which state epoch, in which leader epoch of the data partition it loaded it."""

    persisted: ShareState
    state_epoch: int
    leader_epoch: int
    lock: asyncio.Lock


class ShareService:
    def __init__(
        self,
        config: BrokerConfig,
        replicas: ReplicaManager,
        topics: TopicManager,
        clock: Clock,
        scheduler: Scheduler,
        coordinator: ShareCoordinatorService | None = None,
        persister: SharePersister | None = None,
    ) -> None:
        self._config = config
        self._replicas = replicas
        self._topics = topics
        self._clock = clock
        self._scheduler = scheduler
        self.coordinator = coordinator or ShareCoordinatorService(config, replicas, topics, clock)
        self.persister = persister or SharePersister(config.node_id, self.coordinator)
        self.partitions: dict[SharePartitionKey, SharePartition] = {}
        self.sessions = ShareSessionCache()
        self._loaded: dict[SharePartitionKey, _Loaded] = {}
        self._loading: dict[SharePartitionKey, asyncio.Future[SharePartition]] = {}
        self._topic_names: dict[SharePartitionKey, str] = {}
        replicas.leadership_listeners.append(self._leadership_changed)
        self.coordinator.decision_listeners.append(self._decided)
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
        self.coordinator.start()
        self._scheduler.spawn(self._timer.run())

    async def stop(self) -> None:
        for task in list(self._writes):
            task.cancel()
        await asyncio.gather(*self._writes, return_exceptions=True)
        self.persister.stop()

    def _leadership_changed(self, partition: Partition) -> None:
        """A data partition this broker stopped leading (or leads again): its share partitions go; the
        leader reads their stored state when a fetch comes."""
        gone = [
            k
            for k, topic in self._topic_names.items()
            if topic == partition.topic and k.partition == partition.index
        ]
        for key in gone:
            self._drop(key)
        if gone:
            log.info(
                "%s-%d: leadership moved, %d share partitions dropped",
                partition.topic,
                partition.index,
                len(gone),
            )

    # --- share partitions --------------------------------------------------------------------------------

    def _leader(self, key: SharePartitionKey, topic: str) -> Partition:
        found = self._replicas.partition(topic, key.partition)
        if found is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{key.partition} is not here")
        if not found.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{topic}-{key.partition} is led elsewhere")
        return found

    def share_partition(self, key: SharePartitionKey, topic: str) -> SharePartition:
        """The loaded share partition (`load` first). KafkaError NOT_LEADER_OR_FOLLOWER /
        UNKNOWN_TOPIC_OR_PARTITION when this broker cannot serve it, LEADER_NOT_AVAILABLE (retriable)
        while its state is not loaded in this leader epoch."""
        found = self._leader(key, topic)
        share = self.partitions.get(key)
        loaded = self._loaded.get(key)
        if share is None or loaded is None or loaded.leader_epoch != found.leader_epoch:
            raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"{key}: share partition state not loaded")
        if share.start_offset < found.log_start_offset:
            share.advance_start_to(found.log_start_offset)
        return share

    async def load(self, key: SharePartitionKey, topic: str) -> SharePartition:
        """The share partition, its state read from its share coordinator on first use in this leader
        epoch (one read at a time per key). KafkaError as `share_partition`; LEADER_NOT_AVAILABLE when the
        coordinator cannot be reached (retriable)."""
        found = self._leader(key, topic)
        loaded = self._loaded.get(key)
        if key in self.partitions and loaded is not None and loaded.leader_epoch == found.leader_epoch:
            return self.share_partition(key, topic)
        pending = self._loading.get(key)
        if pending is None:
            pending = asyncio.get_running_loop().create_future()
            self._loading[key] = pending
            try:
                pending.set_result(await self._read_state(key, topic, found))
            except KafkaError as e:
                pending.set_exception(e)
            finally:
                del self._loading[key]
        return await asyncio.shield(pending)

    async def _read_state(self, key: SharePartitionKey, topic: str, found: Partition) -> SharePartition:
        self._drop(key)
        epoch = found.leader_epoch
        for _ in range(3):  # a concurrent initialisation may win: read again
            outcome = await self.persister.read(key, epoch)
            if outcome.code in _FENCED:
                raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{key}: {outcome.message}")
            if outcome.code != ErrorCode.NONE:
                raise KafkaError(
                    ErrorCode.LEADER_NOT_AVAILABLE, f"{key}: state not readable: {outcome.message}"
                )
            stored = outcome.state
            if stored is not None and stored.state.start_offset >= 0:
                state, state_epoch = stored.state, stored.state_epoch
                break
            start = (
                found.log_start_offset
                if self._config.share_auto_offset_reset == "earliest"
                else found.high_watermark
            )
            if stored is not None:  # initialised without a start offset: this leader picks it
                state, state_epoch = ShareState(start), stored.state_epoch
                break
            init = await self.persister.initialize(key, 0, start)
            if init.code == ErrorCode.NONE:
                state, state_epoch = ShareState(start), 0
                break
            if init.code != ErrorCode.FENCED_STATE_EPOCH:
                raise KafkaError(
                    ErrorCode.LEADER_NOT_AVAILABLE, f"{key}: state not initialised: {init.message}"
                )
        else:
            raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"{key}: state initialised concurrently")
        if not found.is_leader or found.leader_epoch != epoch:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{topic}-{key.partition} moved while loading")
        pending: list[PendingAckRecord] = []
        if self.coordinator.is_local(key):
            # the shard now, in one step with its open transactions' pending acks: a marker that decided
            # some while the read was answered is in this state, not in `pending`
            current = self.coordinator.shard.get(key)
            if current is not None and current.state_epoch == state_epoch and current.state.start_offset >= 0:
                state = current.state
            pending = self.coordinator.shard.pending_for(key)
        share = SharePartition(
            state,
            delivery_limit=self._config.group_share_delivery_count_limit,
            lock_duration_ms=self._config.group_share_record_lock_duration_ms,
            max_in_flight=self._config.group_share_partition_max_record_locks,
        )
        for held in pending:
            share.restore_pending(held.member_id, held.producer_id, held.acks)
        self.partitions[key] = share
        self._loaded[key] = _Loaded(state, state_epoch, epoch, asyncio.Lock())
        self._topic_names[key] = topic
        log.info("%s: share partition from offset %d (leader epoch %d)", key, share.start_offset, epoch)
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
            share = await self.load(key, topic)  # not yet loaded here: its state first (then its checks)
        except KafkaError as e:
            return e.code
        code = share.acknowledge(member_id, acks)
        if code == ErrorCode.NONE:
            self._replicas.wakeups.appended()  # released records may be fetched again
            try:
                await self.persist(key)
            except KafkaError as e:
                log.warning("%s: share state not persisted: %s", key, e)
                return e.code
        return code

    # --- acknowledgements inside transactions (docs/share-transactional-acks.md) ----------------------

    def check_pending_path(self, key: SharePartitionKey) -> int:
        """The state partition of `key`, which must be led here for its acks to be held by a transaction.
        KafkaError NOT_COORDINATOR (with why) when another broker leads it (or it is loading:
        COORDINATOR_LOAD_IN_PROGRESS)."""
        partition = self.coordinator.partition_for(key)
        if not self.coordinator.runtime.is_leader(partition):
            raise KafkaError(
                ErrorCode.NOT_COORDINATOR,
                f"{key}: its share state partition {partition} is led by another broker; transactional "
                "share acknowledgements need the topic partition and its __share_group_state partition "
                "led by the same broker",
            )
        self.coordinator.runtime.check_owner(partition)
        return partition

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
            share = await self.load(key, topic)
            self.check_pending_path(key)
        except KafkaError as e:
            return e.code
        code = share.add_pending(member_id, producer_id, acks)
        if code != ErrorCode.NONE:
            return code
        wanted = {o for a in acks for o in range(a.first_offset, a.last_offset + 1)}
        held = tuple((o, t) for o, t in share.pending_of(producer_id) if o in wanted)
        record = PendingAckRecord(key, producer_id, member_id, held)
        try:
            appended = self.coordinator.append_pending(record, producer_epoch, guard)
        except KafkaError as e:
            share.end_pending(producer_id, commit=False)  # not appended: no marker will decide them
            self._replicas.wakeups.appended()
            return e.code
        try:
            await self.coordinator.runtime.wait_durable(appended, f"pending acks of producer {producer_id}")
        except KafkaError as e:  # in the log: the transaction's marker decides them
            return e.code
        return ErrorCode.NONE

    def _decided(self, decision: Decision) -> None:
        """A COMMIT/ABORT marker decided a producer's pending acks in a state partition led here: the
        share partitions held here whose state lives there apply or release them, and write it."""
        decided = False
        for key, share in self.partitions.items():
            if self.coordinator.partition_for(key) != decision.partition:
                continue
            if share.end_pending(decision.producer_id, decision.committed):
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
        """Write what changed in the share partition since its last write to its share coordinator and
        wait until it is stored (durable, replicated). KafkaError NOT_LEADER_OR_FOLLOWER when a newer
        leader or state epoch fenced the write (the share partition is dropped: it is read again),
        LEADER_NOT_AVAILABLE (retriable) when the coordinator could not be reached."""
        loaded = self._loaded.get(key)
        if loaded is None:
            return
        async with loaded.lock:
            share = self.partitions.get(key)
            if share is None or self._loaded.get(key) is not loaded:
                return
            current = share.snapshot()
            previous = loaded.persisted
            delta = state_delta(previous, current)
            if not delta and previous.start_offset == current.start_offset:
                return
            write = StateWrite(loaded.state_epoch, loaded.leader_epoch, current.start_offset, delta)
            outcome = await self.persister.write(key, write)
            if outcome.code in _FENCED:
                log.info(
                    "%s: share state write fenced (%s): the share partition is dropped",
                    key,
                    outcome.code.name,
                )
                if self._loaded.get(key) is loaded:
                    self._drop(key)
                raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{key}: {outcome.message}")
            if outcome.code != ErrorCode.NONE:
                raise KafkaError(
                    ErrorCode.LEADER_NOT_AVAILABLE, f"{key}: state not written: {outcome.message}"
                )
            loaded.persisted = current

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
        """The share partitions of `group_id` this broker knows: loaded here, or stored in the state
        partitions it coordinates."""
        keys = {k for k in self.partitions if k.group_id == group_id}
        keys |= {k for k in self.coordinator.shard.states if k.group_id == group_id}
        return sorted(keys, key=lambda k: (str(k.topic_id), k.partition))

    def knows_group(self, group_id: str) -> bool:
        return bool(self.group_keys(group_id))

    def describe(self, key: SharePartitionKey) -> ShareOffsets | None:
        """SPSO, leader epoch and in-flight count of a share partition; None when it has no state."""
        share = self.partitions.get(key)
        stored = self.coordinator.shard.get(key)
        loaded = self._loaded.get(key)
        epoch = stored.leader_epoch if stored is not None else (loaded.leader_epoch if loaded else -1)
        if share is not None:
            return ShareOffsets(share.start_offset, epoch, share.in_flight)
        if stored is None:
            return None
        return ShareOffsets(stored.state.start_offset, epoch, SharePartition(stored.state).in_flight)

    async def alter(self, key: SharePartitionKey, start_offset: int) -> None:
        """AlterShareGroupOffsets (the group has no members): the share partition starts again from
        `start_offset` with an empty window, under a new state epoch (InitializeShareGroupState), which
        fences the data leader's writes under the old one; it reads the new state. KafkaError when the
        share coordinator cannot do it."""
        summary = await self.persister.summary(key)
        if summary.code != ErrorCode.NONE:
            raise KafkaError(summary.code, summary.message or "")
        state_epoch = summary.state.state_epoch + 1 if summary.state is not None else 0
        outcome = await self.persister.initialize(key, state_epoch, start_offset)
        if outcome.code != ErrorCode.NONE:
            raise KafkaError(outcome.code, outcome.message or "")
        self._drop(key)

    async def delete(self, key: SharePartitionKey) -> None:
        """DeleteShareGroupOffsets: forget the share partition and delete its stored state; the next
        fetch of the group starts from `share.auto.offset.reset`."""
        self.forget(key)
        outcome = await self.persister.delete(key)
        if outcome.code != ErrorCode.NONE:
            raise KafkaError(outcome.code, outcome.message or "")

    def _drop(self, key: SharePartitionKey) -> None:
        """Forget the share partition held here (its stored state stays)."""
        self.partitions.pop(key, None)
        self._loaded.pop(key, None)
        self._bytes_per_offset.pop(key, None)
        self._topic_names.pop(key, None)

    def forget(self, key: SharePartitionKey) -> None:
        self._drop(key)

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

"""The share coordinator (KIP-932; Kafka's `ShareCoordinatorService`): the broker side of
`__share_group_state`, which stores share partitions' delivery state for whichever broker leads their data.

Every broker runs one. It serves the keys (`group:topicId:partition`) whose `__share_group_state`
partition it leads — the share coordinator RPCs InitializeShareGroupState (83), ReadShareGroupState (84),
WriteShareGroupState (85), DeleteShareGroupState (86) and ReadShareGroupStateSummary (87), sent by the
share partitions' persisters (exactly.broker.share_persister), which call it in process when the key's
state partition is led here. Another broker's key answers NOT_COORDINATOR, a partition still loading
COORDINATOR_LOAD_IN_PROGRESS (`CoordinatorRuntime.check_owner`); the persister retries both.

Each operation runs on the pure shard (exactly.group.share.coordinator: checks, and the records to write),
then the runtime appends the records to the key's state partition (acks=all in a cluster), replays them
into the shard at once and waits until they are durable before the answer; a read with nothing to write
waits until what the partition holds is committed (a new leader loads to its log end). Leadership of the
state partitions moves the shard's keys: a partition this broker comes to lead is replayed into it
(snapshots and updates, from the log start), one it stops leading is forgotten.

Transactional acknowledgements (docs/share-transactional-acks.md): `append_pending` appends a share
partition's pending acks to its state partition as a transactional record of the producer, for the
data partition's leader when it is this broker (`is_local`; elsewhere the extension answers
NOT_COORDINATOR). The transaction coordinator's COMMIT/ABORT marker on a state partition led here reaches
`_marker_appended` through the replica manager's `marker_listeners`, whoever sent it: the shard applies or
drops the producer's pending acks there, and `decision_listeners` (the share partitions held on this
broker) hear of it. At load the markers are replayed with the records they decide.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from exactly.broker.config import BrokerConfig
from exactly.broker.coordinator_runtime import CoordinatorRuntime
from exactly.broker.replica_manager import ReplicaManager
from exactly.broker.topic_manager import TopicManager
from exactly.clock import Clock
from exactly.errors import KafkaError
from exactly.group.partitioning import partition_for
from exactly.group.share.coordinator import Outcome, ShareCoordinatorShard, StateWrite
from exactly.group.share.records import (
    SHARE_STATE_TOPIC,
    PendingAckRecord,
    SharePartitionKey,
    coordinator_key,
    encode_pending,
)
from exactly.records.batch import RecordBatch
from exactly.records.builder import BatchBuilder
from exactly.records.control import ControlRecordType, parse_end_txn_marker
from exactly.replication.partition import AppendResult, Partition
from exactly.storage.log import VerificationGuard

__all__ = ["Decision", "ShareCoordinatorService"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Decision:
    """A transaction's marker decided the producer's pending acks of one state partition."""

    partition: int
    producer_id: int
    committed: bool
    records: tuple[PendingAckRecord, ...]


class ShareCoordinatorService:
    def __init__(
        self, config: BrokerConfig, replicas: ReplicaManager, topics: TopicManager, clock: Clock
    ) -> None:
        self._config = config
        self._clock = clock
        self.shard = ShareCoordinatorShard(config.share_coordinator_snapshot_update_records_per_snapshot)
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
        self.decision_listeners: list[Callable[[Decision], None]] = []

    def start(self) -> None:
        records, seconds = self.runtime.load_all()
        log.info("loaded %d share state records from %s in %.3f s", records, SHARE_STATE_TOPIC, seconds)

    def _load(self, partition: int, batches: Iterator[RecordBatch]) -> int:
        count = 0
        for batch in batches:
            producer_id = batch.header().producer_id
            if batch.is_control:
                marker = parse_end_txn_marker(batch)
                self.shard.replay_marker(partition, producer_id, marker.type == ControlRecordType.COMMIT)
                continue
            for record in batch.records():
                if record.key is None:
                    continue
                value = None if record.value is None else bytes(record.value)
                self.shard.replay(bytes(record.key), value, partition, producer_id)
                count += 1
        return count

    def _unload(self, partition: int) -> None:
        self.shard.forget(lambda key: self.partition_for(key) == partition)

    def partition_for(self, key: SharePartitionKey) -> int:
        """The key's partition of `__share_group_state` (Kafka's `ShareCoordinatorService.partitionFor`)."""
        return partition_for(coordinator_key(key), self.num_partitions)

    def is_local(self, key: SharePartitionKey) -> bool:
        """This broker coordinates the key now (leads its state partition, loaded)."""
        return self.runtime.coordinates(self.partition_for(key))

    def partition_for_coordinator_key(self, key: str) -> int:
        """FindCoordinator's key type SHARE: the partition of a `group:topicId:partition` string."""
        return partition_for(key, self.num_partitions)

    # --- the five operations ------------------------------------------------------------------------------

    async def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> Outcome:
        return await self._run(
            key, lambda: self.shard.initialize(key, state_epoch, start_offset, self._now())
        )

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> Outcome:
        return await self._run(key, lambda: self.shard.read(key, leader_epoch))

    async def write(self, key: SharePartitionKey, write: StateWrite) -> Outcome:
        return await self._run(key, lambda: self.shard.write(key, write, self._now()))

    async def delete(self, key: SharePartitionKey) -> Outcome:
        return await self._run(key, lambda: self.shard.delete(key))

    async def summary(self, key: SharePartitionKey, leader_epoch: int) -> Outcome:
        return await self._run(key, lambda: self.shard.summary(key, leader_epoch))

    def _now(self) -> int:
        return self._clock.milliseconds()

    async def _run(self, key: SharePartitionKey, operation: Callable[[], Outcome]) -> Outcome:
        """Check ownership, run `operation` on the shard, write and replay its records, wait until they
        (or, with none, what the partition holds) are durable. KafkaError codes become the outcome's."""
        partition = self.partition_for(key)
        try:
            await self.runtime.ensure_topic()
            self.runtime.check_owner(partition)
            outcome = operation()
            if not outcome.records:
                await self.runtime.wait_partition_durable(partition, f"share state of {key}")
                return outcome
            builder = BatchBuilder()
            now = self._now()
            for record_key, value in outcome.records:
                builder.append(now, record_key, value)
            records = outcome.records

            def replay(_: object) -> None:
                for record_key, value in records:
                    self.shard.replay(record_key, value)

            await self.runtime.write(partition, builder.build(), f"share state of {key}", replay=replay)
            return outcome
        except KafkaError as e:
            return Outcome(e.code, message=e.message or e.code.name)

    # --- transactional acknowledgements (docs/share-transactional-acks.md) ------------------------------

    def append_pending(
        self, record: PendingAckRecord, producer_epoch: int, guard: VerificationGuard | None
    ) -> AppendResult:
        """Append `record` to its state partition as a transactional batch of its producer (`guard`: the
        transaction's check of the append) and replay it into the shard; the caller waits until it is
        durable (`runtime.wait_durable`). KafkaError, nothing appended: NOT_COORDINATOR when the state
        partition is not led here, COORDINATOR_LOAD_IN_PROGRESS, the append's codes."""
        partition = self.partition_for(record.key)
        self.runtime.check_owner(partition)
        raw_key, raw_value = encode_pending(record)
        builder = BatchBuilder(
            producer_id=record.producer_id, producer_epoch=producer_epoch, is_transactional=True
        )
        builder.append(self._now(), raw_key, raw_value)
        what = f"pending acks of producer {record.producer_id} on {record.key}"
        appended = self.runtime.append(partition, builder.build(), what, verification_guard=guard)
        self.shard.replay(raw_key, raw_value, partition, record.producer_id)
        return appended

    def _marker_appended(self, partition: Partition, producer_id: int, committed: bool) -> None:
        """A COMMIT/ABORT marker reached a partition of `__share_group_state` this broker leads: the
        producer's pending acks there are decided, and the share partitions held here hear of it."""
        if partition.topic != SHARE_STATE_TOPIC or not self.runtime.is_leader(partition.index):
            return
        records = self.shard.replay_marker(partition.index, producer_id, committed)
        decision = Decision(partition.index, producer_id, committed, tuple(records))
        for listener in self.decision_listeners:
            listener(decision)

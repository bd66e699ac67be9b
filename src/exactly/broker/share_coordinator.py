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
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from exactly.broker.config import BrokerConfig
from exactly.broker.coordinator_runtime import CoordinatorRuntime
from exactly.broker.replica_manager import ReplicaManager
from exactly.broker.topic_manager import TopicManager
from exactly.clock import Clock
from exactly.errors import KafkaError
from exactly.group.partitioning import partition_for
from exactly.group.share.coordinator import Outcome, ShareCoordinatorShard, StateWrite
from exactly.group.share.records import SHARE_STATE_TOPIC, SharePartitionKey, coordinator_key
from exactly.records.batch import RecordBatch
from exactly.records.builder import BatchBuilder

__all__ = ["ShareCoordinatorService"]

log = logging.getLogger(__name__)


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

    def start(self) -> None:
        records, seconds = self.runtime.load_all()
        log.info("loaded %d share state records from %s in %.3f s", records, SHARE_STATE_TOPIC, seconds)

    def _load(self, partition: int, batches: Iterator[RecordBatch]) -> int:
        count = 0
        for batch in batches:
            if batch.is_control:
                continue
            for record in batch.records():
                if record.key is None:
                    continue
                self.shard.replay(bytes(record.key), None if record.value is None else bytes(record.value))
                count += 1
        return count

    def _unload(self, partition: int) -> None:
        self.shard.forget(lambda key: self.partition_for(key) == partition)

    def partition_for(self, key: SharePartitionKey) -> int:
        """The key's partition of `__share_group_state` (Kafka's `ShareCoordinatorService.partitionFor`)."""
        return partition_for(coordinator_key(key), self.num_partitions)

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

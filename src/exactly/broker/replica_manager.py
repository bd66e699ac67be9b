"""The replica manager (Kafka's `ReplicaManager`): the only way handlers and coordinators reach partition
data. It finds a partition's `Partition` (exactly.replication.partition) over the log manager's logs,
appends through it (leadership, leader epoch, high watermark), waits for the durability an ack needs
(the `Flusher`'s group commit), and wakes parked fetches after every append (`FetchWakeups`).

Partitions are made on first use, over logs the log manager loads lazily; `stop_replica` forgets one when
its topic is deleted. The cluster adds leader and follower transitions here (become-leader,
become-follower, the replica fetcher), not in the handlers.
"""

from __future__ import annotations

from exactly.broker.fetch_wakeups import FetchWakeups
from exactly.broker.flusher import Flusher
from exactly.errors import ErrorCode, KafkaError
from exactly.records.control import EndTxnMarker
from exactly.replication.partition import AppendResult, Partition
from exactly.storage.log import Buffer, VerificationGuard
from exactly.storage.log_manager import LogManager
from exactly.storage.producer_state import AppendOrigin

__all__ = ["DurableTarget", "ReplicaManager"]

DurableTarget = tuple[Partition, int]  # the partition must be fsynced below this offset


class ReplicaManager:
    def __init__(self, logs: LogManager, flusher: Flusher) -> None:
        self.logs = logs
        self.flusher = flusher
        self.wakeups = FetchWakeups()
        self._partitions: dict[tuple[str, int], Partition] = {}

    def partition(self, topic: str, index: int) -> Partition | None:
        """The partition, or None when this broker has no such partition (or its log is offline)."""
        log = self.logs.get_log(topic, index)
        if log is None:
            return None
        key = (topic, index)
        partition = self._partitions.get(key)
        if partition is None or partition.log is not log:
            partition = self._partitions[key] = Partition(log)
        return partition

    def online_partition(self, topic: str, index: int) -> Partition:
        partition = self.partition(topic, index)
        if partition is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{index} does not exist")
        return partition

    def stop_replica(self, topic: str, index: int) -> None:
        """Forget the partition and delete its log (its topic was deleted, or its creation undone)."""
        self._partitions.pop((topic, index), None)
        self.logs.delete_log(topic, index)

    # --- appends -----------------------------------------------------------------------------------------

    def append_records(
        self,
        partition: Partition,
        records: Buffer,
        *,
        required_acks: int = -1,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        verification_guard: VerificationGuard | None = None,
    ) -> AppendResult:
        """Append to `partition` as its leader (KafkaError: the client's code); parked fetches wake up."""
        result = partition.append_records_to_leader(
            records, required_acks=required_acks, origin=origin, verification_guard=verification_guard
        )
        if not result.info.duplicate:
            self.wakeups.appended()
        return result

    def append_end_txn_marker(
        self, topic: str, index: int, producer_id: int, producer_epoch: int, marker: EndTxnMarker
    ) -> AppendResult:
        """One COMMIT/ABORT marker (the WriteTxnMarkers path). KafkaError: the marker's code."""
        partition = self.online_partition(topic, index)
        try:
            result = partition.append_end_txn_marker(producer_id, producer_epoch, marker)
        except OSError as e:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, str(e)) from e
        self.wakeups.appended()
        return result

    # --- durability --------------------------------------------------------------------------------------

    async def wait_durable(self, targets: list[DurableTarget]) -> None:
        """Every target fsynced below its offset (raises the first KafkaError)."""
        await self.flusher.wait_durable([(partition.log, offset) for partition, offset in targets])

    async def wait_durable_each(self, targets: list[DurableTarget]) -> list[KafkaError | None]:
        """Like `wait_durable`, but each target's own outcome: None, or its KafkaError."""
        return await self.flusher.wait_durable_each(
            [(partition.log, offset) for partition, offset in targets]
        )

    async def wait_end_durable(self, partition: Partition) -> None:
        """Everything appended to `partition` so far is durable (when its flush policy asks for it)."""
        end = partition.durable_offset(partition.log_end_offset)
        if end is not None:
            await self.wait_durable([(partition, end)])

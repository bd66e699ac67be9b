"""A partition as its replica sees it (Kafka's `Partition`): leadership, the leader epoch and the high
watermark, above the `PartitionLog` that stores it.

Storage appends and reads; it never decides what is committed. That is this object's job: the leader
appends a producer's batches stamped with its leader epoch, then moves the high watermark to what every
in-sync replica has. With one broker the in-sync replicas are the leader alone, so the high watermark
follows the log end offset after each append, as it always has here. The replicated cluster adds
followers, the ISR and elections to this object; the broker's replica manager drives it.

Acks: `append_records_to_leader` answers whether the producer's ack must wait for an fsync
(`AppendResult.durable_offset`): acks=all on a topic whose flush policy says acks wait for the disk
(`LogConfig.ack_waits_for_fsync`), and only when the batch is not already durable.

Leader epochs (`check_leader_epoch`): a client that names a current leader epoch newer than ours gets
UNKNOWN_LEADER_EPOCH (its metadata is ahead of this broker), an older one FENCED_LEADER_EPOCH (its
metadata is stale); -1 means the client does not check.
"""

from __future__ import annotations

from dataclasses import dataclass

from exactly.errors import ErrorCode, KafkaError
from exactly.records.control import EndTxnMarker
from exactly.storage.config import LogConfig
from exactly.storage.log import (
    Buffer,
    FetchDataInfo,
    Isolation,
    LogAppendInfo,
    PartitionLog,
    TimestampAndOffset,
    VerificationGuard,
)
from exactly.storage.producer_state import AppendOrigin, ProducerInfo

__all__ = ["AppendResult", "Partition"]

NO_EPOCH_CHECK = -1


@dataclass(slots=True)  # not frozen: one per produced partition, and a frozen one costs 0.3 us more
class AppendResult:
    partition: Partition
    info: LogAppendInfo
    durable_offset: int | None  # the ack waits until the log is fsynced below this offset (None: at once)


class Partition:
    __slots__ = ("is_leader", "leader_epoch", "log")

    def __init__(self, log: PartitionLog, leader_epoch: int | None = None) -> None:
        self.log = log
        self.leader_epoch = log.leader_epoch if leader_epoch is None else leader_epoch
        self.is_leader = True  # one broker leads every partition it has

    @property
    def topic(self) -> str:
        return self.log.topic

    @property
    def index(self) -> int:
        return self.log.partition

    @property
    def config(self) -> LogConfig:
        return self.log.config

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        return self.log.last_stable_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    def check_leader_epoch(self, current_leader_epoch: int) -> ErrorCode:
        if current_leader_epoch == NO_EPOCH_CHECK or current_leader_epoch == self.leader_epoch:
            return ErrorCode.NONE
        if current_leader_epoch > self.leader_epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        return ErrorCode.FENCED_LEADER_EPOCH

    def append_records_to_leader(
        self,
        records: Buffer,
        *,
        required_acks: int = -1,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        verification_guard: VerificationGuard | None = None,
    ) -> AppendResult:
        """Append as the leader, then move the high watermark (KafkaError: the code the client sees)."""
        self._require_leader()
        info = self.log.append_as_leader(
            records, leader_epoch=self.leader_epoch, origin=origin, verification_guard=verification_guard
        )
        if not info.duplicate:
            self.maybe_increment_high_watermark()
        return AppendResult(self, info, self.durable_offset(info.last_offset + 1, required_acks))

    def append_end_txn_marker(
        self, producer_id: int, producer_epoch: int, marker: EndTxnMarker, *, required_acks: int = -1
    ) -> AppendResult:
        """A COMMIT/ABORT control batch for `producer_id` (WriteTxnMarkers, coordinator origin)."""
        self._require_leader()
        info = self.log.append_end_txn_marker(
            producer_id, producer_epoch, marker, leader_epoch=self.leader_epoch
        )
        self.maybe_increment_high_watermark()
        return AppendResult(self, info, self.durable_offset(info.last_offset + 1, required_acks))

    def read(
        self, fetch_offset: int, max_bytes: int, isolation: Isolation, *, min_one_message: bool = True
    ) -> FetchDataInfo:
        """Whole batches from `fetch_offset`, below the high watermark (or the LSO for read_committed)."""
        return self.log.read(fetch_offset, max_bytes, isolation, min_one_message)

    def offset_for_timestamp(self, timestamp: int, isolation: Isolation) -> TimestampAndOffset | None:
        return self.log.offset_for_timestamp(timestamp, isolation)

    def end_offset_for_epoch(self, requested_epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch as the leader answers it: (epoch, end offset) from the log's leader-epoch
        cache ((-1, -1): unknown)."""
        return self.log.end_offset_for_epoch(requested_epoch)

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords on the leader: move the log start offset (at most to the high watermark)."""
        self._require_leader()
        return self.log.delete_records_before(offset)

    def producer_infos(self) -> list[ProducerInfo]:
        return self.log.producer_infos()

    def maybe_increment_high_watermark(self) -> None:
        """The ISR is this replica alone: everything it has is committed."""
        self.log.update_high_watermark(self.log.log_end_offset)

    def durable_offset(self, end: int, required_acks: int = -1) -> int | None:
        """`end` if an answer about the data below it must wait for an fsync (acks=all under a flush
        policy that waits for the disk, and not durable yet), else None."""
        log = self.log
        if required_acks == -1 and log.config.ack_waits_for_fsync and log.needs_flush(end):
            return end
        return None

    def _require_leader(self) -> None:
        if not self.is_leader:  # cheap when it leads: called on every append
            raise KafkaError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER, f"this broker does not lead {self.topic}-{self.index}"
            )

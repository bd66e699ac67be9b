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

ListOffsets after an election (Kafka's `fetchOffsetForTimestamp`): a new leader's high watermark waits for
its followers, so it may lie below what the previous leader had already exposed. Until it reaches the
start of the leader's epoch, a client's "latest" (and a timestamp lookup past what it may read) answers
OFFSET_NOT_AVAILABLE (retriable) rather than an offset that went backwards.

Leader epochs (`check_leader_epoch`): a client that names a current leader epoch newer than ours gets
UNKNOWN_LEADER_EPOCH (its metadata is ahead of this broker), an older one FENCED_LEADER_EPOCH (its
metadata is stale); -1 means the client does not check.

Replication (Kafka's ZooKeeper-mode `Partition`; ../shared/reference/replication.md §3-§4). A partition
of a replicated topic knows its assignment (`replicas`), the committed ISR and the partition epoch (the
state znode's version), and on the leader one `FollowerState` per follower:

- each follower fetch sets that follower's log end offset to its fetch offset and, when it reached the
  leader's log end (or the one the leader had at its previous fetch), its last caught-up time;
- the high watermark is the least log end offset over the *maximal* ISR (the committed ISR plus a
  pending expansion; a pending shrink still counts the removed member), only ever moves forward, and does
  not move while the ISR is smaller than `min.insync.replicas` (Kafka 3.7's freeze, KAFKA-15583);
- after a leader change follower log end offsets are unknown, so a new leader's high watermark waits
  until every ISR member has fetched once;
- acks=all is refused before the append (NOT_ENOUGH_REPLICAS) while the ISR is below the minimum, and
  answered once the high watermark passes the batch (`replication_outcome`);
- a follower joins the ISR when its log end offset reaches the high watermark and the start of the
  leader's current epoch; it leaves when it has not caught up for `replica.lag.time.max.ms`. Either is
  one proposed ISR (`pending_isr`) that the broker writes to ZooKeeper conditionally on the partition
  epoch: a leader cut off from ZooKeeper can never shrink the ISR to itself and ack alone.

Single broker: the replicas are this broker alone and there are no followers, so the high watermark
follows the log end after each append, as it always has.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from exactly.errors import ErrorCode, KafkaError
from exactly.records.control import EndTxnMarker
from exactly.storage.config import LogConfig
from exactly.storage.log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    Buffer,
    FetchDataInfo,
    Isolation,
    LogAppendInfo,
    PartitionLog,
    TimestampAndOffset,
    VerificationGuard,
)
from exactly.storage.producer_state import AppendOrigin, ProducerInfo

__all__ = ["AppendResult", "FollowerState", "Partition"]

NO_EPOCH_CHECK = -1


@dataclass(slots=True)  # not frozen: one per produced partition, and a frozen one costs 0.3 us more
class AppendResult:
    partition: Partition
    info: LogAppendInfo
    durable_offset: int | None  # the ack waits until the log is fsynced below this offset (None: at once)


NO_LEADER = -1
UNKNOWN_OFFSET = -1


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower (Kafka's `Replica`): updated by each of its fetches."""

    broker_id: int
    log_end_offset: int = UNKNOWN_OFFSET  # unknown until its first fetch after this leader took over
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    last_fetch_leader_log_end: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET  # the follower's, as its last fetch said (-1: not sent)

    def caught_up(
        self, fetch_offset: int, leader_log_end: int, now_ms: int, log_start_offset: int = UNKNOWN_OFFSET
    ) -> None:
        self.log_start_offset = log_start_offset
        if fetch_offset >= leader_log_end:
            self.last_caught_up_ms = now_ms
        elif fetch_offset >= self.last_fetch_leader_log_end:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_ms = now_ms
        self.last_fetch_leader_log_end = leader_log_end


class Partition:
    __slots__ = (
        "followers",
        "is_leader",
        "isr",
        "leader_epoch",
        "leader_epoch_start_offset",
        "leader_id",
        "local_id",
        "log",
        "partition_epoch",
        "pending_isr",
        "replicas",
    )

    def __init__(self, log: PartitionLog, leader_epoch: int | None = None, local_id: int = 0) -> None:
        self.log = log
        self.leader_epoch = log.leader_epoch if leader_epoch is None else leader_epoch
        self.is_leader = True  # one broker leads every partition it has; a cluster says otherwise
        self.local_id = local_id
        self.leader_id = local_id
        self.partition_epoch = 0
        self.replicas: tuple[int, ...] = (local_id,)
        self.isr: tuple[int, ...] = (local_id,)
        self.pending_isr: tuple[int, ...] | None = None  # an ISR change written to ZooKeeper, unconfirmed
        self.followers: dict[int, FollowerState] = {}
        # the log end offset when this replica became leader of its current epoch (None: not the leader
        # of a replicated partition; one broker's high watermark always follows its log end)
        self.leader_epoch_start_offset: int | None = None

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

    def check_leader_epoch(self, current_leader_epoch: int, *, require_leader: bool = True) -> ErrorCode:
        """Kafka's `localLogWithEpochOrThrow`: the client's epoch first, then whether this replica may
        answer (NOT_LEADER_OR_FOLLOWER). Only the leader answers a request that requires it; a consumer's
        Fetch v11+ (KIP-392) may also be served by a follower, once this replica knows its leader."""
        if current_leader_epoch == NO_EPOCH_CHECK or current_leader_epoch == self.leader_epoch:
            if self.is_leader or (not require_leader and self.leader_id != NO_LEADER):
                return ErrorCode.NONE
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
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
        self,
        fetch_offset: int,
        max_bytes: int,
        isolation: Isolation,
        *,
        min_one_message: bool = True,
        zero_copy: bool = False,
    ) -> FetchDataInfo:
        """Whole batches from `fetch_offset`, below the high watermark (or the LSO for read_committed);
        `zero_copy`: as a FileSlice of the segment file (PartitionLog.read)."""
        return self.log.read(fetch_offset, max_bytes, isolation, min_one_message, zero_copy)

    def offset_for_timestamp(self, timestamp: int, isolation: Isolation) -> TimestampAndOffset | None:
        """A client's ListOffsets. KafkaError OFFSET_NOT_AVAILABLE while a new leader's high watermark lags
        the start of its epoch, for "latest" and for a timestamp found nowhere below what it may read."""
        found = self.log.offset_for_timestamp(timestamp, isolation)
        start = self.leader_epoch_start_offset
        if (
            start is None
            or timestamp == EARLIEST_TIMESTAMP
            or isolation is Isolation.LOG_END
            or start <= self.log.high_watermark
        ):
            return found
        if timestamp == LATEST_TIMESTAMP or found is None:
            raise KafkaError(
                ErrorCode.OFFSET_NOT_AVAILABLE,
                f"{self.topic}-{self.index}: the high watermark {self.log.high_watermark} lags the start "
                f"of leader epoch {self.leader_epoch} ({start})",
            )
        return found

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

    def maybe_increment_high_watermark(self) -> bool:
        """Move the high watermark to the least log end offset over the maximal ISR (forward only; frozen
        while the ISR is below `min.insync.replicas`). True when it moved."""
        log = self.log
        if not self.followers:  # the ISR is this replica alone: everything it has is committed
            before = log.high_watermark
            log.update_high_watermark(log.log_end_offset)
            return log.high_watermark != before
        maximal = self.maximal_isr()
        if len(self.isr) < self.min_insync_replicas:
            return False
        new_hw = log.log_end_offset
        for broker_id in maximal:
            follower = self.followers.get(broker_id)
            if follower is None:
                continue
            if follower.log_end_offset == UNKNOWN_OFFSET:
                return False  # a new leader waits until every ISR member has fetched once
            new_hw = min(new_hw, follower.log_end_offset)
        if new_hw <= log.high_watermark:
            return False
        log.update_high_watermark(new_hw)
        return True

    # --- replication: leader and follower transitions ----------------------------------------------------

    @property
    def min_insync_replicas(self) -> int:
        """`min.insync.replicas`, at most the replication factor (Kafka's effective minimum)."""
        return min(self.log.config.min_insync_replicas, len(self.replicas))

    def maximal_isr(self) -> tuple[int, ...]:
        """The committed ISR with a pending expansion counted in and a pending shrink not yet out."""
        pending = self.pending_isr
        if pending is None:
            return self.isr
        return tuple(dict.fromkeys((*self.isr, *pending)))

    def make_leader(
        self,
        leader_epoch: int,
        isr: Sequence[int],
        replicas: Sequence[int],
        partition_epoch: int,
        now_ms: int,
    ) -> bool:
        """Become (or stay) the leader in `leader_epoch` (Kafka's `makeLeader`). A new epoch starts at the
        log end in the leader-epoch cache and forgets what the followers had. True when the epoch rose."""
        new_epoch = leader_epoch > self.leader_epoch or not self.is_leader
        self.leader_id = self.local_id
        self.replicas = tuple(replicas)
        self.isr = tuple(isr)
        self.partition_epoch = partition_epoch
        self.pending_isr = None
        if new_epoch:
            self.leader_epoch_start_offset = self.log.log_end_offset
            self.log.start_leader_epoch(leader_epoch)
            self.followers = {
                b: FollowerState(b, last_caught_up_ms=now_ms if b in self.isr else 0)
                for b in self.replicas
                if b != self.local_id
            }
        else:
            for b in self.replicas:
                if b != self.local_id and b not in self.followers:
                    self.followers[b] = FollowerState(b)
            for b in list(self.followers):
                if b not in self.replicas:
                    del self.followers[b]
        self.leader_epoch = leader_epoch
        self.is_leader = True
        self.maybe_increment_high_watermark()
        return new_epoch

    def make_follower(
        self,
        leader_id: int,
        leader_epoch: int,
        isr: Sequence[int],
        replicas: Sequence[int],
        partition_epoch: int,
    ) -> bool:
        """Follow `leader_id` in `leader_epoch` (Kafka's `makeFollower`). True when the leader or the
        epoch changed (the fetcher must restart this partition, truncating first)."""
        changed = self.is_leader or self.leader_id != leader_id or self.leader_epoch != leader_epoch
        self.is_leader = False
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.replicas = tuple(replicas)
        self.isr = tuple(isr)
        self.partition_epoch = partition_epoch
        self.pending_isr = None
        self.followers = {}
        self.leader_epoch_start_offset = None
        return changed

    def update_isr(self, isr: Sequence[int], partition_epoch: int) -> None:
        """A committed ISR change (ours confirmed, or read back from ZooKeeper) at `partition_epoch`."""
        if partition_epoch < self.partition_epoch:
            return
        self.isr = tuple(isr)
        self.partition_epoch = partition_epoch
        self.pending_isr = None
        self.maybe_increment_high_watermark()

    # --- the leader: follower fetches, ISR changes, acks=all ---------------------------------------------

    def update_follower_fetch_state(
        self, replica_id: int, fetch_offset: int, now_ms: int, log_start_offset: int = UNKNOWN_OFFSET
    ) -> bool:
        """A follower fetched from `fetch_offset` (its log starting at `log_start_offset`): it has
        everything below it. True when the high watermark moved (parked acks=all produces may now be
        answered)."""
        follower = self.followers.get(replica_id)
        if follower is None:
            return False
        follower.caught_up(fetch_offset, self.log.log_end_offset, now_ms, log_start_offset)
        return self.maybe_increment_high_watermark()

    def isr_to_expand(self, eligible: Callable[[int], bool]) -> tuple[int, ...] | None:
        """The ISR with the followers that caught up added, or None (Kafka's `maybeExpandIsr`): a
        follower joins when its log end reached the high watermark and the start of the current epoch."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        epoch_start = self.log.leader_epochs.latest_entry
        start = epoch_start.start_offset if epoch_start is not None else 0
        joining = [
            f.broker_id
            for f in self.followers.values()
            if f.broker_id not in self.isr
            and f.log_end_offset >= self.log.high_watermark
            and f.log_end_offset >= start
            and eligible(f.broker_id)
        ]
        if not joining:
            return None
        return (*self.isr, *joining)

    def isr_to_shrink(self, now_ms: int, max_lag_ms: int) -> tuple[int, ...] | None:
        """The ISR without the followers that have not caught up for `max_lag_ms`, or None (Kafka's
        `getOutOfSyncReplicas`): out of sync is behind the leader's log end *and* lagging in time."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        leo = self.log.log_end_offset
        out = {
            b
            for b in self.isr
            if b != self.local_id
            and (f := self.followers.get(b)) is not None
            and f.log_end_offset != leo
            and now_ms - f.last_caught_up_ms > max_lag_ms
        }
        if not out:
            return None
        return tuple(b for b in self.isr if b not in out)

    def check_enough_replicas(self, required_acks: int) -> None:
        """acks=all with the ISR below `min.insync.replicas` is refused before anything is appended."""
        if required_acks == -1 and len(self.isr) < self.min_insync_replicas:
            raise KafkaError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"{self.topic}-{self.index} has {len(self.isr)} in-sync replicas, "
                f"fewer than min.insync.replicas={self.min_insync_replicas}",
            )

    def replication_outcome(self, end: int) -> ErrorCode | None:
        """Whether an acks=all write ending below `end` is answered yet (Kafka's
        `checkEnoughReplicasReachOffset`): None while the high watermark is below it; NONE once it is
        committed with enough replicas; NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below the
        minimum meanwhile; NOT_LEADER_OR_FOLLOWER when this replica stopped leading."""
        if not self.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.log.high_watermark < end:
            return None
        if len(self.maximal_isr()) < self.min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return ErrorCode.NONE

    @property
    def replicated(self) -> bool:
        """Whether acks=all must wait for followers (more than one replica)."""
        return len(self.replicas) > 1

    # --- the follower ------------------------------------------------------------------------------------

    def append_records_as_follower(self, records: Buffer, leader_high_watermark: int) -> LogAppendInfo:
        """Store batches fetched from the leader as they are, then take the leader's high watermark
        (clamped to what this replica has)."""
        info = self.log.append_as_follower(records)
        self.log.update_follower_high_watermark(leader_high_watermark)
        return info

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

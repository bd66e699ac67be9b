"""What the console's pages show: one broker's facts at one moment, as plain values.

The broker (exactly.broker.console) reads its state on its event loop into these frozen values; the
pages (exactly.console.pages) are pure functions of them. Nothing here refers to a live object, so a
view can be rendered in any thread, compared in a test, or built by hand for a screenshot.

Offsets follow Kafka: log start <= LSO <= HW <= LEO for a leader; a consumer group's lag on a partition
is HW - committed offset (what `kafka-consumer-groups --describe` shows, LOG-END-OFFSET being the HW).
Times are epoch milliseconds; ages are milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = [
    "BrokerRow",
    "BrokersView",
    "Decision",
    "GroupMemberRow",
    "GroupView",
    "GroupsView",
    "Isolation",
    "LagRow",
    "OpenTxnRow",
    "PartitionRow",
    "PreparedBatch",
    "PreparedTxnRow",
    "RecordRow",
    "RecordsView",
    "TopicView",
    "TopicsView",
    "TwoPhaseView",
    "TxnRow",
    "TxnsView",
    "abort_command",
]


@dataclass(frozen=True, slots=True)
class BrokerRow:
    broker_id: int
    endpoints: tuple[str, ...]  # LISTENER://host:port
    rack: str | None
    controller: bool
    this_broker: bool
    alive: bool


@dataclass(frozen=True, slots=True)
class PartitionRow:
    """One partition; the offsets and size are known only where this broker has its log (else -1)."""

    topic: str
    partition: int
    leader: int  # -1: no leader
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    log_start: int = -1
    lso: int = -1
    high_watermark: int = -1
    log_end: int = -1
    size_bytes: int = -1
    records_per_s: float = 0.0

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)

    @property
    def offline(self) -> bool:
        return self.leader < 0

    @property
    def lso_lag(self) -> int:
        """Records read_committed consumers cannot read yet (an open transaction holds the LSO)."""
        return max(0, self.high_watermark - self.lso) if self.lso >= 0 else 0

    @property
    def local(self) -> bool:
        return self.log_end >= 0


@dataclass(frozen=True, slots=True)
class BrokersView:
    now_ms: int
    cluster: bool  # a ZooKeeper cluster (else one broker alone)
    this_broker: int
    brokers: tuple[BrokerRow, ...]
    partitions: int
    leaders: int  # partitions this broker leads
    problems: tuple[PartitionRow, ...]  # under-replicated or offline partitions (cluster only)
    readiness: tuple[str, ...]  # why /readyz says not ready; empty: ready
    security: str  # "off", or what authenticates the console


@dataclass(frozen=True, slots=True)
class TopicView:
    name: str
    internal: bool
    partitions: tuple[PartitionRow, ...]
    messages_in_per_s: float = 0.0
    bytes_in_per_s: float = 0.0
    bytes_out_per_s: float = 0.0

    @property
    def size_bytes(self) -> int:
        return sum(p.size_bytes for p in self.partitions if p.size_bytes > 0)

    @property
    def lso_lag(self) -> int:
        return sum(p.lso_lag for p in self.partitions)


@dataclass(frozen=True, slots=True)
class TopicsView:
    now_ms: int
    topics: tuple[TopicView, ...]
    show_internal: bool


@dataclass(frozen=True, slots=True)
class GroupMemberRow:
    member_id: str
    client_id: str
    host: str
    assignment: tuple[tuple[str, int], ...]  # (topic, partition)


@dataclass(frozen=True, slots=True)
class LagRow:
    topic: str
    partition: int
    committed: int  # -1: assigned, nothing committed yet
    high_watermark: int  # -1: not known here (the partition's log is on another broker)
    owner: str  # the member's client id holding it, "" if none

    @property
    def lag(self) -> int | None:
        if self.high_watermark < 0 or self.committed < 0:
            return None
        return max(0, self.high_watermark - self.committed)


@dataclass(frozen=True, slots=True)
class GroupView:
    group_id: str
    group_type: str  # classic or consumer
    state: str
    protocol: str  # the assignor (classic) or the server assignor (consumer)
    members: tuple[GroupMemberRow, ...]
    lag: tuple[LagRow, ...]

    @property
    def total_lag(self) -> int:
        return sum(row.lag or 0 for row in self.lag)


@dataclass(frozen=True, slots=True)
class GroupsView:
    now_ms: int
    groups: tuple[GroupView, ...]


def abort_command(topic: str, partition: int, start_offset: int) -> str:
    """The `exactly txn abort` command that ends an open transaction on a partition (an ABORT marker)."""
    return f"exactly txn abort --topic {topic} --partition {partition} --start-offset {start_offset}"


@dataclass(frozen=True, slots=True)
class TxnRow:
    """One transactional id as its coordinator (this broker) knows it."""

    transactional_id: str
    state: str  # Kafka's name: Empty, Ongoing, PrepareCommit, ..., and exactly's Prepared
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    partitions: tuple[tuple[str, int], ...]
    age_ms: int  # since the transaction started; -1: none open
    hanging: bool
    abort_commands: tuple[str, ...]  # for a hanging one: one per partition whose open start is known here


@dataclass(frozen=True, slots=True)
class OpenTxnRow:
    """An open transaction in a partition log (what `exactly txn find-hanging` examines)."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    first_offset: int
    idle_ms: int  # since the producer last wrote to the partition
    transactional_id: str | None  # the coordinator's id for this producer, if this broker coordinates it
    hanging: bool

    @property
    def command(self) -> str:
        return abort_command(self.topic, self.partition, self.first_offset)


@dataclass(frozen=True, slots=True)
class TxnsView:
    now_ms: int
    hanging_after_ms: int
    transactions: tuple[TxnRow, ...]
    open_in_logs: tuple[OpenTxnRow, ...]

    @property
    def hanging(self) -> int:
        return sum(t.hanging for t in self.transactions) + sum(o.hanging for o in self.open_in_logs)


class Decision(Enum):
    """A prepared batch's fate: the driver's CommitBatch recorded (commit the winners, abort the rest),
    or still waiting."""

    COMMIT = "commit"
    UNDECIDED = "waiting for decision"


@dataclass(frozen=True, slots=True)
class PreparedTxnRow:
    transactional_id: str
    task_partition: int  # the Spark task's partition that wrote it
    producer_id: int
    producer_epoch: int
    age_ms: int
    partitions: tuple[tuple[str, int], ...]
    winner: bool | None  # decided: in the winners (commits) or not (aborts); None: undecided


@dataclass(frozen=True, slots=True)
class PreparedBatch:
    query_id: str
    batch_id: int
    decision: Decision
    transactions: tuple[PreparedTxnRow, ...]
    winners: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TwoPhaseView:
    now_ms: int
    enabled: bool
    batches: tuple[PreparedBatch, ...]  # by query, then batch
    decided: tuple[tuple[str, int, int], ...]  # (query, batch, winners) retained decisions


class Isolation(Enum):
    READ_UNCOMMITTED = "read_uncommitted"
    READ_COMMITTED = "read_committed"


@dataclass(frozen=True, slots=True)
class RecordRow:
    offset: int
    timestamp: int
    key: str | None
    value: str | None
    headers: tuple[tuple[str, str], ...]
    producer_id: int
    transactional: bool
    control: str | None  # COMMIT / ABORT marker, else None
    aborted: bool  # part of an aborted transaction
    open: bool  # at or above the LSO: its transaction is not decided yet


@dataclass(frozen=True, slots=True)
class RecordsView:
    now_ms: int
    topic: str
    partition: int
    isolation: Isolation
    offset: int  # where the page starts
    records: tuple[RecordRow, ...]
    next_offset: int  # where the next page starts
    log_start: int
    lso: int
    high_watermark: int
    log_end: int
    skipped_aborted: int  # read_committed: aborted records not shown
    error: str | None = None  # the partition is not here, the offset is out of range, ...

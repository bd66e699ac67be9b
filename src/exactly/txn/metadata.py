"""One transactional.id's state in the coordinator (Kafka's `TransactionMetadata`), and its transitions.

`TransactionMetadata` is what the coordinator knows now; a change is prepared as a `TxnTransit` (the
complete next state, which is exactly what the `__transaction_state` record stores), held as
`pending` while its record is appended, and applied by `complete_transition` once the record is durable
— or dropped by `abort_transition` when the append failed. Loading the log applies records the same way.

Transaction version 2 (KIP-890 part 2) adds three fields: `next_producer_id` (set by a PrepareCommit/
PrepareAbort whose epoch bump would exhaust the epoch: its CompleteX moves to that producer id at epoch
0), `client_transaction_version` (2 while a TV2 client drives the transaction; 0 for older clients, as
Kafka records it) and, in memory, `last_producer_epoch` as the epoch before the last bump (the epoch a
retried EndTxn carries).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from exactly.txn.records import Partitions, PreparedTag, TransactionLogValue
from exactly.txn.state import TxnState, check_transition

__all__ = [
    "MAX_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "TransactionMetadata",
    "TxnTransit",
    "is_epoch_exhausted",
]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps the last epoch (32767) for fencing: at 32766 the producer id must be rotated."""
    return epoch >= MAX_EPOCH - 1


@dataclass(frozen=True, slots=True)
class TxnTransit:
    """The next state of a transactional.id: the content of the record that makes it durable."""

    producer_id: int
    last_producer_epoch: int  # in memory only (KIP-360 retries); not in the record
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: Partitions
    start_timestamp: int
    last_update_timestamp: int
    previous_producer_id: int = NO_PRODUCER_ID
    prepared: PreparedTag | None = None  # Prepared, and PrepareCommit/PrepareAbort of a prepared txn
    next_producer_id: int = NO_PRODUCER_ID  # TV2: the producer id CompleteX rotates to
    client_transaction_version: int = 0  # 2: a transaction version 2 client drives it

    @property
    def client_producer_id(self) -> int:
        """The producer id the client goes on with once this transition completes (TV2 rotation)."""
        return self.producer_id if self.next_producer_id == NO_PRODUCER_ID else self.next_producer_id

    @property
    def client_producer_epoch(self) -> int:
        return self.producer_epoch if self.next_producer_id == NO_PRODUCER_ID else 0

    def to_value(self) -> TransactionLogValue:
        return TransactionLogValue(
            self.producer_id,
            self.producer_epoch,
            self.timeout_ms,
            self.state,
            self.partitions,
            self.last_update_timestamp,
            self.start_timestamp,
            previous_producer_id=self.previous_producer_id,
            next_producer_id=self.next_producer_id,
            client_transaction_version=self.client_transaction_version,
            prepared=self.prepared,
        )


@dataclass(slots=True, eq=False)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_timestamp: int = -1
    last_update_timestamp: int = -1
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0
    prepared: PreparedTag | None = None  # what a Prepared transaction waits for (two-phase commit)
    pending: TxnTransit | None = None  # a transition whose record is being appended
    fencing: bool = False  # pending PrepareEpochFence: the next PrepareAbort carries a bumped epoch
    # In memory only: this producer's AddPartitionsToTxn/AddOffsetsToTxn for its next transaction was
    # answered CONCURRENT_TRANSACTIONS while the previous transaction was still completing, so the client
    # has begun a transaction that the coordinator has not (see `end_transaction`). Cleared by the next
    # transition other than CompleteCommit/CompleteAbort, and by the EndTxn(abort) of that transaction.
    unstarted_transaction: bool = False

    @property
    def pending_state(self) -> TxnState | None:
        if self.fencing:
            return TxnState.PREPARE_EPOCH_FENCE
        return self.pending.state if self.pending is not None else None

    @classmethod
    def from_value(cls, transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
        txn = cls(transactional_id, value.producer_id, value.producer_epoch, value.transaction_timeout_ms)
        txn.apply_loaded(value)
        return txn

    def is_timed_out(self, now: int, prepared_max_age_ms: int = -1) -> bool:
        """An Ongoing transaction older than its timeout, or a Prepared one prepared more than
        `prepared_max_age_ms` ago (-1: never), with nothing pending (the timeout scan's test)."""
        if self.pending is not None or self.fencing:
            return False
        if self.state is TxnState.PREPARED:
            return (
                prepared_max_age_ms >= 0
                and self.prepared is not None
                and self.prepared.prepared_timestamp_ms + prepared_max_age_ms < now
            )
        return self.state is TxnState.ONGOING and self.start_timestamp + self.timeout_ms < now

    # --- preparing transitions (nothing changes but `pending`) -------------------------------------------

    def prepare_transition(
        self,
        state: TxnState,
        *,
        now: int,
        producer_id: int | None = None,
        producer_epoch: int | None = None,
        last_producer_epoch: int | None = None,
        timeout_ms: int | None = None,
        partitions: Partitions | None = None,
        start_timestamp: int | None = None,
        prepared: PreparedTag | None = None,
        next_producer_id: int | None = None,
        client_transaction_version: int | None = None,
    ) -> TxnTransit:
        if self.pending is not None:
            raise RuntimeError(f"{self.transactional_id}: a transition to {self.pending.state} is pending")
        check_transition(TxnState.PREPARE_EPOCH_FENCE if self.fencing else self.state, state)
        pid = self.producer_id if producer_id is None else producer_id
        if state is TxnState.PREPARED:
            if prepared is None:
                raise ValueError("a transition to Prepared needs its tag")
        elif state.is_prepare:
            prepared = self.prepared  # the decision of a prepared transaction keeps who it was for
        else:
            prepared = None
        transit = TxnTransit(
            producer_id=pid,
            last_producer_epoch=self.last_producer_epoch
            if last_producer_epoch is None
            else last_producer_epoch,
            producer_epoch=self.producer_epoch if producer_epoch is None else producer_epoch,
            timeout_ms=self.timeout_ms if timeout_ms is None else timeout_ms,
            state=state,
            partitions=frozenset(self.partitions) if partitions is None else partitions,
            start_timestamp=self.start_timestamp if start_timestamp is None else start_timestamp,
            last_update_timestamp=max(now, self.last_update_timestamp),
            previous_producer_id=self.producer_id,  # as Kafka: the producer id before this transition
            prepared=prepared,
            next_producer_id=self.next_producer_id if next_producer_id is None else next_producer_id,
            client_transaction_version=self.client_transaction_version
            if client_transaction_version is None
            else client_transaction_version,
        )
        self.pending = transit
        return transit

    def prepare_fence(self) -> None:
        """PrepareEpochFence: the open transaction is to be aborted under epoch + 1 (in memory only; the
        PrepareAbort record that follows carries the bumped epoch)."""
        check_transition(self.state, TxnState.PREPARE_EPOCH_FENCE)
        self.fencing = True

    def fence_epoch(self) -> int:
        """The epoch the fencing abort is written with: one more, up to 32767, the epoch Kafka keeps for
        exactly this (an exhausted epoch still fences; the next InitProducerId rotates the producer id)."""
        return min(self.producer_epoch + 1, MAX_EPOCH)

    # --- applying --------------------------------------------------------------------------------------

    def complete_transition(self, transit: TxnTransit) -> None:
        """Apply a transition whose record is durable (or that is being loaded from the log)."""
        if self.pending is not None and self.pending is not transit:
            raise RuntimeError(f"{self.transactional_id}: completing a transition that is not pending")
        self.pending = None
        self.fencing = False
        if not transit.state.is_complete:
            self.unstarted_transaction = False
        self.producer_id = transit.producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.previous_producer_id = transit.previous_producer_id
        self.next_producer_id = transit.next_producer_id
        self.client_transaction_version = transit.client_transaction_version
        self.timeout_ms = transit.timeout_ms
        self.state = transit.state
        self.partitions = set(transit.partitions)
        self.start_timestamp = transit.start_timestamp
        self.last_update_timestamp = transit.last_update_timestamp
        self.prepared = transit.prepared

    def abort_transition(self) -> None:
        """The record could not be appended: nothing changed."""
        self.pending = None
        self.fencing = False

    def apply_loaded(self, value: TransactionLogValue) -> None:
        """Replay a record read from the log (start-up): it is the state."""
        self.pending = None
        self.complete_transition(
            TxnTransit(
                producer_id=value.producer_id,
                last_producer_epoch=NO_PRODUCER_EPOCH,
                producer_epoch=value.producer_epoch,
                timeout_ms=value.transaction_timeout_ms,
                state=value.state,
                partitions=value.partitions,
                start_timestamp=value.start_timestamp_ms,
                last_update_timestamp=value.last_update_timestamp_ms,
                previous_producer_id=value.previous_producer_id,
                prepared=value.prepared,
                next_producer_id=value.next_producer_id,
                client_transaction_version=value.client_transaction_version,
            )
        )

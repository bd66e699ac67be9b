"""The transaction state machine of a transactional.id: its states, the legal transitions, and why.

Rule: every state change of a transaction is a row of `TRANSITIONS` (Kafka's `TransactionState` legal
previous states, seed 000 §9, `shared/vectors/txn-state-transitions.json`); `check_transition` raises
`IllegalTransition` for anything else and is called by `TransactionMetadata.prepare_transition`, the
only place a transition starts.

Rule: a transition takes effect only when its record (`records.py`) has been appended to the id's
partition of `__transaction_state` and is durable; until then it is the *pending* state, and any
other request for that id answers CONCURRENT_TRANSACTIONS. Loading the log at start-up applies the same
records, so a restarted coordinator is in the state its log says.

Theory of operation
-------------------

    Empty --AddPartitions/AddOffsets--> Ongoing --EndTxn(commit)--> PrepareCommit --markers written-->
    CompleteCommit --next AddPartitions--> Ongoing ...      (abort: PrepareAbort -> CompleteAbort)

Transaction version 2 (EndTxn v5) also allows Empty/CompleteCommit/CompleteAbort --EndTxn(abort)-->
PrepareAbort: the abort of a transaction that added no partition, which bumps the epoch like any TV2 end.

EMPTY (0) — a producer id and epoch, no transaction. InitProducerId lands here (epoch bumped).
ONGOING (1) — partitions (and the group's `__consumer_offsets` partition) have been added; the
    transaction started at `txn_start_timestamp` and is aborted by the coordinator once older than its
    timeout. Partition leaders accept transactional batches only for partitions in the set (KIP-890 p1).
PREPARE_COMMIT (2) / PREPARE_ABORT (3) — the decision is durable: the client has (or will get) its
    answer, and the coordinator writes COMMIT/ABORT markers to every partition until all have them.
    A crash here resumes marker writing after the log is loaded.
COMPLETE_COMMIT (4) / COMPLETE_ABORT (5) — every partition has its marker; the partition set is empty.
DEAD (6) — the id expired (`transactional.id.expiration.ms`): a tombstone is written and the id is
    forgotten.
PREPARE_EPOCH_FENCE (7) — a *pending* state only: a new instance's InitProducerId, or the timeout scan,
    found the transaction Ongoing. The coordinator bumps the epoch (fencing the old instance) and moves
    on to PrepareAbort at once; the PrepareAbort record carries the bumped epoch, so the fence becomes
    durable in the same record. No record ever has status 7.

PREPARED (100, exactly's two-phase commit extension, docs/two-phase-commit.md) — PrepareTxn moved the
    Ongoing transaction here after its producer flushed everything: the transaction is tagged with
    (query id, batch id, partition) and waits for the driver's decision (CommitBatch/AbortBatch).
    transaction.timeout.ms does not apply; only transaction.prepared.max.age.ms (7 days) aborts it, and
    an operator (`exactly txn abort-batch|abort-query`). EndTxn and AddPartitions get INVALID_TXN_STATE
    (the driver decides, not the task); InitProducerId gets CONCURRENT_TRANSACTIONS (the transaction
    belongs to the decision and is never aborted by a new producer instance: KIP-939's
    keepPreparedTxn=true, always). Not a Kafka status byte: the record stores status Ongoing (1) plus
    the `prepared` v1 tagged field (records.py), so Kafka's v0/v1 readers still decode it.

    Ongoing --PrepareTxn--> Prepared --CommitBatch(winner)--> PrepareCommit --> CompleteCommit
                                     --CommitBatch(loser) / AbortBatch / safety timeout--> PrepareAbort
"""

from __future__ import annotations

from enum import Enum

__all__ = ["TRANSITIONS", "IllegalTransition", "TxnState", "check_transition"]


class TxnState(Enum):
    """The `TransactionStatus` byte of a `__transaction_state` value (Kafka's ids)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7
    PREPARED = 100  # exactly's extension; stored as ONGOING + the `prepared` tagged field

    @property
    def kafka_name(self) -> str:
        """The name Kafka's tools print (ListTransactions / DescribeTransactions `state`)."""
        return _KAFKA_NAMES[self]

    @property
    def reported_name(self) -> str:
        """The state ListTransactions / DescribeTransactions (KIP-664) report: Kafka's name, except that a
        Prepared transaction is reported as Ongoing (as KIP-939 keeps it), because Kafka's admin clients
        know only Kafka's states (kafka-python's admin raises on an unknown one) and `find-hanging` must
        not call a prepared transaction hanging. `exactly txn list` marks it Prepared (ListPreparedTxns)."""
        return "Ongoing" if self is TxnState.PREPARED else self.kafka_name

    @classmethod
    def from_kafka_name(cls, name: str) -> TxnState:
        for state, kafka_name in _KAFKA_NAMES.items():
            if kafka_name == name:
                return state
        raise ValueError(f"unknown transaction state {name!r}")

    @property
    def is_prepare(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def is_complete(self) -> bool:
        return self in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    @property
    def can_expire(self) -> bool:
        """States in which an idle transactional.id may expire (no transaction in flight)."""
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


_KAFKA_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
    TxnState.PREPARED: "Prepared",
}

_S = TxnState

# target state -> (legal previous states, why)
TRANSITIONS: dict[TxnState, tuple[frozenset[TxnState], str]] = {
    _S.EMPTY: (
        frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
        "InitProducerId bumps the epoch (or rotates the producer id) when no transaction is open",
    ),
    _S.ONGOING: (
        frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
        "AddPartitionsToTxn / AddOffsetsToTxn start a transaction or add to the open one",
    ),
    _S.PREPARE_COMMIT: (
        frozenset({_S.ONGOING, _S.PREPARED}),
        "EndTxn(commit) of the open transaction, or a CommitBatch decision that lists it as a winner",
    ),
    _S.PREPARE_ABORT: (
        frozenset(
            {_S.ONGOING, _S.PREPARE_EPOCH_FENCE, _S.PREPARED, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}
        ),
        "EndTxn(abort), the fence of a new instance / the timeout scan, or for a Prepared transaction "
        "a CommitBatch that does not list it, AbortBatch, or transaction.prepared.max.age.ms; from "
        "Empty/CompleteCommit/CompleteAbort a transaction version 2 EndTxn(abort) of a transaction that "
        "added nothing (Kafka 4)",
    ),
    _S.COMPLETE_COMMIT: (frozenset({_S.PREPARE_COMMIT}), "every partition has its COMMIT marker"),
    _S.COMPLETE_ABORT: (frozenset({_S.PREPARE_ABORT}), "every partition has its ABORT marker"),
    _S.DEAD: (
        frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
        "transactional.id.expiration.ms passed without a transaction",
    ),
    _S.PREPARE_EPOCH_FENCE: (
        frozenset({_S.ONGOING}),
        "a new instance (InitProducerId) or the timeout scan fences the open transaction",
    ),
    _S.PREPARED: (
        frozenset({_S.ONGOING}),
        "PrepareTxn after the producer flushed: the transaction waits for its batch's decision",
    ),
}


class IllegalTransition(Exception):
    """A transition that is not in `TRANSITIONS`: a bug in the coordinator, never a client's fault."""


def check_transition(current: TxnState, target: TxnState) -> None:
    previous, _ = TRANSITIONS[target]
    if current not in previous:
        raise IllegalTransition(f"transaction cannot move from {current.kafka_name} to {target.kafka_name}")

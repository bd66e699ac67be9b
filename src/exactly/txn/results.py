"""The values the transaction coordinator hands to the broker: its config, results and marker jobs."""

from __future__ import annotations

from dataclasses import dataclass

from exactly.errors import ErrorCode
from exactly.txn.decisions import BatchDecisionRecord
from exactly.txn.metadata import TxnTransit
from exactly.txn.records import Partitions

__all__ = ["BatchResult", "MarkerJob", "TxnConfig", "TxnResult"]

_NONE = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class TxnConfig:
    num_partitions: int = 50  # transaction.state.log.num.partitions
    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms
    coordinator_epoch: int = 0  # single node: the epoch of every __transaction_state partition
    prepared_max_age_ms: int = 604_800_000  # transaction.prepared.max.age.ms (-1: never)
    # transaction.two.phase.decisions.retained.batches: CommitBatch of batch B prunes the query's
    # decisions below B - this (Spark's spark.sql.streaming.minBatchesToRetain); -1 keeps them all
    decisions_retained_batches: int = 100


@dataclass(frozen=True, slots=True)
class MarkerJob:
    """Write a COMMIT/ABORT marker for `producer_id` to every partition, then record CompleteX."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: Partitions


@dataclass(frozen=True, slots=True)
class TxnResult:
    """The answer to a request: `error` (and the producer id/epoch for InitProducerId) once `transit`,
    if any, has been appended, made durable and completed."""

    transactional_id: str
    error: ErrorCode = _NONE
    transit: TxnTransit | None = None
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True)
class BatchResult:
    """The answer to CommitBatch / AbortBatch.

    `decision`: the batch's decision (new or stored), None when there is none. `record`: the decision is
    new — append it and call `complete_decision` once durable (or `abort_decision` if the append failed)
    before answering. `already_decided`: decided by an earlier request. `aborts`: PrepareAbort
    transitions to append (AbortBatch) before answering. `pruned`: with a new decision, the query's
    older decided batches it prunes — append their tombstones with the decision record and pass them to
    `complete_decision`.
    """

    query_id: str
    batch_id: int
    error: ErrorCode = _NONE
    message: str | None = None
    decision: BatchDecisionRecord | None = None
    record: bool = False
    already_decided: bool = False
    aborts: tuple[TxnResult, ...] = ()
    pruned: tuple[int, ...] = ()

"""The transaction coordinator's two-phase commit extension (docs/two-phase-commit.md), mixed into
`TransactionCoordinator`; sans-IO like it. The Spark sink's design (b):

* PrepareTxn(id, query, batch, partition[, producer id, epoch]): Ongoing -> Prepared, tagged; answered
  once durable. A prepare for a batch that is decided, or older than the query's highest decided batch
  (`decided_hw`), is a zombie's: its transaction is aborted (epoch + 1) and it gets PRODUCER_FENCED. The
  Spark sink reuses ids from a pool, so it names the producer (id, epoch) it prepares for: a prepare
  naming another instance than the one that holds the id now (a zombie whose id was taken over) changes
  nothing and gets INVALID_PRODUCER_EPOCH (PRODUCER_FENCED if its batch is closed).
* CommitBatch(query, batch, winners): decided before -> the stored decision (ALREADY_DECIDED) and a
  re-drive. Else every winner must be Prepared for (query, batch); the decision record is appended
  (`BatchResult.record`), and once it is durable `complete_decision` applies it and returns the
  transitions that carry it out (`redrive`): winners -> PrepareCommit, every other Prepared transaction
  of the query whose batch is decided or older than `decided_hw` -> PrepareAbort. Markers follow as for
  EndTxn.
* AbortBatch(query, batch | -1): decided -> nothing (roll forward); else PrepareAbort for the batch's (or
  every undecided batch's) Prepared transactions. No record beyond the PrepareAbort records.
* Recovery: after loading, `redrive_all` re-derives the transitions of every decided batch whose
  transactions are still Prepared (a crash after the decision record, before or between transitions);
  PrepareX transactions resume their markers through `pending_marker_jobs` as usual.
* `PreparedIndex`: the Prepared transactions by (query, batch), kept by the coordinator at every applied
  transition and loaded record, so a batch's or a query's prepared work is a lookup, not a scan.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from exactly.errors import ErrorCode
from exactly.txn.decisions import BatchDecisionRecord, Decisions
from exactly.txn.metadata import NO_PRODUCER_EPOCH, TransactionMetadata
from exactly.txn.records import PreparedTag
from exactly.txn.results import BatchResult, TxnConfig, TxnResult
from exactly.txn.state import TxnState

__all__ = ["PreparedIndex", "TwoPhaseCommit"]

_S = TxnState
_NONE = ErrorCode.NONE


class PreparedIndex:
    """The transactional ids whose state is Prepared, by (query, batch) and by query."""

    def __init__(self) -> None:
        self._ids: dict[tuple[str, int], set[str]] = {}  # (query, batch) -> prepared ids
        self._key: dict[str, tuple[str, int]] = {}  # id -> its (query, batch)

    def update(self, txn: TransactionMetadata | None, transactional_id: str) -> None:
        """Index the id as it is now (`txn` None: the id is gone)."""
        key = None
        if txn is not None and txn.state is _S.PREPARED and txn.prepared is not None:
            key = (txn.prepared.query_id, txn.prepared.batch_id)
        old = self._key.get(transactional_id)
        if old == key:
            return
        if old is not None:
            del self._key[transactional_id]
            ids = self._ids[old]
            ids.discard(transactional_id)
            if not ids:
                del self._ids[old]
        if key is not None:
            self._key[transactional_id] = key
            self._ids.setdefault(key, set()).add(transactional_id)

    def of_batch(self, query_id: str, batch_id: int) -> list[str]:
        return sorted(self._ids.get((query_id, batch_id), ()))

    def of_query(self, query_id: str) -> list[str]:
        """By batch, then id (a scan of the prepared batches only: a few per query)."""
        keys = sorted(key for key in self._ids if key[0] == query_id)
        return [tid for key in keys for tid in sorted(self._ids[key])]

    def all(self) -> list[str]:
        return sorted(self._key)

    def clear(self) -> None:
        self._ids.clear()
        self._key.clear()

    def __len__(self) -> int:
        return len(self._key)


class TwoPhaseCommit:
    """PrepareTxn, CommitBatch, AbortBatch and the re-drive of recorded decisions."""

    # provided by TransactionCoordinator
    config: TxnConfig
    transactions: dict[str, TransactionMetadata]
    decisions: Decisions
    prepared_index: PreparedIndex
    _deciding: set[tuple[str, int]]  # decision records being appended
    _now: Callable[[], int]

    def _fence_and_abort(self, txn: TransactionMetadata, error: ErrorCode) -> TxnResult:
        raise NotImplementedError

    def prepare(
        self,
        transactional_id: str,
        query_id: str,
        batch_id: int,
        partition: int,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> TxnResult:
        """PrepareTxn. `producer_id`/`producer_epoch` (-1: not checked) name the producer instance whose
        transaction is prepared: with a pooled id, another instance may hold the id by now."""
        if not transactional_id or not query_id or batch_id < 0 or partition < 0:
            return TxnResult(transactional_id, ErrorCode.INVALID_REQUEST)
        txn = self.transactions.get(transactional_id)
        if txn is None:
            return TxnResult(transactional_id, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
        if txn.pending_state is not None:
            return TxnResult(transactional_id, ErrorCode.CONCURRENT_TRANSACTIONS)
        if producer_id >= 0 and (producer_id, producer_epoch) != (txn.producer_id, txn.producer_epoch):
            # A zombie whose id another instance took over (InitProducerId fenced it): its transaction
            # was aborted then, and the transaction there now is not its to prepare.
            closed = self.batch_closed(query_id, batch_id)
            return TxnResult(
                transactional_id, ErrorCode.PRODUCER_FENCED if closed else ErrorCode.INVALID_PRODUCER_EPOCH
            )
        if txn.state is _S.PREPARED:
            tag = txn.prepared
            same = tag is not None and (tag.query_id, tag.batch_id, tag.partition) == (
                query_id,
                batch_id,
                partition,
            )
            return TxnResult(transactional_id, _NONE if same else ErrorCode.INVALID_TXN_STATE)
        if txn.state is not _S.ONGOING:
            return TxnResult(transactional_id, ErrorCode.INVALID_TXN_STATE)
        if self.batch_closed(query_id, batch_id):
            # A zombie preparing after its batch was decided: never part of the outcome.
            return self._fence_and_abort(txn, ErrorCode.PRODUCER_FENCED)
        now = self._now()
        transit = txn.prepare_transition(
            _S.PREPARED, now=now, prepared=PreparedTag(query_id, batch_id, partition, now)
        )
        return TxnResult(transactional_id, _NONE, transit, txn.producer_id, txn.producer_epoch)

    def batch_closed(self, query_id: str, batch_id: int) -> bool:
        """Decided, or older than the query's highest decided batch: nothing more may join it."""
        return self.decisions.get(query_id, batch_id) is not None or batch_id <= self.decisions.decided_hw(
            query_id
        )

    def _abort_prepared(self, txn: TransactionMetadata, error: ErrorCode) -> TxnResult:
        """Prepared -> PrepareAbort with epoch + 1 (fencing the producer, should it still be alive)."""
        transit = txn.prepare_transition(
            _S.PREPARE_ABORT,
            now=self._now(),
            producer_epoch=txn.fence_epoch(),
            last_producer_epoch=NO_PRODUCER_EPOCH,
        )
        return TxnResult(txn.transactional_id, error, transit, transit.producer_id, transit.producer_epoch)

    def settle(self, transactional_id: str) -> TxnResult | None:
        """The transition a Prepared transaction owes to a recorded decision (None: it waits)."""
        txn = self.transactions.get(transactional_id)
        if txn is None or txn.state is not _S.PREPARED or txn.pending_state is not None:
            return None
        tag = txn.prepared
        assert tag is not None
        decision = self.decisions.get(tag.query_id, tag.batch_id)
        if decision is not None and transactional_id in decision.winners:
            transit = txn.prepare_transition(_S.PREPARE_COMMIT, now=self._now())
            return TxnResult(transactional_id, _NONE, transit, txn.producer_id, txn.producer_epoch)
        if decision is not None or tag.batch_id <= self.decisions.decided_hw(tag.query_id):
            return self._abort_prepared(txn, _NONE)
        return None

    def redrive(self, query_id: str) -> list[TxnResult]:
        """Carry out the query's decisions: the transitions of its Prepared transactions that are owed."""
        out: list[TxnResult] = []
        for txn_id in self.prepared_index.of_query(query_id):
            result = self.settle(txn_id)
            if result is not None:
                out.append(result)
        return out

    def redrive_all(self) -> list[TxnResult]:
        """After loading: every transition owed to a recorded decision (a crash cut the fan-out short)."""
        out: list[TxnResult] = []
        for txn_id in self.prepared_index.all():
            result = self.settle(txn_id)
            if result is not None:
                out.append(result)
        return out

    # --- two-phase commit: CommitBatch / AbortBatch --------------------------------------------------------

    def commit_batch(self, query_id: str, batch_id: int, winners: Iterable[str]) -> BatchResult:
        wanted = tuple(winners)
        if not query_id or batch_id < 0 or len(set(wanted)) != len(wanted) or "" in wanted:
            return BatchResult(
                query_id,
                batch_id,
                ErrorCode.INVALID_REQUEST,
                "needs a query id, a batch id >= 0, distinct ids",
            )
        if (query_id, batch_id) in self._deciding:
            return BatchResult(query_id, batch_id, ErrorCode.CONCURRENT_TRANSACTIONS)
        decided = self.decisions.get(query_id, batch_id)
        if decided is not None:
            return BatchResult(query_id, batch_id, decision=decided, already_decided=True)
        hw = self.decisions.decided_hw(query_id)
        if batch_id <= hw:
            return BatchResult(
                query_id,
                batch_id,
                ErrorCode.INVALID_TXN_STATE,
                f"batch {batch_id} of query {query_id!r} was never decided and batch {hw} is: "
                "its prepared work has been aborted",
            )
        problems: list[str] = []
        for txn_id in wanted:
            txn = self.transactions.get(txn_id)
            if txn is None:
                problems.append(f"{txn_id!r} is unknown")
            elif txn.state is not _S.PREPARED or txn.pending_state is not None:
                state = txn.pending_state or txn.state
                problems.append(f"{txn_id!r} is {state.kafka_name}, not Prepared")
            elif txn.prepared is None or (txn.prepared.query_id, txn.prepared.batch_id) != (
                query_id,
                batch_id,
            ):
                tag = txn.prepared
                where = f"({tag.query_id!r}, {tag.batch_id})" if tag is not None else "nothing"
                problems.append(f"{txn_id!r} is prepared for {where}")
        if problems:
            return BatchResult(
                query_id,
                batch_id,
                ErrorCode.INVALID_TXN_STATE,
                f"batch {batch_id} of query {query_id!r} not decided: " + "; ".join(problems),
            )
        decision = BatchDecisionRecord(query_id, batch_id, wanted, self._now())
        self._deciding.add((query_id, batch_id))
        retain = self.config.decisions_retained_batches
        pruned = tuple(self.decisions.prunable(query_id, batch_id - retain)) if retain >= 0 else ()
        return BatchResult(query_id, batch_id, decision=decision, record=True, pruned=pruned)

    def complete_decision(self, decision: BatchDecisionRecord, pruned: Iterable[int] = ()) -> list[TxnResult]:
        """The decision record (and the tombstones of the `pruned` batches) is durable: apply it; returns
        the transitions that carry it out."""
        self._deciding.discard((decision.query_id, decision.batch_id))
        self.decisions.add(decision)
        for batch_id in pruned:
            self.decisions.remove(decision.query_id, batch_id)
        return self.redrive(decision.query_id)

    def load_decision_tombstone(self, query_id: str, batch_id: int) -> None:
        """Replay a pruned decision's tombstone (start-up): the decision is forgotten."""
        self.decisions.remove(query_id, batch_id)

    def abort_decision(self, decision: BatchDecisionRecord) -> None:
        """The decision record could not be appended: nothing is decided."""
        self._deciding.discard((decision.query_id, decision.batch_id))

    def abort_batch(self, query_id: str, batch_id: int) -> BatchResult:
        """Abort the undecided Prepared work of one batch, or of every batch of the query (batch_id -1)."""
        if not query_id or batch_id < -1:
            return BatchResult(query_id, batch_id, ErrorCode.INVALID_REQUEST, "needs a query id, a batch id")
        if batch_id >= 0:
            if (query_id, batch_id) in self._deciding:
                return BatchResult(query_id, batch_id, ErrorCode.CONCURRENT_TRANSACTIONS)
            decided = self.decisions.get(query_id, batch_id)
            if decided is not None:
                return BatchResult(query_id, batch_id, decision=decided, already_decided=True)
        aborts: list[TxnResult] = []
        ids = (
            self.prepared_index.of_batch(query_id, batch_id)
            if batch_id >= 0
            else self.prepared_index.of_query(query_id)
        )
        for txn_id in ids:
            txn = self.transactions[txn_id]
            tag = txn.prepared
            if txn.state is not _S.PREPARED or txn.pending_state is not None or tag is None:
                continue
            if (
                self.decisions.get(query_id, tag.batch_id) is not None
                or (query_id, tag.batch_id) in self._deciding
            ):
                continue  # decided (roll forward): settled by its decision, not aborted
            aborts.append(self._abort_prepared(txn, _NONE))
        return BatchResult(query_id, batch_id, aborts=tuple(aborts))

    def list_prepared(self, query_id: str | None = None) -> list[TransactionMetadata]:
        ids = self.prepared_index.all() if query_id is None else self.prepared_index.of_query(query_id)
        return sorted(
            (self.transactions[txn_id] for txn_id in ids),
            key=lambda t: (
                (t.prepared.query_id, t.prepared.batch_id, t.prepared.partition, t.transactional_id)
                if t.prepared is not None
                else ("", 0, 0, t.transactional_id)
            ),
        )

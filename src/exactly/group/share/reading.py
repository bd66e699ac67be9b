"""What a share partition sees of a log read: each batch's offsets and whether it holds records a member
may receive (`FetchedBatch`), and the bytes of the batches that hold acquired records.

Under read_committed (`share.isolation.level`) the read stops at the last stable offset, and a batch of a
transaction that the read's aborted-transaction list names (from its first offset until that producer's
ABORT marker) is ABORTED: its records are archived, never delivered (Kafka's
`maybeFilterAbortedTransactionalAcquiredRecords`). Control batches (transaction markers) are never
delivered either.
"""

from __future__ import annotations

from collections.abc import Sequence

from exactly.group.share.partition import AcquiredRange, BatchKind, FetchedBatch
from exactly.records.batch import RecordBatch, iter_batches
from exactly.records.control import ControlRecordType, parse_end_txn_marker
from exactly.storage.txn_index import FetchAbortedTxn

__all__ = ["classify", "delivered_bytes"]


def classify(records: memoryview | bytes, aborted: Sequence[FetchAbortedTxn] | None) -> list[FetchedBatch]:
    """The batches of a read, in order; `aborted`: its aborted transactions (None: read_uncommitted)."""
    pending = sorted(aborted or [], key=lambda t: t.first_offset)
    active: set[int] = set()
    out: list[FetchedBatch] = []
    for batch in iter_batches(records):
        while pending and pending[0].first_offset <= batch.last_offset:
            active.add(pending.pop(0).producer_id)
        kind = BatchKind.DATA
        if batch.is_control:
            kind = BatchKind.CONTROL
            if batch.producer_id in active and _is_abort(batch):
                active.discard(batch.producer_id)
        elif batch.is_transactional and batch.producer_id in active:
            kind = BatchKind.ABORTED
        out.append(FetchedBatch(batch.base_offset, batch.last_offset, kind))
    return out


def _is_abort(batch: RecordBatch) -> bool:
    return parse_end_txn_marker(batch).type == ControlRecordType.ABORT


def delivered_bytes(records: memoryview | bytes, acquired: Sequence[AcquiredRange]) -> bytes:
    """The whole batches of the read that hold an acquired offset (the client keeps only those)."""
    parts = []
    for batch in iter_batches(records):
        if any(r.first_offset <= batch.last_offset and r.last_offset >= batch.base_offset for r in acquired):
            parts.append(bytes(batch.buffer))
    return b"".join(parts)

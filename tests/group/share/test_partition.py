"""The share partition's rules one at a time: the delivery limit, locks, acknowledgement validation,
markers and aborted batches, the persistent form, and what a read looks like to it (`reading`)."""

from __future__ import annotations

from exactly.errors import ErrorCode
from exactly.group.share.partition import (
    AckBatch,
    AckType,
    AcquiredRange,
    BatchKind,
    FetchedBatch,
    RecordState,
    SharePartition,
    ShareState,
    StateBatch,
)
from exactly.group.share.reading import classify, delivered_bytes
from exactly.group.share.session import ShareSessionCache
from exactly.records.builder import BatchBuilder
from exactly.records.control import ControlRecordType, EndTxnMarker, build_end_txn_marker_batch
from exactly.storage.txn_index import FetchAbortedTxn

DATA = [FetchedBatch(0, 4, BatchKind.DATA)]


def _partition(**kwargs: int) -> SharePartition:
    return SharePartition(ShareState(0), delivery_limit=2, lock_duration_ms=100, max_in_flight=100, **kwargs)


def test_release_until_the_limit_archives() -> None:
    p = _partition()
    assert p.acquire("a", DATA, 10, 0) == [AcquiredRange(0, 4, 1)]
    assert p.acknowledge("a", [AckBatch(0, 4, (AckType.RELEASE,))]) == ErrorCode.NONE
    assert p.acquire("b", DATA, 10, 0) == [AcquiredRange(0, 4, 2)]
    assert p.acknowledge("b", [AckBatch(0, 4, (AckType.RELEASE,))]) == ErrorCode.NONE
    assert p.acquire("c", DATA, 10, 0) == []
    assert p.start_offset == 5  # all archived: SPSO moved past them


def test_lock_expiry_and_per_offset_types() -> None:
    p = _partition()
    p.acquire("a", DATA, 10, 0)
    assert p.next_lock_deadline() == 100
    assert p.expire_locks(99) == 0
    assert p.expire_locks(100) == 5
    assert p.acquire("b", DATA, 10, 200) == [AcquiredRange(0, 4, 2)]
    types = (AckType.ACCEPT, AckType.REJECT, AckType.ACCEPT, AckType.RELEASE, AckType.ACCEPT)
    assert p.acknowledge("b", [AckBatch(0, 4, types)]) == ErrorCode.NONE
    assert p.start_offset == 5  # accepted, rejected, and released on its last delivery: all terminal
    assert p.acquire("c", DATA, 10, 300) == []


def test_acknowledgements_are_all_or_nothing() -> None:
    p = _partition()
    p.acquire("a", DATA, 10, 0)
    assert p.acknowledge("b", [AckBatch(0, 0, (1,))]) == ErrorCode.INVALID_RECORD_STATE
    assert p.acknowledge("a", [AckBatch(0, 1, (1,)), AckBatch(4, 6, (1,))]) == ErrorCode.INVALID_RECORD_STATE
    assert p.acknowledge("a", [AckBatch(2, 1, (1,))]) == ErrorCode.INVALID_REQUEST
    assert p.acknowledge("a", [AckBatch(0, 2, (1, 1))]) == ErrorCode.INVALID_REQUEST
    assert p.acknowledge("a", [AckBatch(0, 0, (9,))]) == ErrorCode.INVALID_REQUEST
    assert p.acquired_by("a") == [0, 1, 2, 3, 4]


def test_markers_gaps_and_aborted_batches_are_archived_never_delivered() -> None:
    p = _partition()
    batches = [
        FetchedBatch(0, 1, BatchKind.ABORTED),
        FetchedBatch(2, 2, BatchKind.CONTROL),
        FetchedBatch(5, 6, BatchKind.DATA),  # 3-4: compacted away
    ]
    assert p.acquire("a", batches, 10, 0) == [AcquiredRange(5, 6, 1)]
    assert p.start_offset == 5
    assert p.acknowledge("a", [AckBatch(5, 6, (AckType.GAP,))]) == ErrorCode.NONE
    assert p.start_offset == 7


def test_window_is_capped_and_snapshot_reloads() -> None:
    p = SharePartition(ShareState(0), delivery_limit=5, lock_duration_ms=100, max_in_flight=3)
    assert p.acquire("a", [FetchedBatch(0, 9, BatchKind.DATA)], 100, 0) == [AcquiredRange(0, 2, 1)]
    p.acknowledge("a", [AckBatch(1, 1, (AckType.ACCEPT,))])
    state = p.snapshot()
    assert state == ShareState(
        0,
        (
            StateBatch(0, 0, RecordState.AVAILABLE, 1),
            StateBatch(1, 1, RecordState.ACKNOWLEDGED, 1),
            StateBatch(2, 2, RecordState.AVAILABLE, 1),
        ),
    )
    again = SharePartition(state, delivery_limit=5, lock_duration_ms=100, max_in_flight=3)
    assert again.fetch_offset() == 0
    assert again.acquire("b", [FetchedBatch(0, 9, BatchKind.DATA)], 100, 0) == [
        AcquiredRange(0, 0, 2),
        AcquiredRange(2, 2, 2),
    ]


def _batch(base: int, count: int, producer_id: int = -1) -> bytes:
    builder = BatchBuilder(
        base,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=0 if producer_id >= 0 else -1,
        is_transactional=producer_id >= 0,
    )
    for i in range(count):
        builder.append(0, None, f"v{i}".encode())
    return builder.build()


def test_classify_finds_aborted_transactions_and_markers() -> None:
    abort = build_end_txn_marker_batch(7, 0, EndTxnMarker(ControlRecordType.ABORT, 0), base_offset=3)
    records = _batch(0, 2) + _batch(2, 1, producer_id=7) + bytes(abort) + _batch(4, 2)
    kinds = classify(records, [FetchAbortedTxn(7, 2)])
    assert [(b.base_offset, b.last_offset, b.kind) for b in kinds] == [
        (0, 1, BatchKind.DATA),
        (2, 2, BatchKind.ABORTED),
        (3, 3, BatchKind.CONTROL),
        (4, 5, BatchKind.DATA),
    ]
    assert [b.kind for b in classify(records, None)][1] is BatchKind.DATA  # read_uncommitted
    assert delivered_bytes(records, [AcquiredRange(4, 4, 1)]) == _batch(4, 2)


def test_sessions_epochs() -> None:
    cache = ShareSessionCache(max_sessions=1)
    session, gone = cache.open("g", "m")
    assert gone == []
    assert cache.continue_("g", "m", 2)[0] == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert cache.continue_("g", "m", 1) == (ErrorCode.NONE, session)
    assert cache.continue_("g", "x", 1) == (ErrorCode.SHARE_SESSION_NOT_FOUND, None)
    _, evicted = cache.open("g", "other")
    assert evicted == [session]

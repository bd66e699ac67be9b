"""ProducerStateManager: Kafka's idempotence and transaction rules (ProducerAppendInfo.java)."""

from __future__ import annotations

from pathlib import Path

import pytest

from exactly.errors import ErrorCode, KafkaError
from exactly.records import ControlRecordType, EndTxnMarker
from exactly.storage.producer_state import (
    INT32_MAX,
    AppendOrigin,
    CompletedTxn,
    ProducerStateManager,
)

HW = 1 << 40


def psm(tmp_path: Path | None = None) -> ProducerStateManager:
    return ProducerStateManager(tmp_path, 86_400_000)


def append(
    m: ProducerStateManager,
    pid: int,
    epoch: int,
    first_seq: int,
    last_seq: int,
    offset: int,
    *,
    txn: bool = False,
    ts: int = 1000,
    origin: AppendOrigin = AppendOrigin.CLIENT,
) -> None:
    info = m.prepare_update(pid, origin)
    info.append_data_batch(epoch, first_seq, last_seq, ts, offset, offset + (last_seq - first_seq), txn)
    m.update(info)
    m.update_map_end_offset(offset + (last_seq - first_seq) + 1)


def marker(
    m: ProducerStateManager, pid: int, epoch: int, kind: ControlRecordType, offset: int, coord: int = 0
) -> CompletedTxn | None:
    info = m.prepare_update(pid, AppendOrigin.COORDINATOR)
    done = info.append_end_txn_marker(EndTxnMarker(kind, coord), epoch, offset, 1000)
    m.update(info)
    if done is not None:
        m.complete_txn(done, HW)
    return done


def code(exc: pytest.ExceptionInfo[KafkaError]) -> ErrorCode:
    return exc.value.code


def test_unknown_producer_accepts_any_sequence() -> None:
    m = psm()
    append(m, 1, 0, 42, 44, 0)
    entry = m.last_entry(1)
    assert entry is not None
    assert (entry.producer_epoch, entry.last_seq) == (0, 44)


def test_in_sequence_and_out_of_order() -> None:
    m = psm()
    append(m, 1, 0, 0, 4, 0)
    append(m, 1, 0, 5, 5, 5)
    with pytest.raises(KafkaError) as gap:
        append(m, 1, 0, 7, 7, 6)
    assert code(gap) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    with pytest.raises(KafkaError) as old:
        append(m, 1, 0, 3, 3, 6)
    assert code(old) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_sequence_wraps_at_int32_max() -> None:
    m = psm()
    append(m, 1, 0, INT32_MAX - 1, INT32_MAX, 0)
    append(m, 1, 0, 0, 1, 2)
    entry = m.last_entry(1)
    assert entry is not None
    assert entry.last_seq == 1


def test_duplicate_detection_last_five_batches_same_epoch() -> None:
    m = psm()
    for i in range(7):
        append(m, 1, 0, i * 2, i * 2 + 1, i * 2)
    entry = m.last_entry(1)
    assert entry is not None
    assert len(entry.batches) == 5
    dup = entry.find_duplicate_batch(0, 6, 7)
    assert dup is not None
    assert (dup.first_offset, dup.last_offset) == (6, 7)
    assert entry.find_duplicate_batch(0, 2, 3) is None  # fell out of the cache
    assert entry.find_duplicate_batch(0, 6, 6) is None  # ranges must match exactly
    assert entry.find_duplicate_batch(1, 6, 7) is None  # other epoch


def test_epoch_rules() -> None:
    m = psm()
    append(m, 1, 3, 0, 0, 0)
    with pytest.raises(KafkaError) as fenced:
        append(m, 1, 2, 1, 1, 1)
    assert code(fenced) == ErrorCode.INVALID_PRODUCER_EPOCH
    with pytest.raises(KafkaError) as new_epoch_bad_seq:
        append(m, 1, 4, 5, 5, 1)
    assert code(new_epoch_bad_seq) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    append(m, 1, 4, 0, 0, 1)  # bump clears the cache
    entry = m.last_entry(1)
    assert entry is not None
    assert entry.producer_epoch == 4
    assert [b.last_seq for b in entry.batches] == [0]


def test_replication_origin_skips_checks() -> None:
    m = psm()
    append(m, 1, 3, 0, 0, 0)
    append(m, 1, 3, 9, 9, 1, origin=AppendOrigin.REPLICATION)
    append(m, 1, 2, 0, 0, 2, origin=AppendOrigin.REPLICATION)


def test_transactions_and_lso() -> None:
    m = psm()
    assert m.first_unstable_offset is None
    append(m, 1, 0, 0, 0, 10, txn=True)
    append(m, 2, 0, 0, 0, 11, txn=True)
    append(m, 1, 0, 1, 1, 12, txn=True)
    assert m.first_unstable_offset == 10
    assert [t.first_offset for t in m.ongoing_transactions()] == [10, 11]
    with pytest.raises(KafkaError) as bad:
        append(m, 1, 0, 2, 2, 13, txn=False)
    assert code(bad) == ErrorCode.INVALID_TXN_STATE
    info = m.prepare_update(1, AppendOrigin.COORDINATOR)
    done = info.append_end_txn_marker(EndTxnMarker(ControlRecordType.ABORT, 0), 0, 13, 1000)
    assert done == CompletedTxn(1, 10, 13, True)
    m.update(info)
    assert m.last_stable_offset(done) == 11  # producer 2 is still open
    m.complete_txn(done, HW)
    assert m.first_unstable_offset == 11
    done2 = marker(m, 2, 0, ControlRecordType.COMMIT, 14)
    assert done2 == CompletedTxn(2, 11, 14, False)
    assert m.first_unstable_offset is None
    assert marker(m, 2, 0, ControlRecordType.COMMIT, 15) is None  # empty transaction


def test_unreplicated_completed_txn_holds_lso_until_hw() -> None:
    m = psm()
    append(m, 1, 0, 0, 0, 0, txn=True)
    info = m.prepare_update(1, AppendOrigin.COORDINATOR)
    done = info.append_end_txn_marker(EndTxnMarker(ControlRecordType.COMMIT, 0), 0, 1, 1000)
    m.update(info)
    assert done is not None
    m.complete_txn(done, high_watermark=1)
    assert m.first_unstable_offset == 0
    m.on_high_watermark_updated(2)
    assert m.first_unstable_offset is None


def test_coordinator_epoch_fencing_and_old_epoch_marker() -> None:
    m = psm()
    append(m, 1, 5, 0, 0, 0, txn=True)
    marker(m, 1, 5, ControlRecordType.COMMIT, 1, coord=3)
    append(m, 1, 5, 1, 1, 2, txn=True)
    with pytest.raises(KafkaError) as fenced:
        marker(m, 1, 5, ControlRecordType.COMMIT, 3, coord=2)
    assert code(fenced) == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    with pytest.raises(KafkaError) as old:
        marker(m, 1, 4, ControlRecordType.ABORT, 3, coord=3)
    assert code(old) == ErrorCode.INVALID_PRODUCER_EPOCH
    # A marker with a bumped epoch (TV2) is accepted and moves the epoch.
    marker(m, 1, 6, ControlRecordType.ABORT, 3, coord=3)
    entry = m.last_entry(1)
    assert entry is not None
    assert (entry.producer_epoch, entry.current_txn_first_offset, entry.coordinator_epoch) == (6, None, 3)


def test_expiry_skips_open_transactions() -> None:
    m = ProducerStateManager(None, 1000)
    append(m, 1, 0, 0, 0, 0, ts=100)
    append(m, 2, 0, 0, 0, 1, ts=100, txn=True)
    append(m, 3, 0, 0, 0, 2, ts=900)
    assert m.remove_expired_producers(1100) == [1]
    assert sorted(m.producers) == [2, 3]


def test_snapshot_roundtrip_restores_state(tmp_path: Path) -> None:
    m = psm(tmp_path)
    for i in range(3):
        append(m, 1, 0, i, i, i)
    append(m, 2, 1, 0, 0, 3, txn=True)
    m.update_map_end_offset(4)
    assert m.take_snapshot() == 4
    assert (tmp_path / "00000000000000000004.snapshot").exists()
    fresh = psm(tmp_path)
    assert fresh.truncate_and_reload(0, 10, 2000) == 4
    e1 = fresh.last_entry(1)
    assert e1 is not None
    assert [b.last_seq for b in e1.batches] == [0, 1, 2]  # all cached batches survive (format v2)
    assert fresh.first_unstable_offset == 3
    # Snapshots above the log end are removed; a corrupt one is skipped and deleted.
    again = psm(tmp_path)
    assert again.truncate_and_reload(0, 3, 2000) is None
    assert not (tmp_path / "00000000000000000004.snapshot").exists()
    m.take_snapshot()
    (tmp_path / "00000000000000000004.snapshot").write_bytes(b"\x00\x02garbage")
    assert psm(tmp_path).truncate_and_reload(0, 10, 2000) is None
    assert not (tmp_path / "00000000000000000004.snapshot").exists()


def test_open_transactions_wholly_below_the_log_start_are_dropped() -> None:
    m = psm()
    append(m, 1, 0, 0, 1, 10, txn=True)  # offsets 10-11, open (its marker lost in a crash)
    append(m, 2, 0, 0, 0, 12, txn=True)  # offset 12, open
    assert m.drop_transactions_below(12) == [10]
    assert [t.first_offset for t in m.ongoing_transactions()] == [12]
    assert m.first_unstable_offset == 12
    entry = m.last_entry(1)
    assert entry is not None
    assert entry.current_txn_first_offset is None
    assert (entry.producer_epoch, entry.last_seq) == (0, 1)  # the producer itself is still known
    # One that reaches the log start keeps holding the LSO: its records there are still readable.
    assert m.drop_transactions_below(12) == []
    assert m.drop_transactions_below(13) == [12]
    assert m.first_unstable_offset is None

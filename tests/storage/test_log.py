"""PartitionLog: appends, offsets, reads, duplicates, transactions, rolls, retention, timestamps."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from exactly.clock import ManualClock
from exactly.errors import ErrorCode, KafkaError
from exactly.records import RecordBatch, build_batch
from exactly.storage import files
from exactly.storage.config import LogConfig, MessageTimestampType
from exactly.storage.leader_epoch import read_checkpoint as read_leader_epochs
from exactly.storage.loader import create_log, load_log
from exactly.storage.log import Isolation, PartitionLog
from exactly.storage.txn_index import FetchAbortedTxn
from exactly.storage.validator import validate_client_batches
from exactly.verify.disk import read_ledger
from tests.storage.helpers import leader_append, leader_append_marker

from .helpers import T0, abort, batches, commit, data_batch, open_log, read_all


def test_append_assigns_offsets_and_stores_client_bytes(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    sent = [data_batch(3, value=b"a"), data_batch(2, value=b"b")]
    infos = [leader_append(plog, b, leader_epoch=7) for b in sent]
    assert [(i.first_offset, i.last_offset) for i in infos] == [(0, 2), (3, 4)]
    assert plog.log_end_offset == plog.high_watermark == plog.last_stable_offset == 5
    stored = read_all(plog)
    for original, got in zip(sent, stored, strict=True):
        raw = bytes(got.buffer)
        assert raw[8:12] == original[8:12]
        assert raw[16:] == original[16:]
        assert got.partition_leader_epoch == 7
        got.validate()
    assert [b.base_offset for b in stored] == [0, 3]


def test_multiple_batches_in_one_append(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    raw = data_batch(2) + data_batch(3)
    checked = validate_client_batches(raw, plog.config, T0)
    info = leader_append(plog, raw, validated=checked)
    assert (info.first_offset, info.last_offset, info.records_count) == (0, 4, 5)
    assert [b.base_offset for b in read_all(plog)] == [0, 2]


@pytest.mark.parametrize(
    ("mutate", "code"),
    [
        (lambda b: b[:-1], ErrorCode.CORRUPT_MESSAGE),
        (lambda b: b[:30] + bytes([b[30] ^ 1]) + b[31:], ErrorCode.CORRUPT_MESSAGE),
        (lambda b: b[:16] + b"\x01" + b[17:], ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT),
        (lambda b: b"", ErrorCode.INVALID_RECORD),
    ],
)
def test_validation_errors(tmp_path: Path, mutate: object, code: ErrorCode) -> None:
    plog = open_log(tmp_path / "t-0")
    with pytest.raises(KafkaError) as e:
        leader_append(plog, mutate(data_batch()))  # type: ignore[operator]
    assert e.value.code == code
    assert plog.log_end_offset == 0


def test_client_rules(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", LogConfig(max_message_bytes=200))
    from exactly.records.control import build_end_txn_marker_batch

    cases = [
        (build_end_txn_marker_batch(1, 0, commit()), ErrorCode.INVALID_RECORD),
        (data_batch(pid=1, epoch=0, seq=-1), ErrorCode.INVALID_RECORD),
        (data_batch(value=b"x" * 300), ErrorCode.MESSAGE_TOO_LARGE),
    ]
    for raw, code in cases:
        with pytest.raises(KafkaError) as e:
            leader_append(plog, raw)
        assert e.value.code == code


def test_duplicate_returns_original_offsets_and_appends_nothing(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    leader_append(plog, data_batch(2, pid=5, epoch=0, seq=0))
    leader_append(plog, data_batch(3, pid=5, epoch=0, seq=2))
    leader_append(plog, data_batch(1))
    dup = leader_append(plog, data_batch(2, pid=5, epoch=0, seq=0))
    assert dup.duplicate
    assert (dup.first_offset, dup.last_offset) == (0, 1)
    assert plog.log_end_offset == 6
    with pytest.raises(KafkaError) as e:
        leader_append(plog, data_batch(1, pid=5, epoch=0, seq=9))
    assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    with pytest.raises(KafkaError) as e2:
        leader_append(plog, data_batch(1, pid=5, epoch=-1 + 0, seq=5))  # epoch -1 < 0
    assert e2.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert plog.log_end_offset == 6


def test_read_limits_and_out_of_range(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    for _ in range(10):
        leader_append(plog, data_batch(2, value=b"x" * 100))
    size = len(data_batch(2, value=b"x" * 100))
    info = plog.read(5, 3 * size)  # offset 5 is inside batch [4, 5]
    got = batches(info.records)
    assert [b.base_offset for b in got] == [4, 6, 8]
    assert info.next_offset == 10
    assert info.aborted_transactions is None
    assert batches(plog.read(0, 10).records)[0].base_offset == 0  # min_one_message
    assert len(plog.read(0, 10, min_one_message=False).records) == 0
    assert len(plog.read(20, 100).records) == 0
    with pytest.raises(KafkaError) as e:
        plog.read(21, 100)
    assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_transactions_lso_and_read_committed(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    leader_append(plog, data_batch(1))  # 0
    leader_append(plog, data_batch(2, pid=1, epoch=0, seq=0, txn=True))  # 1-2
    leader_append(plog, data_batch(1, pid=2, epoch=0, seq=0, txn=True))  # 3
    leader_append(plog, data_batch(1))  # 4
    assert plog.last_stable_offset == 1
    assert plog.high_watermark == 5
    assert plog.ongoing_transactions()[0].first_offset == 1
    committed = plog.read(0, 1 << 20, Isolation.READ_COMMITTED)
    assert [b.base_offset for b in batches(committed.records)] == [0]
    assert committed.last_stable_offset == 1
    leader_append_marker(plog, 1, 0, abort())  # 5
    assert plog.last_stable_offset == 3
    leader_append_marker(plog, 2, 0, commit())  # 6
    assert plog.last_stable_offset == plog.high_watermark == 7
    info = plog.read(0, 1 << 20, Isolation.READ_COMMITTED)
    assert [b.base_offset for b in batches(info.records)] == [0, 1, 3, 4, 5, 6]
    assert info.aborted_transactions == [FetchAbortedTxn(1, 1)]
    assert plog.read(6, 1 << 20, Isolation.READ_COMMITTED).aborted_transactions == []
    (entry,) = plog.segments[0].txn_index.entries
    assert (entry.producer_id, entry.first_offset, entry.last_offset, entry.last_stable_offset) == (
        1,
        1,
        5,
        3,
    )


def test_rolls_by_size_and_time(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    plog = open_log(tmp_path / "t-0", LogConfig(segment_bytes=500, segment_ms=1000), clock)
    for _ in range(10):
        leader_append(plog, data_batch(1, value=b"x" * 100))
    assert len(plog.segments) == 5  # two 171-byte batches per 500-byte segment
    assert all(s.size <= 500 for s in plog.segments)
    clock.advance(2000)
    leader_append(plog, data_batch(1, ts=clock.milliseconds()))
    leader_append(plog, data_batch(1, ts=clock.milliseconds()))
    assert len(plog.segments) == 6
    logs = sorted(n for n in os.listdir(tmp_path / "t-0") if n.endswith(".log"))
    assert logs[-1] == "00000000000000000010.log"  # the time roll's new segment (its indexes come at a flush)
    assert any(n.endswith(".snapshot") for n in os.listdir(tmp_path / "t-0"))
    assert [b.base_offset for b in read_all(plog)] == list(range(12))


def test_retention_by_size_time_and_delete_records(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    cfg = LogConfig(segment_bytes=400, retention_bytes=800, retention_ms=10_000)
    plog = open_log(tmp_path / "t-0", cfg, clock)
    for i in range(12):
        leader_append(plog, data_batch(1, value=b"x" * 100, ts=T0 + i))
    assert len(plog.segments) == 6
    assert plog.delete_old_segments() == 3  # size: 6 x 342 bytes, keep <= 800
    assert plog.log_start_offset == 6
    with pytest.raises(KafkaError):
        plog.read(5, 100)
    clock.advance(20_000)
    plog.delete_old_segments()  # time: everything, active segment rolled first
    assert plog.log_start_offset == 12
    assert plog.log_end_offset == 12
    leader_append(plog, data_batch(1, ts=clock.milliseconds()))
    leader_append(plog, data_batch(1, ts=clock.milliseconds()))
    assert plog.delete_records_before(13) == 13
    assert [b.base_offset for b in read_all(plog)] == [13]
    with pytest.raises(KafkaError) as e:
        plog.delete_records_before(99)
    assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_retention_never_passes_the_lso(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=300, retention_bytes=0)
    plog = open_log(tmp_path / "t-0", cfg)
    leader_append(plog, data_batch(1, value=b"x" * 100))
    leader_append(plog, data_batch(1, value=b"x" * 100, pid=1, epoch=0, seq=0, txn=True))  # 1
    for _ in range(6):
        leader_append(plog, data_batch(1, value=b"x" * 100))
    plog.delete_old_segments()
    assert plog.log_start_offset <= 1 == plog.last_stable_offset
    leader_append_marker(plog, 1, 0, commit())
    plog.delete_old_segments()
    assert plog.log_start_offset > 1


def test_offset_for_timestamp(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", LogConfig(segment_bytes=400, index_interval_bytes=1))
    for i in range(10):
        builder_ts = T0 + 10 * i
        leader_append(plog, build_batch([(b"k", b"v"), (b"k", b"w")], timestamp=builder_ts))
    found = plog.offset_for_timestamp(T0 + 35)
    assert found is not None
    assert (found.offset, found.timestamp) == (8, T0 + 40)
    exact = plog.offset_for_timestamp(T0 + 40)
    assert exact is not None
    assert exact.offset == 8
    assert plog.offset_for_timestamp(T0 + 1000) is None
    assert plog.offset_for_timestamp(-2).offset == 0  # type: ignore[union-attr]
    assert plog.offset_for_timestamp(-1).offset == 20  # type: ignore[union-attr]
    top = plog.offset_for_timestamp(-3)
    assert top is not None
    assert top.timestamp == T0 + 90
    assert top.offset == 18  # the first record carrying the max timestamp (KAFKA-16310), not the batch's last


def test_log_append_time(tmp_path: Path) -> None:
    clock = ManualClock(T0 + 5)
    cfg = LogConfig(message_timestamp_type=MessageTimestampType.LOG_APPEND_TIME)
    plog = open_log(tmp_path / "t-0", cfg, clock)
    info = leader_append(plog, data_batch(2, ts=1))
    assert info.log_append_time == T0 + 5
    (stored,) = read_all(plog)
    stored.validate()
    assert stored.max_timestamp == T0 + 5
    assert stored.timestamp_type == 1
    assert [r.timestamp for r in stored.records()] == [T0 + 5, T0 + 5]


def test_flush_group_commit_and_flush_policy(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    for _ in range(5):
        leader_append(plog, data_batch(1))
    assert plog.recovery_point == 0
    assert plog.needs_flush(5)
    results: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(plog.flush(upto=5))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [5, 5, 5, 5]
    assert plog.recovery_point == 5
    assert not plog.needs_flush(5)
    relaxed = open_log(tmp_path / "r-0", LogConfig(flush_messages=3))
    leader_append(relaxed, data_batch(1))
    assert relaxed.recovery_point == 0
    leader_append(relaxed, data_batch(2))
    assert relaxed.recovery_point == 3  # flush.messages reached


def test_an_append_does_not_move_the_high_watermark(tmp_path: Path) -> None:
    """What is committed is the leader's decision (exactly.replication.partition), not storage's."""
    plog = open_log(tmp_path / "t-0")
    info = plog.append_as_leader(data_batch(3))
    assert (info.first_offset, info.last_offset, plog.log_end_offset) == (0, 2, 3)
    assert plog.high_watermark == 0
    assert plog.read(0, 1 << 20).records.nbytes == 0  # nothing readable below the high watermark
    plog.update_high_watermark(3)
    assert len(read_all(plog)) == 1
    plog.update_high_watermark(10)  # never past the log end
    assert plog.high_watermark == 3
    clock = ManualClock(T0)
    timed = open_log(tmp_path / "m-0", LogConfig(flush_ms=100), clock)
    leader_append(timed, data_batch(1))
    assert not timed.flush_if_needed()
    clock.advance(100)
    assert timed.flush_if_needed()
    assert timed.recovery_point == 1


def test_verification_guard_is_called_for_transactional_writes(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    calls: list[tuple[int, int, int]] = []

    def guard(pid: int, epoch: int, seq: int) -> None:
        calls.append((pid, epoch, seq))
        if pid == 2:
            raise KafkaError(ErrorCode.INVALID_TXN_STATE, "not in transaction")

    leader_append(plog, data_batch(1, pid=1, epoch=0, seq=0, txn=True), verification_guard=guard)
    leader_append(plog, data_batch(1, pid=1, epoch=0, seq=1, txn=True), verification_guard=guard)
    with pytest.raises(KafkaError):
        leader_append(plog, data_batch(1, pid=2, epoch=0, seq=0, txn=True), verification_guard=guard)
    assert calls == [(1, 0, 0), (2, 0, 0)]  # only the first batch of a transaction is verified


def test_producer_expiry(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    plog = open_log(tmp_path / "t-0", LogConfig(producer_id_expiration_ms=1000), clock)
    leader_append(plog, data_batch(1, pid=1, epoch=0, seq=0))
    clock.advance(1000)
    assert plog.remove_expired_producers() == [1]
    leader_append(plog, data_batch(1, pid=1, epoch=0, seq=77))  # unknown again: any sequence


def test_batches_are_whole_and_crc_valid(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", LogConfig(segment_bytes=2000))
    for i in range(30):
        leader_append(plog, data_batch(1 + i % 4, value=bytes(i * 7)))
    for off in range(plog.log_end_offset):
        for mb in (1, 150, 700):
            for b in batches(plog.read(off, mb).records):
                RecordBatch(bytes(b.buffer)).verify_crc()


def test_a_transactional_duplicate_of_an_ended_transaction_is_a_reused_sequence(tmp_path: Path) -> None:
    """A retry inside the open transaction is answered with the original offsets; the same sequence after
    the transaction's marker (librdkafka reusing a purged batch's sequence without an epoch bump) is
    OUT_OF_ORDER_SEQUENCE_NUMBER, not an acknowledgement of the aborted batch."""
    plog = open_log(tmp_path / "t-0")
    leader_append(plog, data_batch(1, pid=7, epoch=0, seq=0, txn=True))  # 0
    leader_append_marker(plog, 7, 0, commit())  # 1
    leader_append(plog, data_batch(1, pid=7, epoch=0, seq=1, txn=True))  # 2
    retry = leader_append(plog, data_batch(1, pid=7, epoch=0, seq=1, txn=True))
    assert retry.duplicate
    assert (retry.first_offset, retry.last_offset) == (2, 2)
    leader_append_marker(plog, 7, 0, abort())  # 3
    with pytest.raises(KafkaError) as e:
        leader_append(plog, data_batch(1, pid=7, epoch=0, seq=1, txn=True))
    assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert plog.log_end_offset == 4
    # the next transaction goes on with the next sequence; a retry of it is still a duplicate
    leader_append(plog, data_batch(1, pid=7, epoch=0, seq=2, txn=True))  # 4
    assert leader_append(plog, data_batch(1, pid=7, epoch=0, seq=2, txn=True)).first_offset == 4
    # non-transactional idempotent duplicates are unchanged: answered with the original offsets
    leader_append(plog, data_batch(1, pid=8, epoch=0, seq=0))  # 5
    assert leader_append(plog, data_batch(1, pid=8, epoch=0, seq=0)).duplicate
    assert plog.log_end_offset == 6


def test_a_small_log_makes_no_index_or_snapshot_file_at_close_and_loads_the_same(tmp_path: Path) -> None:
    """A clean stop of a log of a few KiB writes nothing but what its log needs: the next load rebuilds the
    largest timestamp and the producer state by a scan (the first stop after creating 100,000 partitions
    made 300,000 files)."""
    d = tmp_path / "t-0"
    plog = open_log(d, LogConfig(), ManualClock(T0))
    leader_append(plog, data_batch(2, pid=7, epoch=0, seq=0, ts=T0 + 50))
    leader_append(plog, data_batch(1, pid=7, epoch=0, seq=2, ts=T0 + 10))  # the max stays in batch 1
    plog.close()
    assert sorted(os.listdir(d)) == ["00000000000000000000.log"]
    again = load_log(d, "t", 0, LogConfig(), ManualClock(T0), had_clean_shutdown=True)
    seg = again.active_segment
    assert (seg.max_timestamp, seg.offset_of_max_timestamp) == (T0 + 50, 1)
    assert again.log_end_offset == 3
    retried = leader_append(again, data_batch(1, pid=7, epoch=0, seq=2, ts=T0 + 10))
    assert retried.duplicate  # the producer state came back without a snapshot file
    assert again.log_end_offset == 3
    assert [b.base_offset for b in read_all(again)] == [0, 2]
    again.close()


# -- leader epochs -------------------------------------------------------------------------------------------

EPOCH_CFG = LogConfig(segment_bytes=1000, index_interval_bytes=100)  # not small: makes its checkpoint


def epoch_pairs(plog: PartitionLog) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in plog.leader_epochs.entries]


def epoch_file(plog: PartitionLog) -> list[tuple[int, int]] | None:
    entries = read_leader_epochs(plog.directory / files.LEADER_EPOCH_CHECKPOINT)
    return None if entries is None else [(e.epoch, e.start_offset) for e in entries]


def test_a_new_partition_is_at_epoch_0_and_its_first_append_assigns_it(tmp_path: Path) -> None:
    plog = create_log(tmp_path / "t-0", "t", 0, EPOCH_CFG, ManualClock(T0))
    assert plog.leader_epoch == 0
    assert epoch_pairs(plog) == []
    assert plog.end_offset_for_epoch(0) == (0, 0)  # as Kafka's leader, which assigned (0, 0) when elected
    assert plog.end_offset_for_epoch(1) == (-1, -1)
    assert plog.end_offset_for_epoch(-1) == (-1, -1)
    leader_append(plog, data_batch(3, value=b"x" * 60))
    leader_append(plog, data_batch(2, value=b"x" * 60))
    assert epoch_pairs(plog) == [(0, 0)]
    assert plog.end_offset_for_epoch(0) == (0, 5)
    assert plog.end_offset_for_epoch(1) == (-1, -1)


def test_appends_in_a_new_epoch_start_an_entry(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", EPOCH_CFG)
    leader_append(plog, data_batch(3))
    leader_append(plog, data_batch(2), leader_epoch=3)
    leader_append(plog, data_batch(1), leader_epoch=3)
    assert plog.leader_epoch == 3
    assert epoch_pairs(plog) == [(0, 0), (3, 3)]
    assert [b.partition_leader_epoch for b in read_all(plog)] == [0, 3, 3]
    assert plog.end_offset_for_epoch(0) == (0, 3)
    assert plog.end_offset_for_epoch(2) == (0, 3)
    assert plog.end_offset_for_epoch(3) == (3, 6)
    assert plog.end_offset_for_epoch(4) == (-1, -1)


def test_flush_writes_the_checkpoint_through_the_files_module(tmp_path: Path) -> None:
    data = tmp_path / "data"
    ledger = tmp_path / "ledger"
    files.open_fsync_ledger(ledger, data)
    try:
        plog = open_log(data / "t-0", EPOCH_CFG)
        leader_append(plog, data_batch(2, value=b"x" * 60))
        assert epoch_file(plog) is None  # nothing is written on the append path
        leader_append(plog, data_batch(1, value=b"x" * 60), leader_epoch=2)
        plog.flush()
        assert epoch_file(plog) == [(0, 0), (2, 2)]
        assert (plog.directory / files.LEADER_EPOCH_CHECKPOINT).read_bytes() == b"0\n2\n0 0\n2 2\n"
        durable = read_ledger(ledger)
        assert durable["t-0/" + files.LEADER_EPOCH_CHECKPOINT] == len(b"0\n2\n0 0\n2 2\n")
        plog.close()
    finally:
        files.close_fsync_ledger()


def test_truncate_to_truncates_the_epochs(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", EPOCH_CFG)
    for epoch in (0, 0, 1, 1, 4, 4):
        leader_append(plog, data_batch(2, value=b"x" * 60), leader_epoch=epoch)
    plog.flush()
    assert epoch_file(plog) == [(0, 0), (1, 4), (4, 8)]
    plog.truncate_to(6)
    assert epoch_pairs(plog) == [(0, 0), (1, 4)]
    assert plog.leader_epoch == 4  # still the leader's epoch
    assert plog.end_offset_for_epoch(1) == (1, 6)  # as if (4, 6) were there: Kafka's leader has it
    assert plog.end_offset_for_epoch(4) == (4, 6)
    plog.flush()  # nothing to fsync but the changed checkpoint
    assert epoch_file(plog) == [(0, 0), (1, 4)]
    leader_append(plog, data_batch(1, value=b"x" * 60), leader_epoch=4)
    assert epoch_pairs(plog) == [(0, 0), (1, 4), (4, 6)]
    plog.close()
    assert epoch_file(plog) == [(0, 0), (1, 4), (4, 6)]


def test_delete_records_and_retention_truncate_the_epochs_from_the_start(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    plog = open_log(tmp_path / "t-0", LogConfig(segment_bytes=400, index_interval_bytes=100), clock)
    for i, epoch in enumerate((0, 0, 1, 1, 2, 2)):
        leader_append(plog, data_batch(1, value=b"x" * 100, ts=T0 + i), leader_epoch=epoch)
    assert epoch_pairs(plog) == [(0, 0), (1, 2), (2, 4)]
    plog.flush()
    assert plog.delete_records_before(3) == 3
    assert epoch_pairs(plog) == [(1, 3), (2, 4)]
    plog.flush()
    assert epoch_file(plog) == [(1, 3), (2, 4)]
    plog.update_config(LogConfig(segment_bytes=400, index_interval_bytes=100, retention_bytes=0))
    plog.delete_old_segments()
    assert plog.log_start_offset == 6
    assert epoch_pairs(plog) == [(2, 6)]
    assert plog.end_offset_for_epoch(1) == (1, 6)  # below the earliest epoch: its start
    plog.close()
    assert epoch_file(plog) == [(2, 6)]


def test_a_small_log_makes_no_leader_epoch_file_and_rebuilds_its_epochs(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    plog = open_log(d, LogConfig(), ManualClock(T0))
    leader_append(plog, data_batch(1))
    leader_append(plog, data_batch(1), leader_epoch=5)
    plog.flush()
    plog.close()
    assert sorted(os.listdir(d)) == ["00000000000000000000.log"]
    again = load_log(d, "t", 0, LogConfig(), ManualClock(T0), had_clean_shutdown=True)
    assert epoch_pairs(again) == [(0, 0), (5, 1)]
    assert again.leader_epoch == 5
    assert again.end_offset_for_epoch(0) == (0, 1)
    for _ in range(40):  # no longer small: the next flush writes the checkpoint
        leader_append(again, data_batch(1, value=b"x" * 200), leader_epoch=5)
    again.flush()
    assert epoch_file(again) == [(0, 0), (5, 1)]

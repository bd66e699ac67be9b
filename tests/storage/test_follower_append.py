"""A follower replica's storage: `PartitionLog.append_as_follower` fed from a leader log's
`read(..., Isolation.LOG_END)`, `update_follower_high_watermark`, `truncate_to` and
`truncate_fully_and_start_at`.

The leader and the follower are two logs in two directories. A caught-up follower must equal its leader:
the same segment files byte for byte, the same producer state, open transactions, LSO, aborted-transaction
index and leader-epoch cache; a follower behind its leader holds a byte prefix of the leader's log.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from exactly.clock import ManualClock
from exactly.errors import ErrorCode, KafkaError
from exactly.records import Compression, RecordBatch, build_batch, iter_batches
from exactly.storage.config import CleanupPolicy, LogConfig, MessageTimestampType
from exactly.storage.log import (
    LATEST_TIMESTAMP,
    Isolation,
    PartitionLog,
    UnexpectedAppendOffsetError,
)
from exactly.storage.txn_index import AbortedTxn

from .helpers import (
    T0,
    abort,
    commit,
    consume_committed,
    data_batch,
    leader_append,
    leader_append_marker,
    open_log,
    read_all,
    reopen,
)

SMALL = LogConfig(segment_bytes=600, index_interval_bytes=64)

# -- helpers ----------------------------------------------------------------------------------------------


def fetch(leader: PartitionLog, offset: int, max_bytes: int = 1 << 20) -> bytes:
    """What the leader answers a follower's Fetch at `offset`."""
    info = leader.read(offset, max_bytes, Isolation.LOG_END)
    assert info.aborted_transactions is None
    return bytes(info.records)


def fetch_across(leader: PartitionLog, offset: int, max_bytes: int = 1 << 20) -> bytes:
    """Batches from `offset` across segment boundaries, up to `max_bytes` (at least one batch): one
    Fetch answers from a single segment, so this is what makes a follower roll inside one append."""
    out = b""
    while offset < leader.log_end_offset and (not out or len(out) < max_bytes):
        data = fetch(leader, offset, max_bytes - len(out) if out else max_bytes)
        if not data:
            break
        out += data
        offset = list(iter_batches(data))[-1].next_offset
    return out


def replicate(leader: PartitionLog, follower: PartitionLog, max_bytes: int = 1 << 20) -> int:
    """Fetch and append until the follower has the leader's log; the follower takes the leader's HW after
    each fetch (as Kafka's fetcher does). Returns the number of fetches."""
    fetches = 0
    while follower.log_end_offset < leader.log_end_offset:
        data = fetch(leader, follower.log_end_offset, max_bytes)
        assert data, "the leader returns at least one batch"
        info = follower.append_as_follower(data)
        assert info.first_offset >= 0
        follower.update_follower_high_watermark(leader.high_watermark)
        fetches += 1
    follower.update_follower_high_watermark(leader.high_watermark)
    return fetches


def segment_files(plog: PartitionLog) -> dict[int, bytes]:
    return {seg.base_offset: seg.log_path.read_bytes() for seg in plog.segments}


def txn_entries(plog: PartitionLog) -> dict[int, list[AbortedTxn]]:
    return {seg.base_offset: seg.txn_index.entries for seg in plog.segments}


def epochs(plog: PartitionLog) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in plog.leader_epochs.entries]


def producers(plog: PartitionLog) -> list[object]:
    return sorted(plog.producer_infos(), key=lambda p: p.producer_id)


def assert_same(leader: PartitionLog, follower: PartitionLog) -> None:
    """A caught-up follower (same log end, same high watermark) equals its leader."""
    assert follower.log_end_offset == leader.log_end_offset
    assert follower.log_start_offset == leader.log_start_offset
    assert follower.high_watermark == leader.high_watermark
    assert segment_files(follower) == segment_files(leader)
    assert producers(follower) == producers(leader)
    assert follower.ongoing_transactions() == leader.ongoing_transactions()
    assert follower.producer_state.first_unstable_offset == leader.producer_state.first_unstable_offset
    assert follower.last_stable_offset == leader.last_stable_offset
    assert txn_entries(follower) == txn_entries(leader)
    end = leader.log_end_offset
    start = leader.log_start_offset
    assert follower.collect_aborted_transactions(start, end) == leader.collect_aborted_transactions(
        start, end
    )
    assert epochs(follower) == epochs(leader)
    assert consume_committed(follower, start) == consume_committed(leader, start)


def assert_prefix(leader: PartitionLog, follower: PartitionLog) -> None:
    """A follower behind its leader holds a byte prefix of the leader's log, segment by segment."""
    assert follower.log_end_offset <= leader.log_end_offset
    theirs = segment_files(leader)
    mine = segment_files(follower)
    for base, data in mine.items():
        if not data:
            continue
        assert base in theirs, f"segment {base} is not the leader's"
        assert theirs[base][: len(data)] == data
    assert epochs(follower) == [e for e in epochs(leader) if e[1] < follower.log_end_offset]


def compressed(n: int, *, pid: int = -1, epoch: int = -1, seq: int = -1) -> bytes:
    return build_batch(
        [(b"k%d" % i, b"value-%d" % i * 5) for i in range(n)],
        timestamp=T0,
        compression=Compression.GZIP,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


def fill_leader(leader: PartitionLog) -> None:
    """Every kind of batch: plain, idempotent, compressed, transactional (committed, aborted, open),
    several leader epochs."""
    leader_append(leader, data_batch(3), leader_epoch=0)
    leader_append(leader, data_batch(2, pid=1, epoch=0, seq=0), leader_epoch=0)
    leader_append(leader, compressed(4), leader_epoch=1)
    leader_append(leader, data_batch(2, pid=2, epoch=0, seq=0, txn=True), leader_epoch=1)
    leader_append(leader, data_batch(1, pid=1, epoch=0, seq=2), leader_epoch=1)
    leader_append(leader, data_batch(2, pid=3, epoch=0, seq=0, txn=True), leader_epoch=1)
    leader_append_marker(leader, 2, 0, commit(), leader_epoch=1)
    leader_append(leader, compressed(3, pid=1, epoch=0, seq=3), leader_epoch=3)
    leader_append_marker(leader, 3, 0, abort(), leader_epoch=3)
    leader_append(leader, data_batch(2, pid=2, epoch=0, seq=2, txn=True), leader_epoch=3)
    leader_append(leader, data_batch(5, value=b"v" * 40), leader_epoch=4)
    leader_append(leader, data_batch(1, pid=3, epoch=1, seq=0, txn=True), leader_epoch=4)
    leader_append_marker(leader, 3, 1, abort(), leader_epoch=4)


# -- appends ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("max_bytes", [1, 150, 700, 1 << 20])
def test_a_caught_up_follower_equals_its_leader(tmp_path: Path, max_bytes: int) -> None:
    leader = open_log(tmp_path / "leader" / "t-0", SMALL)
    follower = open_log(tmp_path / "follower" / "t-0", SMALL)
    fill_leader(leader)
    assert len(leader.segments) > 2  # rolls happened
    assert leader.ongoing_transactions()  # pid 2's second transaction is open
    replicate(leader, follower, max_bytes)
    assert_same(leader, follower)
    assert epochs(follower) == [(0, 0), (1, 5), (3, 15), (4, 21)]
    assert [t.producer_id for t in follower.collect_aborted_transactions(0, follower.log_end_offset)] == [
        3,
        3,
    ]
    assert follower.last_stable_offset == follower.ongoing_transactions()[0].first_offset
    assert follower.leader_epoch == 4
    # Compressed batches stay compressed (the bytes are the leader's, checked above).
    assert any(b.compression is Compression.GZIP for b in read_all(follower))


def test_the_follower_continues_appending_where_it_stopped(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader" / "t-0", SMALL)
    follower = open_log(tmp_path / "follower" / "t-0", SMALL)
    for round_ in range(4):
        leader_append(leader, data_batch(2, pid=1, epoch=0, seq=2 * round_), leader_epoch=round_)
        leader_append(leader, data_batch(1, pid=2, epoch=0, seq=round_, txn=True), leader_epoch=round_)
        leader_append_marker(leader, 2, 0, commit() if round_ % 2 else abort(), leader_epoch=round_)
        replicate(leader, follower, 200)
        assert_same(leader, follower)


def test_the_follower_info_and_a_partial_trailing_batch(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader" / "t-0")
    follower = open_log(tmp_path / "follower" / "t-0")
    for _ in range(3):
        leader_append(leader, data_batch(2), leader_epoch=2)
    data = fetch(leader, 0)
    sizes = [b.size_in_bytes for b in iter_batches(data)]
    cut = data[: sizes[0] + sizes[1] + 10]  # the third batch cut by max bytes
    info = follower.append_as_follower(cut)
    assert (info.first_offset, info.last_offset, info.records_count) == (0, 3, 4)
    assert info.valid_bytes == sizes[0] + sizes[1]
    assert info.log_append_time == -1
    assert not info.duplicate
    assert follower.log_end_offset == 4
    assert follower.high_watermark == 0  # the append does not move it
    # Nothing but a partial batch, or nothing at all: nothing appended.
    for nothing in (b"", fetch(leader, 4)[:20], fetch(leader, 4)[:-1]):
        info = follower.append_as_follower(nothing)
        assert (info.first_offset, info.last_offset, info.records_count, info.valid_bytes) == (-1, -1, 0, 0)
        assert follower.log_end_offset == 4
    follower.append_as_follower(fetch(leader, 4))
    follower.update_follower_high_watermark(leader.high_watermark)
    assert_same(leader, follower)


def _flip(data: bytes, position: int) -> bytes:
    return data[:position] + bytes([data[position] ^ 0x01]) + data[position + 1 :]


def test_a_corrupt_batch_appends_nothing(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader" / "t-0")
    follower = open_log(tmp_path / "follower" / "t-0")
    fill_leader(leader)
    replicate(leader, follower, 150)  # part of the way
    follower.truncate_to(12)
    before = (segment_files(follower), producers(follower), epochs(follower), follower.log_end_offset)
    data = fetch(leader, follower.log_end_offset)
    positions = [b.position for b in iter_batches(data)]
    assert len(positions) > 3
    for position in (positions[0] + 70, positions[2] + 30, len(data) - 1):  # records, CRC'd header, last
        with pytest.raises(KafkaError) as e:
            follower.append_as_follower(_flip(data, position))
        assert e.value.code == ErrorCode.CORRUPT_MESSAGE
    bad_magic = data[: positions[1] + 16] + b"\x01" + data[positions[1] + 17 :]
    with pytest.raises(KafkaError) as e:
        follower.append_as_follower(bad_magic)
    assert e.value.code == ErrorCode.CORRUPT_MESSAGE
    short = bytearray(data)
    short[positions[1] + 8 : positions[1] + 12] = (10).to_bytes(4, "big")  # batchLength below the minimum
    with pytest.raises(KafkaError) as e:
        follower.append_as_follower(bytes(short))
    assert e.value.code == ErrorCode.CORRUPT_MESSAGE
    after = (segment_files(follower), producers(follower), epochs(follower), follower.log_end_offset)
    assert after == before
    replicate(leader, follower)
    assert_same(leader, follower)


def test_offsets_that_do_not_follow_the_log_end_are_refused(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader" / "t-0")
    follower = open_log(tmp_path / "follower" / "t-0")
    for _ in range(5):
        leader_append(leader, data_batch(2))
    batches = [bytes(b.buffer) for b in iter_batches(fetch(leader, 0))]
    follower.append_as_follower(batches[0] + batches[1])
    # Again from the start: below the log end (Kafka's UnexpectedAppendOffsetException).
    with pytest.raises(UnexpectedAppendOffsetError) as e:
        follower.append_as_follower(batches[1] + batches[2])
    assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert (e.value.first_offset, e.value.last_offset) == (2, 3)
    with pytest.raises(KafkaError) as k:  # as Kafka: every batch is checked before the first offset
        follower.append_as_follower(batches[1] + _flip(batches[2], 70))
    assert k.value.code == ErrorCode.CORRUPT_MESSAGE
    # A hole after the log end (not a compacted topic).
    with pytest.raises(UnexpectedAppendOffsetError) as e:
        follower.append_as_follower(batches[3])
    assert (e.value.first_offset, e.value.last_offset) == (6, 7)
    # Out of order inside the append (Kafka's OffsetsOutOfOrderException) and a hole inside it.
    for bad in (batches[2] + batches[2], batches[2] + batches[1], batches[2] + batches[4]):
        with pytest.raises(KafkaError) as k:
            follower.append_as_follower(bad)
        assert k.value.code == ErrorCode.CORRUPT_MESSAGE
    assert follower.log_end_offset == 4
    assert [b.base_offset for b in read_all_to_end(follower)] == [0, 2]
    follower.append_as_follower(batches[2] + batches[3] + batches[4])
    follower.update_follower_high_watermark(leader.high_watermark)
    assert_same(leader, follower)


def read_all_to_end(plog: PartitionLog) -> list[RecordBatch]:
    out: list[RecordBatch] = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        got = list(iter_batches(bytes(plog.read(offset, 1 << 20, Isolation.LOG_END).records)))
        out.extend(got)
        offset = got[-1].next_offset
    return out


def test_a_compacted_topic_accepts_holes(tmp_path: Path) -> None:
    config = LogConfig(cleanup_policy=CleanupPolicy.COMPACT)
    leader = open_log(tmp_path / "leader" / "t-0", config)
    follower = open_log(tmp_path / "follower" / "t-0", config)
    for _ in range(4):
        leader_append(leader, data_batch(2))
    batches = [bytes(b.buffer) for b in iter_batches(fetch(leader, 0))]
    follower.append_as_follower(batches[0] + batches[2])  # what compaction may leave
    assert follower.log_end_offset == 6
    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append_as_follower(batches[1])
    follower.append_as_follower(batches[3])
    assert [b.base_offset for b in read_all_to_end(follower)] == [0, 4, 6]
    follower = reopen(follower, clean=False)  # recovery keeps the holes of a compacted log
    assert follower.log_end_offset == 8


def test_the_follower_obeys_flush_messages(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader" / "t-0")
    follower = open_log(tmp_path / "follower" / "t-0", LogConfig(flush_messages=5))
    for _ in range(4):
        leader_append(leader, data_batch(2))
    follower.append_as_follower(fetch(leader, 0, 80))  # 2 messages
    assert follower.recovery_point == 0
    follower.append_as_follower(fetch(leader, 2, 160))  # 4 more: 6 >= 5
    assert follower.recovery_point == follower.log_end_offset == 6


@pytest.mark.parametrize("ts_step", [0, 1])
def test_index_rolls_match_the_leader(tmp_path: Path, ts_step: int) -> None:
    """Rolls decided by a full offset index (one timestamp: the time index keeps one entry) or a full
    time index (rising timestamps), judged batch by batch inside one append."""
    config = LogConfig(segment_index_bytes=96, index_interval_bytes=1)  # 12 offset / 8 time index entries
    leader = open_log(tmp_path / "leader" / "t-0", config)
    follower = open_log(tmp_path / "follower" / "t-0", config)
    for i in range(60):
        leader_append(leader, data_batch(1 + i % 3, ts=T0 + i * ts_step))
    assert len(leader.segments) > 4
    follower.append_as_follower(fetch_across(leader, 0))  # the whole log in one append
    follower.update_follower_high_watermark(leader.high_watermark)
    assert_same(leader, follower)
    assert replicate(leader, follower) == 0


def test_size_rolls_inside_one_append_match_the_leader(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader" / "t-0", SMALL)
    fill_leader(leader)
    for max_bytes in (1, 300, 500, 1000, 1 << 20):
        follower = open_log(tmp_path / f"follower-{max_bytes}" / "t-0", SMALL)
        while follower.log_end_offset < leader.log_end_offset:
            follower.append_as_follower(fetch_across(leader, follower.log_end_offset, max_bytes))
        follower.update_follower_high_watermark(leader.high_watermark)
        assert_same(leader, follower)


def test_log_append_time_batches_are_copied(tmp_path: Path) -> None:
    config = LogConfig(message_timestamp_type=MessageTimestampType.LOG_APPEND_TIME)
    clock = ManualClock(T0 + 5000)
    leader = open_log(tmp_path / "leader" / "t-0", config, clock)
    follower = open_log(tmp_path / "follower" / "t-0", config, ManualClock(T0 + 99_999))
    leader_append(leader, data_batch(2, pid=1, epoch=0, seq=0))
    replicate(leader, follower)
    assert_same(leader, follower)
    assert [b.max_timestamp for b in read_all(follower)] == [T0 + 5000]


# -- the high watermark and LOG_END reads -----------------------------------------------------------------


def test_log_end_isolation_reads_past_the_high_watermark(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader" / "t-0")
    leader.append_as_leader(data_batch(2), leader_epoch=1)
    leader.append_as_leader(data_batch(1, pid=2, epoch=0, seq=0, txn=True), leader_epoch=1)
    leader.update_high_watermark(2)
    assert leader.read(0, 1 << 20).next_offset == 2
    assert leader.read(0, 1 << 20, Isolation.READ_COMMITTED).next_offset == 2
    info = leader.read(0, 1 << 20, Isolation.LOG_END)
    assert (info.next_offset, info.high_watermark, info.last_stable_offset) == (3, 2, 2)
    assert info.aborted_transactions is None
    assert leader.read(3, 1 << 20, Isolation.LOG_END).records.nbytes == 0
    with pytest.raises(KafkaError) as e:
        leader.read(4, 1 << 20, Isolation.LOG_END)
    assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    latest = leader.offset_for_timestamp(LATEST_TIMESTAMP, Isolation.LOG_END)
    assert latest is not None
    assert latest.offset == 3
    earliest_ts = leader.offset_for_timestamp(T0, Isolation.LOG_END)
    assert earliest_ts is not None
    assert earliest_ts.offset == 0


def test_the_follower_high_watermark_is_clamped_and_may_go_down(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader" / "t-0")
    follower = open_log(tmp_path / "follower" / "t-0")
    leader_append(leader, data_batch(1, pid=2, epoch=0, seq=0, txn=True))
    leader_append(leader, data_batch(2))
    leader_append_marker(leader, 2, 0, commit())  # offset 3
    leader_append(leader, data_batch(2))
    follower.append_as_follower(fetch(leader, 0))
    assert follower.high_watermark == 0
    assert follower.last_stable_offset == 0
    assert follower.update_follower_high_watermark(100) == 6  # clamped to the log end
    assert follower.update_follower_high_watermark(-5) == 0  # ... and to the log start
    # The committed transaction [0, 3] is unstable until the high watermark passes its marker.
    follower = reopen(follower, clean=True)
    follower.truncate_to(6)
    assert follower.update_follower_high_watermark(2) == 2
    assert follower.last_stable_offset == 2
    follower.truncate_to(4)  # rebuilt producer state: the marker at 3 is above the HW (2)
    assert follower.last_stable_offset == 0
    assert follower.update_follower_high_watermark(3) == 3
    assert follower.last_stable_offset == 0
    assert follower.update_follower_high_watermark(4) == 4
    assert follower.last_stable_offset == 4


def test_a_transaction_completed_above_the_follower_high_watermark_is_unstable(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader" / "t-0")
    follower = open_log(tmp_path / "follower" / "t-0")
    leader.append_as_leader(data_batch(1, pid=2, epoch=0, seq=0, txn=True))  # 0
    leader.append_as_leader(data_batch(2))  # 1-2
    leader.append_end_txn_marker(2, 0, abort())  # 3
    leader.append_as_leader(data_batch(1))  # 4
    follower.append_as_follower(fetch(leader, 0))
    for hw in (0, 2, 3, 4, 5):
        leader.update_high_watermark(hw)
        follower.update_follower_high_watermark(hw)
        assert follower.last_stable_offset == leader.last_stable_offset == (0 if hw <= 3 else hw)
        assert follower.producer_state.first_unstable_offset == leader.producer_state.first_unstable_offset


# -- truncation -------------------------------------------------------------------------------------------


def test_truncation_then_reappend(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader" / "t-0", SMALL)
    follower = open_log(tmp_path / "follower" / "t-0", SMALL)
    fill_leader(leader)
    replicate(leader, follower)
    boundaries = [b.base_offset for b in read_all_to_end(leader)] + [leader.log_end_offset]
    for offset in reversed(boundaries):
        follower.truncate_to(offset)
        assert follower.log_end_offset == offset
        assert_prefix(leader, follower)
        replicate(leader, follower, 300)
        assert_same(leader, follower)
    follower.truncate_to(0)
    assert follower.log_end_offset == 0
    assert not follower.producer_infos()
    assert not epochs(follower)
    replicate(leader, follower, 100)
    assert_same(leader, follower)


def test_truncate_to_an_open_transaction_and_a_commit_marker(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", LogConfig(segment_bytes=200))
    leader_append(plog, data_batch(1), leader_epoch=0)  # 0
    leader_append(plog, data_batch(1, pid=2, epoch=0, seq=0, txn=True), leader_epoch=1)  # 1
    leader_append(plog, data_batch(1, pid=3, epoch=0, seq=0, txn=True), leader_epoch=1)  # 2
    leader_append_marker(plog, 3, 0, abort(), leader_epoch=1)  # 3
    leader_append_marker(plog, 2, 0, commit(), leader_epoch=2)  # 4
    leader_append(plog, data_batch(1, pid=2, epoch=0, seq=1, txn=True), leader_epoch=3)  # 5: open
    leader_append(plog, data_batch(1), leader_epoch=3)  # 6
    assert len(plog.segments) > 2
    assert [t.first_offset for t in plog.ongoing_transactions()] == [5]
    assert plog.last_stable_offset == 5
    assert epochs(plog) == [(0, 0), (1, 1), (2, 4), (3, 5)]

    assert plog.truncate_to(5)  # the open transaction goes
    assert plog.ongoing_transactions() == []
    assert plog.high_watermark == plog.last_stable_offset == plog.log_end_offset == 5
    assert epochs(plog) == [(0, 0), (1, 1), (2, 4)]
    assert plog.producer_state.last_entry(2).current_txn_first_offset is None  # type: ignore[union-attr]

    assert plog.truncate_to(4)  # the COMMIT marker goes: the transaction is open again
    assert [t.first_offset for t in plog.ongoing_transactions()] == [1]
    assert plog.last_stable_offset == 1
    assert epochs(plog) == [(0, 0), (1, 1)]
    assert [t.producer_id for t in plog.collect_aborted_transactions(0, 4)] == [3]

    assert plog.truncate_to(3)  # the ABORT marker goes, and its aborted-transaction entry
    assert plog.collect_aborted_transactions(0, 3) == []
    assert [t.first_offset for t in plog.ongoing_transactions()] == [1, 2]
    assert not plog.truncate_to(3)  # nothing at or after 3 any more
    assert not plog.truncate_to(10)

    plog = reopen(plog, clean=True)
    assert [t.first_offset for t in plog.ongoing_transactions()] == [1, 2]
    assert epochs(plog) == [(0, 0), (1, 1)]
    assert plog.collect_aborted_transactions(0, 3) == []
    plog = reopen(plog, clean=False)
    assert [t.first_offset for t in plog.ongoing_transactions()] == [1, 2]


def test_truncate_fully_and_start_at(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader" / "t-0", SMALL)
    follower = open_log(tmp_path / "follower" / "t-0", SMALL)
    fill_leader(leader)
    replicate(leader, follower, 200)
    follower.flush()
    follower.truncate_fully_and_start_at(1000)
    assert (follower.log_start_offset, follower.log_end_offset, follower.high_watermark) == (1000, 1000, 1000)
    assert follower.recovery_point == 1000
    assert [s.base_offset for s in follower.segments] == [1000]
    assert not epochs(follower)
    assert not follower.producer_infos()
    assert not follower.ongoing_transactions()
    assert follower.producer_state.snapshot_offsets() == []
    names = sorted(os.listdir(follower.directory))
    assert all(n.startswith("00000000000000001000.") or n == "leader-epoch-checkpoint" for n in names), names
    follower = reopen(follower, clean=False)
    assert (follower.log_start_offset, follower.log_end_offset) == (1000, 1000)
    assert not epochs(follower)


def test_a_follower_below_the_leaders_log_start(tmp_path: Path) -> None:
    """The leader deleted records (DeleteRecords) past the follower's log end, in the middle of a batch:
    Kafka's follower restarts its log at the leader's log start, and when that falls inside the first
    fetched batch, at the batch (`UnexpectedAppendOffsetError` carries its offsets)."""
    leader = open_log(tmp_path / "leader" / "t-0", SMALL)
    follower = open_log(tmp_path / "follower" / "t-0", SMALL)
    fill_leader(leader)
    replicate(leader, follower, 100)
    follower.truncate_to(3)
    start = 20  # inside the batch [19, 20]
    leader.delete_records_before(start)
    assert follower.log_end_offset < leader.log_start_offset
    follower.truncate_fully_and_start_at(leader.log_start_offset)
    data = fetch(leader, follower.log_end_offset)
    with pytest.raises(UnexpectedAppendOffsetError) as e:
        follower.append_as_follower(data)
    err = e.value
    assert err.first_offset < follower.log_end_offset == follower.log_start_offset <= err.last_offset
    follower.truncate_fully_and_start_at(err.first_offset)
    follower.append_as_follower(data)
    replicate(leader, follower)
    assert follower.log_end_offset == leader.log_end_offset
    assert producers(follower) != []
    assert epochs(follower)[-1] == epochs(leader)[-1]
    assert consume_committed(follower, start) == consume_committed(leader, start)


def test_truncating_below_the_first_segment_empties_the_log(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    plog.truncate_fully_and_start_at(50)
    assert plog.truncate_to(10)
    assert (plog.log_start_offset, plog.log_end_offset) == (10, 10)
    assert [s.base_offset for s in plog.segments] == [10]


# -- restart ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("clean", [True, False])
def test_a_restarted_follower_keeps_its_state(tmp_path: Path, clean: bool) -> None:
    leader = open_log(tmp_path / "leader" / "t-0", SMALL)
    follower = open_log(tmp_path / "follower" / "t-0", SMALL)
    fill_leader(leader)
    replicate(leader, follower, 250)
    assert_same(leader, follower)
    follower = reopen(follower, clean=clean)
    follower.update_follower_high_watermark(leader.high_watermark)
    assert_same(leader, follower)
    leader_append(leader, data_batch(1, pid=2, epoch=0, seq=4, txn=True), leader_epoch=5)
    leader_append_marker(leader, 2, 0, commit(), leader_epoch=5)
    replicate(leader, follower)
    assert_same(leader, follower)


# -- the state machine ------------------------------------------------------------------------------------

MACHINE_CONFIG = LogConfig(segment_bytes=400, index_interval_bytes=64)
TXN_PIDS = (2, 3)
IDEMPOTENT_PID = 1


class FollowerMachine(RuleBasedStateMachine):
    """Random leader appends (rising leader epochs, idempotent and transactional producers, commits and
    aborts, compressed batches), replicated in random chunk sizes (sometimes ending in a partial batch),
    both logs truncated at random batch boundaries, the follower alone truncated or restarted."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="exactly-follower-"))
        self.leader = open_log(self.tmp / "leader" / "t-0", MACHINE_CONFIG, ManualClock(T0))
        self.follower = open_log(self.tmp / "follower" / "t-0", MACHINE_CONFIG, ManualClock(T0))
        self.epoch = 0
        self.producer_epochs = {IDEMPOTENT_PID: 0, 2: 0, 3: 0}

    def teardown(self) -> None:
        self.leader.close_without_flush()
        self.follower.close_without_flush()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def next_seq(self, pid: int) -> int:
        entry = self.leader.producer_state.last_entry(pid)
        if entry is None or entry.producer_epoch != self.producer_epochs[pid]:
            return 0
        return entry.last_seq + 1

    def boundaries(self) -> list[int]:
        return [b.base_offset for b in read_all_to_end(self.leader)] + [self.leader.log_end_offset]

    # -- the leader ---------------------------------------------------------------------------------------

    @rule(
        appends=st.lists(
            st.tuples(
                st.sampled_from(["plain", "idempotent", "txn2", "txn3", "commit", "abort"]),
                st.integers(1, 4),
                st.sampled_from([Compression.NONE, Compression.NONE, Compression.GZIP]),
            ),
            min_size=1,
            max_size=5,
        )
    )
    def append(self, appends: list[tuple[str, int, Compression]]) -> None:
        for kind, n, codec in appends:
            if kind in ("commit", "abort"):
                self.end_transaction(TXN_PIDS[n % 2], kind == "commit")
                continue
            pid = {"plain": -1, "idempotent": IDEMPOTENT_PID, "txn2": 2, "txn3": 3}[kind]
            records: list[tuple[bytes | None, bytes | None]] = [
                (b"k%d" % i, b"v" * (5 + 7 * i)) for i in range(n)
            ]
            batch = build_batch(
                records,
                timestamp=T0,
                compression=codec,
                producer_id=pid,
                producer_epoch=self.producer_epochs.get(pid, -1),
                base_sequence=self.next_seq(pid) if pid >= 0 else -1,
                is_transactional=pid in TXN_PIDS,
            )
            with contextlib.suppress(KafkaError):  # refused by the leader's producer-state checks
                leader_append(self.leader, batch, leader_epoch=self.epoch)

    @rule(pid=st.sampled_from(TXN_PIDS), committed=st.booleans())
    def end_transaction(self, pid: int, committed: bool) -> None:
        leader_append_marker(
            self.leader,
            pid,
            self.producer_epochs[pid],
            commit() if committed else abort(),
            leader_epoch=self.epoch,
        )

    @rule(pid=st.sampled_from([IDEMPOTENT_PID, *TXN_PIDS]))
    def bump_producer_epoch(self, pid: int) -> None:
        self.producer_epochs[pid] += 1

    @rule(by=st.integers(1, 3))
    def new_leader_epoch(self, by: int) -> None:
        self.epoch += by

    # -- replication --------------------------------------------------------------------------------------

    @rule(
        max_bytes=st.integers(1, 1500),
        fetches=st.integers(1, 4),
        partial=st.booleans(),
        across=st.booleans(),
    )
    def replicate_some(self, max_bytes: int, fetches: int, partial: bool, across: bool) -> None:
        for _ in range(fetches):
            offset = self.follower.log_end_offset
            if offset >= self.leader.log_end_offset:
                break
            data = (fetch_across if across else fetch)(self.leader, offset, max_bytes)
            if partial:  # a chunk cut inside its last batch, as a fetch limited by max bytes may be
                data += fetch_across(self.leader, offset, len(data) + 1000)[len(data) :][:40]
            info = self.follower.append_as_follower(data)
            assert info.first_offset == info.last_offset == -1 or info.records_count >= 0
            self.follower.update_follower_high_watermark(self.leader.high_watermark)
            assert_prefix(self.leader, self.follower)

    @rule(max_bytes=st.integers(1, 2000))
    def catch_up(self, max_bytes: int) -> None:
        replicate(self.leader, self.follower, max_bytes)
        assert_same(self.leader, self.follower)

    # -- truncation and restarts --------------------------------------------------------------------------

    @rule(data=st.data())
    def truncate_both(self, data: st.DataObject) -> None:
        offset = data.draw(st.sampled_from(self.boundaries()))
        self.leader.truncate_to(offset)
        self.follower.truncate_to(offset)
        assert self.leader.log_end_offset == offset
        assert self.follower.log_end_offset == min(offset, self.follower.log_end_offset)

    @rule(data=st.data())
    def truncate_follower(self, data: st.DataObject) -> None:
        offset = data.draw(st.sampled_from(self.boundaries()))
        self.follower.truncate_to(offset)
        assert self.follower.log_end_offset <= offset

    @rule(clean=st.booleans())
    def restart_follower(self, clean: bool) -> None:
        self.follower = reopen(self.follower, clean=clean)

    @rule()
    def restart_leader(self) -> None:
        self.leader = reopen(self.leader, clean=True)

    # -- checks -------------------------------------------------------------------------------------------

    @invariant()
    def follower_is_a_prefix(self) -> None:
        assert_prefix(self.leader, self.follower)
        log = self.follower
        assert log.log_start_offset <= log.last_stable_offset <= log.high_watermark <= log.log_end_offset

    @precondition(lambda self: self.follower.log_end_offset == self.leader.log_end_offset)
    @invariant()
    def caught_up_follower_equals_leader(self) -> None:
        if self.follower.high_watermark == self.leader.high_watermark:
            assert_same(self.leader, self.follower)


FollowerMachine.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_follower_machine = FollowerMachine.TestCase


def test_a_follower_copies_a_compacted_leader(tmp_path: Path) -> None:
    """A batch the leader's cleaner rewrote keeps its offset range with fewer records; a follower
    catching up over it (a new replica, one that was down) must take it as it is."""
    from exactly.storage.cleaner import clean_log

    config = LogConfig(cleanup_policy=CleanupPolicy.COMPACT, segment_bytes=600)
    leader = open_log(tmp_path / "leader" / "t-0", config)
    for i in range(12):
        leader_append(leader, build_batch([(b"k", b"%d" % i), (b"k%d" % (i % 2), b"v")], timestamp=T0))
        leader.roll()
    leader.flush()
    assert clean_log(leader, T0) > 0
    shrunk = [b for b in read_all(leader) if b.records_count < b.last_offset_delta + 1]
    assert shrunk, "the cleaner left no batch with fewer records than offsets"
    follower = open_log(tmp_path / "follower" / "t-0", config)
    replicate(leader, follower)
    assert follower.log_end_offset == leader.log_end_offset
    assert [bytes(b.buffer) for b in read_all(follower)] == [bytes(b.buffer) for b in read_all(leader)]

"""The partition's leader above its log: the high watermark it moves, the acks wait it decides, the
leader epoch it stamps and checks, and what a non-leader refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from exactly.errors import ErrorCode, KafkaError
from exactly.records.batch import iter_batches
from exactly.replication.partition import Partition
from exactly.storage.config import LogConfig
from exactly.storage.log import Isolation
from tests.storage.helpers import commit, data_batch, open_log


def test_the_leader_moves_the_high_watermark_to_the_log_end(tmp_path: Path) -> None:
    partition = Partition(open_log(tmp_path / "t-0"))
    result = partition.append_records_to_leader(data_batch(3))
    assert (result.info.first_offset, result.info.last_offset) == (0, 2)
    assert partition.high_watermark == partition.log_end_offset == 3
    read = partition.read(0, 1 << 20, Isolation.READ_UNCOMMITTED)
    assert [b.last_offset for b in iter_batches(bytes(read.records))] == [2]


def test_acks_all_waits_for_the_fsync_and_acks_one_does_not(tmp_path: Path) -> None:
    partition = Partition(open_log(tmp_path / "t-0"))
    assert partition.append_records_to_leader(data_batch(2), required_acks=-1).durable_offset == 2
    assert partition.append_records_to_leader(data_batch(1), required_acks=1).durable_offset is None
    partition.log.flush()
    # a duplicate of a batch already durable needs no wait either
    idem = data_batch(1, pid=7, epoch=0, seq=0)
    first = partition.append_records_to_leader(idem)
    assert first.durable_offset == 4
    partition.log.flush()
    again = partition.append_records_to_leader(idem)
    assert again.info.duplicate
    assert again.info.first_offset == 3
    assert again.durable_offset is None


def test_a_topic_whose_acks_do_not_wait_for_the_disk_never_waits(tmp_path: Path) -> None:
    assert LogConfig().ack_waits_for_fsync  # the default: acks=all means fsynced
    relaxed = LogConfig(flush_messages=1000)
    partition = Partition(open_log(tmp_path / "t-0", relaxed))
    assert not relaxed.ack_waits_for_fsync
    assert partition.append_records_to_leader(data_batch(1), required_acks=-1).durable_offset is None


def test_batches_carry_the_leader_epoch(tmp_path: Path) -> None:
    partition = Partition(open_log(tmp_path / "t-0"), leader_epoch=4)
    partition.append_records_to_leader(data_batch(1))
    partition.append_end_txn_marker(1, 0, commit())
    read = partition.read(0, 1 << 20, Isolation.READ_UNCOMMITTED)
    assert [b.partition_leader_epoch for b in iter_batches(bytes(read.records))] == [4, 4]
    assert partition.high_watermark == 2


@pytest.mark.parametrize(
    ("current", "code"),
    [
        (-1, ErrorCode.NONE),
        (3, ErrorCode.NONE),
        (4, ErrorCode.UNKNOWN_LEADER_EPOCH),
        (2, ErrorCode.FENCED_LEADER_EPOCH),
    ],
)
def test_a_clients_current_leader_epoch_is_checked(tmp_path: Path, current: int, code: ErrorCode) -> None:
    partition = Partition(open_log(tmp_path / "t-0"), leader_epoch=3)
    assert partition.check_leader_epoch(current) is code


def test_a_replica_that_does_not_lead_refuses_appends_and_deletes(tmp_path: Path) -> None:
    partition = Partition(open_log(tmp_path / "t-0"))
    partition.append_records_to_leader(data_batch(2))
    partition.is_leader = False
    for attempt in (
        lambda: partition.append_records_to_leader(data_batch(1)),
        lambda: partition.append_end_txn_marker(1, 0, commit()),
        lambda: partition.delete_records_before(1),
    ):
        with pytest.raises(KafkaError) as refused:
            attempt()
        assert refused.value.code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert partition.log_end_offset == 2
    assert partition.log_start_offset == 0


def test_a_new_leader_whose_high_watermark_lags_its_epoch_start_answers_offset_not_available(
    tmp_path: Path,
) -> None:
    """Kafka's fetchOffsetForTimestamp after an election: "latest" (and a lookup past what may be read) is
    OFFSET_NOT_AVAILABLE until the high watermark reaches the start of the new epoch, never an offset
    below what the previous leader had exposed; the earliest offset and lookups below it still answer."""
    partition = Partition(open_log(tmp_path / "t-0"), local_id=1)
    partition.make_leader(1, (1, 2, 3), (1, 2, 3), 1, now_ms=0)
    for follower in (2, 3):
        partition.update_follower_fetch_state(follower, 0, now_ms=0, log_start_offset=0)
    partition.append_records_to_leader(data_batch(10))
    for follower in (2, 3):
        partition.update_follower_fetch_state(follower, 4, now_ms=1, log_start_offset=0)
    assert (partition.high_watermark, partition.log_end_offset) == (4, 10)
    assert partition.offset_for_timestamp(-1, Isolation.READ_UNCOMMITTED).offset == 4  # type: ignore[union-attr]

    partition.make_leader(2, (1, 2, 3), (1, 2, 3), 2, now_ms=2)  # a new epoch, starting at 10
    assert partition.leader_epoch_start_offset == 10
    for isolation in (Isolation.READ_UNCOMMITTED, Isolation.READ_COMMITTED):
        with pytest.raises(KafkaError) as raised:
            partition.offset_for_timestamp(-1, isolation)
        assert raised.value.code is ErrorCode.OFFSET_NOT_AVAILABLE
    with pytest.raises(KafkaError) as past:
        partition.offset_for_timestamp(1 << 62, Isolation.READ_UNCOMMITTED)  # found nowhere below the HWM
    assert past.value.code is ErrorCode.OFFSET_NOT_AVAILABLE
    assert partition.offset_for_timestamp(-2, Isolation.READ_UNCOMMITTED).offset == 0  # type: ignore[union-attr]
    assert partition.offset_for_timestamp(0, Isolation.READ_UNCOMMITTED).offset == 0  # type: ignore[union-attr]
    assert partition.offset_for_timestamp(-1, Isolation.LOG_END).offset == 10  # type: ignore[union-attr]

    for follower in (2, 3):
        partition.update_follower_fetch_state(follower, 10, now_ms=3, log_start_offset=0)
    assert partition.high_watermark == 10
    assert partition.offset_for_timestamp(-1, Isolation.READ_UNCOMMITTED).offset == 10  # type: ignore[union-attr]
    assert partition.offset_for_timestamp(-1, Isolation.READ_COMMITTED).offset == 10  # type: ignore[union-attr]

    partition.make_follower(3, 3, (3, 2), (1, 2, 3), 3)
    assert partition.leader_epoch_start_offset is None

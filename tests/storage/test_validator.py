"""Client batch validation rules that need the records themselves: keys on compacted topics (Kafka's
LogValidator.validateKey)."""

from __future__ import annotations

from pathlib import Path

import pytest

from exactly.errors import ErrorCode, RecordValidationError
from exactly.records import build_batch
from exactly.records.batch import Compression
from exactly.storage.config import CleanupPolicy, LogConfig
from exactly.storage.validator import validate_client_batches
from tests.storage.helpers import leader_append, leader_append_marker

from .helpers import T0, commit, data_batch, open_log, read_all

COMPACTED = LogConfig(cleanup_policy=CleanupPolicy.COMPACT)
KAFKA_MESSAGE = "Compacted topic cannot accept message without key in topic partition t-0"


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.GZIP, Compression.ZSTD])
def test_keyless_records_refuse_the_whole_batch_on_a_compacted_topic(
    tmp_path: Path, compression: Compression
) -> None:
    plog = open_log(tmp_path / "t-0", COMPACTED)
    leader_append(plog, data_batch(2))
    records = [(b"a", b"1"), (None, b"2"), (b"c", b"3"), (None, b"4")]
    raw = build_batch(records, timestamp=T0, compression=compression)
    with pytest.raises(RecordValidationError) as e:
        leader_append(plog, raw)
    assert e.value.code == ErrorCode.INVALID_RECORD
    assert [(r.batch_index, r.message) for r in e.value.record_errors] == [
        (1, KAFKA_MESSAGE),
        (3, KAFKA_MESSAGE),
    ]
    assert e.value.message == (
        "One or more records have been rejected due to 2 record errors in total, and only showing the "
        f"first three errors at most: [RecordError(batchIndex=1, message='{KAFKA_MESSAGE}'), "
        f"RecordError(batchIndex=3, message='{KAFKA_MESSAGE}')]"
    )
    # nothing of the refused batch was stored, and the log goes on from where it was
    assert plog.log_end_offset == 2
    assert [b.records_count for b in read_all(plog)] == [2]
    assert leader_append(plog, data_batch(1)).first_offset == 2


def test_the_message_shows_three_errors_and_the_list_has_all(tmp_path: Path) -> None:
    raw = build_batch([(None, b"v")] * 5, timestamp=T0)
    with pytest.raises(RecordValidationError) as e:
        validate_client_batches(raw, COMPACTED, T0, "orders-3")
    assert [r.batch_index for r in e.value.record_errors] == [0, 1, 2, 3, 4]
    assert "due to 5 record errors" in e.value.message
    assert e.value.message.count("RecordError(") == 3
    assert e.value.record_errors[0].message.endswith("in topic partition orders-3")


def test_a_refused_idempotent_batch_leaves_the_producer_state_alone(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", LogConfig(cleanup_policy=CleanupPolicy.COMPACT_DELETE))
    with pytest.raises(RecordValidationError):
        leader_append(plog, data_batch(3, pid=7, epoch=0, seq=0, key=None))
    assert plog.producer_infos() == []
    # the same sequence with keys is the producer's first batch, not a gap or a duplicate
    info = leader_append(plog, data_batch(3, pid=7, epoch=0, seq=0))
    assert (info.first_offset, info.last_offset, info.duplicate) == (0, 2, False)


def test_keyless_records_are_accepted_when_the_topic_is_not_compacted(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", LogConfig(cleanup_policy=CleanupPolicy.DELETE))
    info = leader_append(plog, data_batch(3, key=None))
    assert (info.first_offset, info.last_offset) == (0, 2)
    assert [r.key for b in read_all(plog) for r in b.records()] == [None, None, None]


def test_markers_on_a_compacted_topic_are_exempt(tmp_path: Path) -> None:
    """Control batches have no data key; the broker writes them (coordinator origin), never a client."""
    plog = open_log(tmp_path / "t-0", COMPACTED)
    leader_append(plog, data_batch(2, pid=9, epoch=0, seq=0, txn=True))
    marker = leader_append_marker(plog, 9, 0, commit())
    assert marker.first_offset == 2
    assert plog.last_stable_offset == 3

"""compression.type on append: batches rewritten to the topic's codec, everything else kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from exactly.errors import ErrorCode, KafkaError
from exactly.records import BatchBuilder, Compression, RecordBatch, set_crc
from exactly.records.record import Header
from exactly.storage.config import LogConfig
from tests.storage.helpers import leader_append

from .helpers import T0, open_log, read_all


def client_batch(
    codec: Compression, *, pid: int = -1, epoch: int = -1, seq: int = -1, txn: bool = False
) -> bytes:
    builder = BatchBuilder(
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=txn, compression=codec
    )
    for i in range(20):
        builder.append(T0 + i * 7, b"key-%d" % i, b"value " * 50 + b"%d" % i, [("h", b"%d" % i)])
    return builder.build()


def records(batch: RecordBatch) -> list[tuple[int, int, bytes | None, bytes | None, tuple[Header, ...]]]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch.records()]


@pytest.mark.parametrize("source", list(Compression), ids=[c.name for c in Compression])
@pytest.mark.parametrize("target", ["uncompressed", "gzip", "snappy", "lz4", "zstd"], ids=lambda t: f"to-{t}")
def test_batch_is_stored_in_the_topic_codec(tmp_path: Path, source: Compression, target: str) -> None:
    config = LogConfig.from_properties({"compression.type": target})
    plog = open_log(tmp_path / "t-0", config)
    sent = client_batch(source, pid=5, epoch=2, seq=10, txn=False)
    info = leader_append(plog, sent, leader_epoch=3)
    assert (info.first_offset, info.last_offset) == (0, 19)
    (stored,) = read_all(plog)
    stored.validate()
    original = RecordBatch(sent)
    expected = Compression.NONE if target == "uncompressed" else Compression[target.upper()]
    assert stored.compression == expected
    if source == expected:
        assert bytes(stored.buffer)[16:] == sent[16:]  # kept byte for byte
    for field in ("last_offset_delta", "base_timestamp", "max_timestamp", "producer_id", "producer_epoch",
                  "base_sequence", "records_count", "is_transactional", "timestamp_type"):  # fmt: skip
        assert getattr(stored, field) == getattr(original, field), field
    assert stored.partition_leader_epoch == 3
    assert records(stored) == records(original)


def test_producer_keeps_the_clients_codec(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", LogConfig())
    sent = client_batch(Compression.SNAPPY)
    leader_append(plog, sent)
    (stored,) = read_all(plog)
    assert bytes(stored.buffer)[16:] == sent[16:]


def test_recompressed_idempotent_batch_still_deduplicates(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", LogConfig.from_properties({"compression.type": "gzip"}))
    first = leader_append(plog, client_batch(Compression.NONE, pid=9, epoch=0, seq=0))
    again = leader_append(plog, client_batch(Compression.NONE, pid=9, epoch=0, seq=0))
    assert again.duplicate
    assert (again.first_offset, again.last_offset) == (first.first_offset, first.last_offset) == (0, 19)
    with pytest.raises(KafkaError) as info:
        leader_append(plog, client_batch(Compression.NONE, pid=9, epoch=0, seq=40))
    assert info.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    nxt = leader_append(plog, client_batch(Compression.NONE, pid=9, epoch=0, seq=20))
    assert nxt.first_offset == 20
    assert [b.compression for b in read_all(plog)] == [Compression.GZIP, Compression.GZIP]


def test_transactional_batch_recompressed_keeps_the_transaction(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", LogConfig.from_properties({"compression.type": "zstd"}))
    leader_append(plog, client_batch(Compression.LZ4, pid=3, epoch=1, seq=0, txn=True))
    assert plog.last_stable_offset == 0  # the open transaction holds the LSO
    (stored,) = read_all(plog)
    assert stored.is_transactional
    assert stored.compression == Compression.ZSTD


def test_recompressed_batch_over_max_message_bytes_is_refused(tmp_path: Path) -> None:
    sent = client_batch(Compression.ZSTD)
    plog = open_log(
        tmp_path / "t-0",
        LogConfig.from_properties(
            {"compression.type": "uncompressed", "max.message.bytes": str(len(sent) + 10)}
        ),
    )
    with pytest.raises(KafkaError) as info:
        leader_append(plog, sent)
    assert info.value.code == ErrorCode.MESSAGE_TOO_LARGE
    assert plog.log_end_offset == 0


def test_a_blob_that_does_not_decompress_is_refused_not_stored(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", LogConfig.from_properties({"compression.type": "zstd"}))
    bad = bytearray(client_batch(Compression.GZIP))
    bad[61:71] = b"not gzip!!"
    set_crc(bad, 0)  # a consistent CRC: only the decompression can tell
    with pytest.raises(KafkaError) as info:
        leader_append(plog, bytes(bad))
    assert info.value.code == ErrorCode.CORRUPT_MESSAGE
    assert plog.log_end_offset == 0
    assert read_all(plog) == []

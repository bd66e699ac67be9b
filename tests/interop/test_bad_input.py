"""Bad Produce input gets Kafka's per-partition error and changes nothing (issue 6.5).

Hand-built ProduceRequest v9 (flexible) and v3 frames through `RawClient`. Expected codes are what
Apache Kafka answers (kafka-wire.md §3/§4, verification.md §4.3, and the Kafka source):

* `ProduceRequest.validateRecords` (v3+, run by KafkaApis per partition, `Errors.forException`):
  no batch at all (empty, or a batch cut short - `ByteBufferLogInputStream.nextBatch` returns null for
  it), a first batch that is not magic 2, or more than one batch -> `InvalidRecordException` ->
  INVALID_RECORD (87); zstd below v7 -> UNSUPPORTED_COMPRESSION_TYPE (76). Note that modern Kafka
  answers 87, not UNSUPPORTED_FOR_MESSAGE_FORMAT (43) or CORRUPT_MESSAGE (2), to a well-formed
  magic 0/1 message set in Produce v3+.
* A batch length below the v0 record overhead (14) or an unknown magic -> `CorruptRecordException` ->
  CORRUPT_MESSAGE (2); a CRC mismatch (`ensureValid`) -> CORRUPT_MESSAGE.
* `LogValidator`: control batch from a client, producer id with baseSequence < 0, lastOffsetDelta !=
  count - 1 -> INVALID_RECORD (87). Batch larger than the topic's max.message.bytes -> MESSAGE_TOO_LARGE
  (10). Unknown topic or partition -> UNKNOWN_TOPIC_OR_PARTITION (3). acks not in {-1, 0, 1} ->
  INVALID_REQUIRED_ACKS (21).

After every bad request the partition holds exactly the good records written before (same batches, byte
for byte), the connection that sent the bad request still works, and so does an unrelated one.
"""

from __future__ import annotations

import random
import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import crc32c
import pytest

from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.init_producer_id import InitProducerIdRequest
from exactly.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from exactly.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from exactly.records.builder import BatchBuilder
from exactly.records.compression import Compression
from exactly.records.control import ControlRecordType, EndTxnMarker, build_end_txn_marker_batch
from exactly.testing.processes import BrokerProcess
from tests.interop.client import RawClient
from tests.interop.support import PartitionDump, create_topic, fetch_partition, running_broker

pytestmark = pytest.mark.interop

SMALL_LIMIT = 500  # max.message.bytes of each test's `small` topic
NOW = 1_700_000_000_000


@dataclass
class Env:
    broker: BrokerProcess
    bystander: RawClient  # a connection opened before any bad request, used after each one


@dataclass
class Victim:
    """A fresh topic per test: partitions 0 and 1 with three good records each (max.message.bytes
    default), and a second topic `small` whose max.message.bytes is SMALL_LIMIT, also with three."""

    env: Env
    topic: str
    small: str

    @property
    def broker(self) -> BrokerProcess:
        return self.env.broker

    def partitions(self) -> list[tuple[str, int]]:
        return [(self.topic, 0), (self.topic, 1), (self.small, 0)]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with running_broker(tmp_path_factory.mktemp("bad-input") / "data") as broker:
        bystander = RawClient(broker.bootstrap)
        yield Env(broker, bystander)
        bystander.close()


_counter = iter(range(1_000_000))


@pytest.fixture
def victim(env: Env) -> Victim:
    n = next(_counter)
    v = Victim(env, f"bad-input-{n}", f"bad-input-small-{n}")
    create_topic(env.broker.bootstrap, v.topic, 2)
    create_topic(env.broker.bootstrap, v.small, 1, {"max.message.bytes": str(SMALL_LIMIT)})
    client = RawClient(env.broker.bootstrap)
    for topic, partition in v.partitions():
        for i in range(3):
            assert produce(client, topic, partition, good_batch(f"good-{partition}-{i}")) == (
                ErrorCode.NONE,
                i,
            )
    client.close()
    return v


def good_batch(value: str, *, compression: Compression = Compression.NONE) -> bytes:
    builder = BatchBuilder(compression=compression)
    builder.append(NOW, b"key", value.encode(), [("h", b"v")])
    return builder.build()


def produce(
    client: RawClient,
    topic: str,
    partition: int,
    records: bytes | None,
    *,
    version: int = 9,
    acks: int = -1,
) -> tuple[int, int]:
    """One Produce with one partition; returns (error_code, base_offset)."""
    request = ProduceRequest(
        None, acks, 5000, [TopicProduceData(topic, partition_data=[PartitionProduceData(partition, records)])]
    )
    response = client.request(ApiKey.PRODUCE, version, request)
    assert len(response.responses) == 1
    assert response.responses[0].name == topic
    (p,) = response.responses[0].partition_responses
    assert p.index == partition
    return p.error_code, p.base_offset


def snapshot(v: Victim) -> list[PartitionDump]:
    return [fetch_partition(v.broker.bootstrap, t, p) for t, p in v.partitions()]


def baseline(v: Victim) -> list[PartitionDump]:
    before = snapshot(v)
    for dump, (_, partition) in zip(before, v.partitions(), strict=True):
        assert [(r.offset, r.value) for r in dump.records] == [
            (i, b"good-%d-%d" % (partition, i)) for i in range(3)
        ]
    return before


def assert_untouched(v: Victim, before: list[PartitionDump], bad: RawClient) -> None:
    after = snapshot(v)
    for b, a in zip(before, after, strict=True):
        assert a.high_watermark == b.high_watermark
        assert [x.raw for x in a.batches] == [x.raw for x in b.batches]
    # Other connections and the offending one keep working.
    md = v.env.bystander.request(
        ApiKey.METADATA, 12, MetadataRequest([MetadataRequestTopic(name=v.topic)], False)
    )
    assert md.topics[0].error_code == ErrorCode.NONE
    md = bad.request(ApiKey.METADATA, 12, MetadataRequest([MetadataRequestTopic(name=v.topic)], False))
    assert [p.partition_index for p in md.topics[0].partitions] == [0, 1]


# --- batch surgery -----------------------------------------------------------------------------


def recrc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


def corrupt_body(batch: bytes) -> bytes:
    b = bytearray(batch)
    b[-2] ^= 0xFF  # inside the records, covered by the CRC
    return bytes(b)


def corrupt_crc_field(batch: bytes) -> bytes:
    b = bytearray(batch)
    b[17] ^= 0x01
    return bytes(b)


def corrupt_attributes(batch: bytes) -> bytes:
    b = bytearray(batch)
    b[22] ^= 0x08  # timestamp type bit: covered by the CRC
    return bytes(b)


def legacy_message(magic: int, key: bytes | None, value: bytes | None, offset: int = 0) -> bytes:
    body = bytearray([magic, 0])
    if magic == 1:
        body += struct.pack(">q", NOW)
    for part in (key, value):
        body += struct.pack(">i", -1) if part is None else struct.pack(">i", len(part)) + part
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(message)) + message


def bad_last_offset_delta() -> bytes:
    builder = BatchBuilder()
    builder.append(NOW, None, b"a")
    builder.append(NOW, None, b"b")
    b = bytearray(builder.build())
    struct.pack_into(">i", b, 23, 5)  # lastOffsetDelta 5 for 2 records
    return recrc(b)


def short_batch_length() -> bytes:
    b = bytearray(good_batch("short"))
    struct.pack_into(">i", b, 8, 10)  # below Kafka's minimum record overhead (14)
    return bytes(b)


def bad_magic() -> bytes:
    b = bytearray(good_batch("magic"))
    b[16] = 5
    return bytes(b)


def two_batches() -> bytes:
    second = bytearray(good_batch("second"))
    struct.pack_into(">q", second, 0, 1)
    return good_batch("first") + bytes(second)


def control_batch() -> bytes:
    return build_end_txn_marker_batch(1000, 0, EndTxnMarker(ControlRecordType.COMMIT, 0), timestamp_ms=NOW)


CASES: dict[str, tuple[Callable[[], bytes | None], int]] = {
    "crc-of-records": (lambda: corrupt_body(good_batch("x")), ErrorCode.CORRUPT_MESSAGE),
    "crc-field": (lambda: corrupt_crc_field(good_batch("x")), ErrorCode.CORRUPT_MESSAGE),
    "crc-of-attributes": (lambda: corrupt_attributes(good_batch("x")), ErrorCode.CORRUPT_MESSAGE),
    "crc-compressed": (
        lambda: corrupt_body(good_batch("x" * 200, compression=Compression.GZIP)),
        ErrorCode.CORRUPT_MESSAGE,
    ),
    "control-batch": (control_batch, ErrorCode.INVALID_RECORD),
    "magic-0": (lambda: legacy_message(0, b"k", b"v0"), ErrorCode.INVALID_RECORD),
    "magic-1": (
        lambda: legacy_message(1, b"k", b"v1") + legacy_message(1, None, b"w", 1),
        ErrorCode.INVALID_RECORD,
    ),
    "unknown-magic": (bad_magic, ErrorCode.CORRUPT_MESSAGE),
    "batch-length-below-minimum": (short_batch_length, ErrorCode.CORRUPT_MESSAGE),
    "truncated-batch": (lambda: good_batch("truncated")[:-5], ErrorCode.INVALID_RECORD),
    "empty-records": (lambda: b"", ErrorCode.INVALID_RECORD),
    "null-records": (lambda: None, ErrorCode.INVALID_RECORD),
    "last-offset-delta": (bad_last_offset_delta, ErrorCode.INVALID_RECORD),
    "two-batches": (two_batches, ErrorCode.INVALID_RECORD),
}


@pytest.mark.parametrize("version", [9, 3])
@pytest.mark.parametrize("case", list(CASES))
def test_bad_batch_is_rejected_and_changes_nothing(victim: Victim, case: str, version: int) -> None:
    make, expected = CASES[case]
    before = baseline(victim)
    bad = RawClient(victim.broker.bootstrap)
    try:
        code, _ = produce(bad, victim.topic, 0, make(), version=version)
        assert code == expected
        assert_untouched(victim, before, bad)
    finally:
        bad.close()


def test_pid_without_base_sequence_is_invalid_record(victim: Victim) -> None:
    before = baseline(victim)
    bad = RawClient(victim.broker.bootstrap)
    try:
        init = bad.request(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(None, 60_000, -1, -1))
        assert init.error_code == ErrorCode.NONE
        assert init.producer_id >= 0
        for version in (9, 3):
            builder = BatchBuilder(
                producer_id=init.producer_id, producer_epoch=init.producer_epoch, base_sequence=-1
            )
            builder.append(NOW, None, b"no-sequence")
            assert (
                produce(bad, victim.topic, 0, builder.build(), version=version)[0] == ErrorCode.INVALID_RECORD
            )
        assert_untouched(victim, before, bad)
        # The same producer with a proper sequence is accepted afterwards (then the log has one more).
        builder = BatchBuilder(
            producer_id=init.producer_id, producer_epoch=init.producer_epoch, base_sequence=0
        )
        builder.append(NOW, None, b"with-sequence")
        end = before[1].high_watermark
        assert produce(bad, victim.topic, 1, builder.build()) == (ErrorCode.NONE, end)
        assert fetch_partition(victim.broker.bootstrap, victim.topic, 1).values[-1] == b"with-sequence"
        # ...and a retry of that batch is deduplicated to its original offset.
        assert produce(bad, victim.topic, 1, builder.build()) == (ErrorCode.NONE, end)
        assert fetch_partition(victim.broker.bootstrap, victim.topic, 1).high_watermark == end + 1
    finally:
        bad.close()


def sized_batch(total: int) -> bytes:
    """An uncompressed one-record batch of exactly `total` bytes (log overhead included)."""
    for n in range(total, 0, -1):
        builder = BatchBuilder()
        builder.append(NOW, None, b"x" * n)
        batch = builder.build()
        if len(batch) == total:
            return batch
    raise AssertionError(f"no batch of {total} bytes")


def test_batch_over_max_message_bytes_is_message_too_large(victim: Victim) -> None:
    before = baseline(victim)
    bad = RawClient(victim.broker.bootstrap)
    try:
        for version in (9, 3):
            assert (
                produce(bad, victim.small, 0, sized_batch(SMALL_LIMIT + 1), version=version)[0]
                == ErrorCode.MESSAGE_TOO_LARGE
            )
            big = BatchBuilder(compression=Compression.ZSTD if version >= 7 else Compression.GZIP)
            big.append(NOW, None, random.Random(version).randbytes(2048))  # incompressible
            assert (
                produce(bad, victim.small, 0, big.build(), version=version)[0] == ErrorCode.MESSAGE_TOO_LARGE
            )
        assert_untouched(victim, before, bad)
        # The same size is fine on the topic with the default limit; exactly the limit is fine too.
        assert produce(bad, victim.small, 0, sized_batch(SMALL_LIMIT)) == (
            ErrorCode.NONE,
            before[2].high_watermark,
        )
        assert produce(bad, victim.topic, 1, sized_batch(SMALL_LIMIT + 1))[0] == ErrorCode.NONE
    finally:
        bad.close()


def test_zstd_below_produce_v7_is_unsupported_compression(victim: Victim) -> None:
    before = baseline(victim)
    bad = RawClient(victim.broker.bootstrap)
    try:
        batch = good_batch("zstd", compression=Compression.ZSTD)
        assert produce(bad, victim.topic, 0, batch, version=3)[0] == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        assert_untouched(victim, before, bad)
    finally:
        bad.close()


def test_unknown_topic_or_partition(victim: Victim) -> None:
    before = baseline(victim)
    bad = RawClient(victim.broker.bootstrap)
    try:
        for version in (9, 3):
            assert (
                produce(bad, victim.topic, 2, good_batch("p2"), version=version)[0]
                == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
            assert (
                produce(bad, victim.topic, -1, good_batch("p-1"), version=version)[0]
                == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
            # Produce never auto-creates a topic.
            assert produce(bad, "bad-input-nowhere", 0, good_batch("x"), version=version)[0] == (
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
        md = bad.request(
            ApiKey.METADATA, 12, MetadataRequest([MetadataRequestTopic(name=victim.topic)], False)
        )
        assert len(md.topics[0].partitions) == 2
        assert_untouched(victim, before, bad)
    finally:
        bad.close()


@pytest.mark.parametrize("acks", [2, -2, 3])
def test_invalid_acks(victim: Victim, acks: int) -> None:
    before = baseline(victim)
    bad = RawClient(victim.broker.bootstrap)
    try:
        for version in (9, 3):
            assert produce(bad, victim.topic, 0, good_batch("acks"), version=version, acks=acks)[0] == (
                ErrorCode.INVALID_REQUIRED_ACKS
            )
        assert_untouched(victim, before, bad)
    finally:
        bad.close()


def test_one_bad_partition_does_not_fail_the_others(victim: Victim) -> None:
    """Errors are per partition: a good partition in the same request is appended."""
    before = baseline(victim)
    client = RawClient(victim.broker.bootstrap)
    try:
        request = ProduceRequest(
            None,
            -1,
            5000,
            [
                TopicProduceData(
                    victim.topic,
                    partition_data=[
                        PartitionProduceData(0, corrupt_body(good_batch("bad"))),
                        PartitionProduceData(1, good_batch("neighbour")),
                    ],
                ),
                TopicProduceData(
                    "bad-input-nowhere", partition_data=[PartitionProduceData(0, good_batch("x"))]
                ),
            ],
        )
        response = client.request(ApiKey.PRODUCE, 9, request)
        codes = {(t.name, p.index): p.error_code for t in response.responses for p in t.partition_responses}
        assert codes == {
            (victim.topic, 0): ErrorCode.CORRUPT_MESSAGE,
            (victim.topic, 1): ErrorCode.NONE,
            ("bad-input-nowhere", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }
        (p1,) = [
            p
            for t in response.responses
            for p in t.partition_responses
            if (t.name, p.index) == (victim.topic, 1)
        ]
        assert p1.base_offset == before[1].high_watermark
        after = fetch_partition(victim.broker.bootstrap, victim.topic, 0)
        assert [x.raw for x in after.batches] == [x.raw for x in before[0].batches]
        assert fetch_partition(victim.broker.bootstrap, victim.topic, 1).values[-1] == b"neighbour"
    finally:
        client.close()


def test_error_responses_carry_invalid_offsets(victim: Victim) -> None:
    """Kafka answers a failed partition with `PartitionResponse(error)`: baseOffset -1,
    logAppendTime -1, logStartOffset -1 (ProduceResponse.INVALID_OFFSET), whatever the error."""
    client = RawClient(victim.broker.bootstrap)
    try:
        cases = [
            (victim.topic, 5, good_batch("x"), -1),  # unknown partition
            ("bad-input-nowhere", 0, good_batch("x"), -1),  # unknown topic
            (victim.topic, 0, good_batch("x"), 2),  # invalid acks
            (victim.topic, 0, b"", -1),  # no batch
            (victim.topic, 0, corrupt_body(good_batch("x")), -1),  # CRC
            (victim.small, 0, sized_batch(SMALL_LIMIT + 1), -1),  # too large
        ]
        for topic, partition, records, acks in cases:
            request = ProduceRequest(
                None,
                acks,
                5000,
                [TopicProduceData(topic, partition_data=[PartitionProduceData(partition, records)])],
            )
            response = client.request(ApiKey.PRODUCE, 9, request)
            (p,) = response.responses[0].partition_responses
            assert p.error_code != ErrorCode.NONE
            assert (p.base_offset, p.log_append_time_ms, p.log_start_offset) == (-1, -1, -1), (
                topic,
                partition,
                acks,
                p,
            )
    finally:
        client.close()

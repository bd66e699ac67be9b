"""Batches written by the real clients (librdkafka via confluent-kafka, kafka-python) decode exactly.

Each test runs a producer against `tests.interop.capture.CaptureServer`, takes the records field out of
the captured Produce request and checks it with `RecordBatch`: CRC, header, and every record's key,
value, headers and timestamp against what the test produced.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import pytest

from exactly.errors import CorruptRecordError
from exactly.records import Compression, Record, RecordBatch, iter_batches
from exactly.records.compression import XERIAL_MAGIC
from tests.interop.capture import (
    DEFAULT_API_VERSIONS,
    NON_FLEXIBLE_API_VERSIONS,
    ApiKey,
    CaptureServer,
)

pytestmark = [
    pytest.mark.interop,
    # kafka-python loads its JSON schemas with the deprecated importlib.resources API.
    pytest.mark.filterwarnings(r"ignore:.*is deprecated\. Use files\(\) instead:DeprecationWarning"),
]

TOPIC = "records-interop"
BASE_TS = 1_700_000_000_000


@dataclass(frozen=True, slots=True)
class Sent:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def messages(allow_null_header_value: bool) -> list[Sent]:
    """A mix that exercises null keys/values, headers, large and compressible values."""
    compressible = b"exactly-once " * 40
    null_header: bytes | None = None if allow_null_header_value else b""
    return [
        Sent(b"k0", b"v0", (), BASE_TS),
        Sent(b"k1", None, (("h1", b"x"),), BASE_TS + 1),
        Sent(None, compressible, (("a", b"1"), ("b", null_header)), BASE_TS + 7),
        Sent(b"", b"", (("empty", b""),), BASE_TS - 5),
        Sent(b"big", bytes(range(256)) * 40, (), BASE_TS + 1000),
        *(Sent(b"key-%d" % i, compressible + b"%d" % i, (("i", b"%d" % i),), BASE_TS + i) for i in range(20)),
    ]


def captured_batches(server: CaptureServer) -> list[RecordBatch]:
    assert not server.errors, server.errors
    batches = []
    for part in server.produced():
        assert part.topic == TOPIC
        assert part.partition == 0
        assert part.records is not None
        batches.extend(iter_batches(part.records))
    return batches


def all_records(batches: Sequence[RecordBatch]) -> Iterator[Record]:
    for batch in batches:
        yield from batch.records()


def check_batches(
    batches: Sequence[RecordBatch],
    sent: Sequence[Sent],
    codec: Compression,
) -> None:
    assert batches, "no batch captured"
    for batch in batches:
        batch.validate(from_client=True)
        assert batch.magic == 2
        assert not batch.is_control
        assert not batch.is_transactional
        assert batch.base_offset == 0  # clients write 0; the broker assigns offsets
        records = list(batch.records())
        assert len(records) == batch.records_count
        assert [r.offset for r in records] == list(range(batch.records_count))
        assert batch.max_timestamp == max(r.timestamp for r in records)
        assert batch.base_timestamp == records[0].timestamp
    # Clients skip compression for a batch that would not shrink, but the bulk of ours compresses.
    assert {b.compression for b in batches} <= {codec, Compression.NONE}
    assert any(b.compression == codec for b in batches)
    got = [(r.key, r.value, r.headers, r.timestamp) for r in all_records(batches)]
    assert got == [(s.key, s.value, s.headers, s.timestamp) for s in sent]
    check_flipped_byte_is_caught(batches[0])


def is_xerial(batch: RecordBatch) -> bool:
    return bytes(batch.buffer[61:69]) == XERIAL_MAGIC


def check_flipped_byte_is_caught(batch: RecordBatch) -> None:
    data = bytearray(batch.buffer)
    for pos in (21, 30, 60, len(data) // 2, len(data) - 1):
        mutated = bytearray(data)
        mutated[pos] ^= 0x01
        with pytest.raises(CorruptRecordError):
            RecordBatch(mutated).validate()


# --- confluent-kafka (librdkafka) ------------------------------------------------------------------------


def produce_confluent(server: CaptureServer, sent: Sequence[Sent], config: Mapping[str, object]) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": server.bootstrap,
            "linger.ms": 50,  # let the messages share a batch
            "message.timeout.ms": 5000,
            "socket.timeout.ms": 5000,
            "enable.idempotence": False,
            "acks": "all",
            **config,
        }
    )
    errors: list[object] = []
    delivered: list[object] = []

    def on_delivery(err: object, msg: object) -> None:
        (errors if err is not None else delivered).append(err or msg)

    for s in sent:
        producer.produce(
            TOPIC,
            value=s.value,
            key=s.key,
            headers=list(s.headers),
            timestamp=s.timestamp,
            partition=0,
            on_delivery=on_delivery,
        )
    remaining = producer.flush(10)
    assert remaining == 0, f"{remaining} messages not delivered"
    assert not errors, errors
    assert len(delivered) == len(sent)


@pytest.mark.parametrize("codec", list(Compression), ids=lambda c: c.name.lower())
def test_confluent_batches_decode(codec: Compression) -> None:
    sent = messages(allow_null_header_value=True)
    with CaptureServer(topics=(TOPIC,)) as server:
        produce_confluent(server, sent, {"compression.type": codec.name.lower()})
        batches = captured_batches(server)
        versions = {f.api_version for f in server.captured(ApiKey.PRODUCE)}
    assert versions == {9}  # flexible Produce, COMPACT_RECORDS
    check_batches(batches, sent, codec)
    for batch in batches:
        assert batch.producer_id == -1
        assert batch.base_sequence == -1
    if codec == Compression.SNAPPY:  # librdkafka writes raw snappy blocks (no Xerial framing)
        assert not any(is_xerial(b) for b in batches)


def test_confluent_idempotent_batches() -> None:
    sent = messages(allow_null_header_value=True)
    with CaptureServer(topics=(TOPIC,), producer_id=1000, producer_epoch=0) as server:
        produce_confluent(server, sent, {"enable.idempotence": True, "compression.type": "lz4"})
        batches = captured_batches(server)
        assert server.captured(ApiKey.INIT_PRODUCER_ID)
    check_batches(batches, sent, Compression.LZ4)
    expected_sequence = 0
    for batch in batches:
        assert batch.producer_id == 1000
        assert batch.producer_epoch == 0
        assert batch.base_sequence == expected_sequence
        assert batch.last_sequence == expected_sequence + batch.records_count - 1
        expected_sequence += batch.records_count


def test_confluent_non_flexible_produce() -> None:
    """Produce v8 (int32-length records) when the broker does not advertise flexible versions."""
    sent = messages(allow_null_header_value=True)
    with CaptureServer(topics=(TOPIC,), api_versions=NON_FLEXIBLE_API_VERSIONS) as server:
        produce_confluent(server, sent, {"compression.type": "zstd"})
        batches = captured_batches(server)
        versions = {f.api_version for f in server.captured(ApiKey.PRODUCE)}
    assert versions == {8}
    check_batches(batches, sent, Compression.ZSTD)


# --- kafka-python ----------------------------------------------------------------------------------------


def kafka_python_has(codec: Compression) -> bool:
    from kafka import codec as kafka_codec

    checks = {
        Compression.NONE: lambda: True,
        Compression.GZIP: kafka_codec.has_gzip,
        Compression.SNAPPY: kafka_codec.has_snappy,
        Compression.LZ4: kafka_codec.has_lz4,
        Compression.ZSTD: kafka_codec.has_zstd,
    }
    return bool(checks[codec]())


def produce_kafka_python(server: CaptureServer, sent: Sequence[Sent], **config: object) -> None:
    kafka = pytest.importorskip("kafka")
    producer = kafka.KafkaProducer(
        bootstrap_servers=server.bootstrap,
        linger_ms=50,
        request_timeout_ms=5000,
        max_block_ms=5000,
        **config,
    )
    try:
        futures = [
            producer.send(
                TOPIC,
                value=s.value,
                key=s.key,
                headers=list(s.headers),
                timestamp_ms=s.timestamp,
                partition=0,
            )
            for s in sent
        ]
        producer.flush(timeout=10)
        for future in futures:
            future.get(timeout=1)
    finally:
        producer.close(timeout=1)


@pytest.mark.parametrize("codec", list(Compression), ids=lambda c: c.name.lower())
def test_kafka_python_batches_decode(codec: Compression) -> None:
    if not kafka_python_has(codec):
        pytest.skip(f"kafka-python has no {codec.name.lower()} library installed in this environment")
    sent = messages(allow_null_header_value=False)
    compression_type = None if codec == Compression.NONE else codec.name.lower()
    with CaptureServer(topics=(TOPIC,)) as server:
        produce_kafka_python(server, sent, compression_type=compression_type, enable_idempotence=False)
        batches = captured_batches(server)
        versions = {f.api_version for f in server.captured(ApiKey.PRODUCE)}
    assert versions == {9}
    check_batches(batches, sent, codec)


def test_kafka_python_idempotent_batches() -> None:
    sent = messages(allow_null_header_value=False)
    with CaptureServer(topics=(TOPIC,), producer_id=1000, producer_epoch=0) as server:
        produce_kafka_python(server, sent, compression_type="gzip", enable_idempotence=True)
        batches = captured_batches(server)
        assert server.captured(ApiKey.INIT_PRODUCER_ID)
    check_batches(batches, sent, Compression.GZIP)
    expected_sequence = 0
    for batch in batches:
        assert (batch.producer_id, batch.producer_epoch) == (1000, 0)
        assert batch.base_sequence == expected_sequence
        expected_sequence += batch.records_count


def test_kafka_python_non_flexible_produce() -> None:
    sent = messages(allow_null_header_value=False)
    with CaptureServer(topics=(TOPIC,), api_versions=NON_FLEXIBLE_API_VERSIONS) as server:
        produce_kafka_python(server, sent, compression_type="gzip", enable_idempotence=False)
        batches = captured_batches(server)
        versions = {f.api_version for f in server.captured(ApiKey.PRODUCE)}
    assert versions == {8}
    check_batches(batches, sent, Compression.GZIP)


def test_capture_server_answers_api_versions_v0_for_unknown_version() -> None:
    """kafka-python asks ApiVersions v4 first; the server must answer v0 + error 35 and get a retry."""
    sent = messages(allow_null_header_value=False)[:1]
    start = time.monotonic()
    with CaptureServer(topics=(TOPIC,), api_versions=DEFAULT_API_VERSIONS) as server:
        produce_kafka_python(server, sent, enable_idempotence=False)
        versions = [f.api_version for f in server.captured(ApiKey.API_VERSIONS)]
    assert versions[:2] == [4, 3]
    assert time.monotonic() - start < 10


# --- aiokafka (non-flexible: ApiVersions v0, Metadata v5, Produce v7, InitProducerId v0) ----------------


def produce_aiokafka(server: CaptureServer, sent: Sequence[Sent], **config: object) -> None:
    aiokafka = pytest.importorskip("aiokafka")

    async def run() -> None:
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=server.bootstrap,
            linger_ms=50,
            request_timeout_ms=5000,
            **config,
        )
        await producer.start()
        try:
            futures = [
                await producer.send(
                    TOPIC,
                    value=s.value,
                    key=s.key,
                    headers=list(s.headers),
                    timestamp_ms=s.timestamp,
                    partition=0,
                )
                for s in sent
            ]
            await asyncio.wait_for(asyncio.gather(*futures), timeout=10)
        finally:
            await producer.stop()

    asyncio.run(run())


@pytest.mark.parametrize("codec", list(Compression), ids=lambda c: c.name.lower())
def test_aiokafka_batches_decode(codec: Compression) -> None:
    sent = messages(allow_null_header_value=False)
    compression_type = None if codec == Compression.NONE else codec.name.lower()
    with CaptureServer(topics=(TOPIC,)) as server:
        produce_aiokafka(server, sent, compression_type=compression_type)
        batches = captured_batches(server)
        versions = {f.api_version for f in server.captured(ApiKey.PRODUCE)}
    assert versions == {7}  # non-flexible Produce, int32-length records
    check_batches(batches, sent, codec)
    if codec == Compression.SNAPPY:  # aiokafka writes Xerial-framed snappy, like Java
        assert all(is_xerial(b) for b in batches if b.compression == Compression.SNAPPY)


def test_aiokafka_idempotent_batches() -> None:
    sent = messages(allow_null_header_value=False)
    with CaptureServer(topics=(TOPIC,), producer_id=1000, producer_epoch=0) as server:
        produce_aiokafka(server, sent, compression_type="snappy", enable_idempotence=True)
        batches = captured_batches(server)
        assert server.captured(ApiKey.INIT_PRODUCER_ID)
    check_batches(batches, sent, Compression.SNAPPY)
    expected_sequence = 0
    for batch in batches:
        assert (batch.producer_id, batch.producer_epoch) == (1000, 0)
        assert batch.base_sequence == expected_sequence
        expected_sequence += batch.records_count

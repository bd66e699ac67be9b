"""Every client produces with every codec; every client consumes everything back byte-exact (issue 6.1).

One broker for the module. Each producing client writes the same data set to its own topic, one
partition per codec (partition i = CODECS[i]); topics are created through the confluent-kafka and
kafka-python admin clients. Then the stored batches are read with our own codecs (codec bits, CRC,
offsets, records) and every consuming client (confluent-kafka, kafka-python, aiokafka, kcat) reads every
topic: keys (incl. None), values (incl. None, empty, binary), headers, explicit timestamps and offsets
must come back exactly as produced, whoever produced them.

kcat links librdkafka 2.0.2 (kafka-wire.md §1.1): it silently stops compressing when the broker
advertises Produce min > 0 (KAFKA-18659); the codec check on kcat's batches catches that.
"""

from __future__ import annotations

import asyncio
import random
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from exactly.records.compression import Compression, compress
from exactly.testing.processes import BrokerProcess
from tests.interop.support import fetch_partition, running_broker

pytestmark = pytest.mark.interop

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_BITS = {
    "none": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}
PRODUCERS = ["confluent", "kafka-python", "aiokafka", "kcat"]
T0 = 1_600_000_000_000
TIMEOUT = 15.0

Headers = tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True)
class Rec:
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp: int | None  # None: the producer stamps wall-clock time (kcat cannot set timestamps)


def _blob(seed: int, size: int) -> bytes:
    return random.Random(seed).randbytes(size)


def dataset(producer: str, codec: str) -> list[Rec]:
    """What `producer` sends to the `codec` partition (kcat gets a line-oriented variant)."""
    tag = f"{producer}/{codec}".encode()
    if producer == "kcat":
        hdrs: Headers = (("h1", b"v1"), ("h2", b""))
        return [
            Rec(b"a", b"b-" + tag, hdrs, None),
            Rec(None, b"nokey-" + tag, hdrs, None),
            Rec(None, None, hdrs, None),
            Rec(b"k", None, hdrs, None),
            Rec(b"bin", bytes(b for b in range(256) if b not in (0x0A, 0x1F)), hdrs, None),
            Rec(b"big", b"0123456789abcdef" * 640 + tag, hdrs, None),
        ]
    # kafka-python refuses None header values client-side ("must be (str, bytes) tuples").
    null_header: list[Rec] = (
        [] if producer == "kafka-python" else [Rec(b"null-header", b"v", (("n", None), ("m", b"")), T0 + 5)]
    )
    return [
        *null_header,
        Rec(None, b"plain-" + tag, (), T0),
        Rec(b"tombstone", None, (("h", b"v"),), T0 + 1),
        Rec(b"", b"", (("empty", b""),), T0 + 2),
        Rec(
            bytes(range(256)),
            bytes(range(255, -1, -1)) * 4,
            (("bin", b"\x00\xff\n"), ("dup", b"1"), ("dup", b"2")),
            T0 + 3,
        ),
        Rec("ключ".encode(), "héllo ✓".encode(), (("заголовок", "значение".encode()),), T0 + 4),
        Rec(b"random", _blob(CODECS.index(codec), 5000) + tag, (), T0 + 1000),
        Rec(b"compressible", b"abc" * 5000 + tag, (("x", b"y" * 300),), T0 - 5000),
    ]


def topic_of(producer: str) -> str:
    return f"roundtrip-{producer}"


# --- producing ---------------------------------------------------------------------------------------


def produce_confluent(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Producer

    for partition, codec in enumerate(CODECS):
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "compression.type": codec,
                "linger.ms": 20,
                "acks": "all",
                "message.timeout.ms": int(TIMEOUT * 1000),
            }
        )
        reports: list[Any] = []

        def on_delivery(err: Any, msg: Any, reports: list[Any] = reports) -> None:
            reports.append((err, msg.offset() if err is None else None))

        for rec in dataset("confluent", codec):
            producer.produce(
                topic,
                value=rec.value,
                key=rec.key,
                partition=partition,
                headers=list(rec.headers),
                timestamp=rec.timestamp or 0,
                on_delivery=on_delivery,
            )
        assert producer.flush(TIMEOUT) == 0
        assert len(reports) == len(dataset("confluent", codec))
        assert [err for err, _ in reports] == [None] * len(reports)
        assert [off for _, off in reports] == list(range(len(reports)))


def produce_kafka_python(bootstrap: str, topic: str) -> None:
    from kafka import KafkaProducer

    for partition, codec in enumerate(CODECS):
        producer = KafkaProducer(
            bootstrap_servers=bootstrap,
            compression_type=None if codec == "none" else codec,
            linger_ms=20,
            acks="all",
            request_timeout_ms=int(TIMEOUT * 1000),
        )
        try:
            futures = [
                producer.send(
                    topic,
                    value=rec.value,
                    key=rec.key,
                    headers=list(rec.headers),
                    partition=partition,
                    timestamp_ms=rec.timestamp,
                )
                for rec in dataset("kafka-python", codec)
            ]
            producer.flush(TIMEOUT)
            assert [f.get(TIMEOUT).offset for f in futures] == list(range(len(futures)))
        finally:
            producer.close(TIMEOUT)


def produce_aiokafka(bootstrap: str, topic: str) -> None:
    from aiokafka import AIOKafkaProducer

    async def run() -> None:
        for partition, codec in enumerate(CODECS):
            producer = AIOKafkaProducer(
                bootstrap_servers=bootstrap,
                compression_type=None if codec == "none" else codec,
                linger_ms=20,
                acks="all",
                request_timeout_ms=int(TIMEOUT * 1000),
            )
            await producer.start()
            try:
                futures = [
                    await producer.send(
                        topic,
                        value=rec.value,
                        key=rec.key,
                        headers=list(rec.headers),
                        partition=partition,
                        timestamp_ms=rec.timestamp,
                    )
                    for rec in dataset("aiokafka", codec)
                ]
                metadata = [await f for f in futures]
                assert [m.offset for m in metadata] == list(range(len(futures)))
            finally:
                await producer.stop()

    asyncio.run(run())


KCAT_MSG_DELIM = b"\n"
KCAT_KEY_DELIM = b"\x1f"


def produce_kcat(bootstrap: str, topic: str) -> None:
    for partition, codec in enumerate(CODECS):
        recs = dataset("kcat", codec)
        payload = bytearray()
        for rec in recs:
            # With -Z an empty key or value is sent as NULL, so NULL is written as empty.
            payload += (rec.key or b"") + KCAT_KEY_DELIM + (rec.value or b"") + KCAT_MSG_DELIM
        args = ["kcat", "-P", "-b", bootstrap, "-t", topic, "-p", str(partition), "-z", codec]
        args += ["-K", "\\x1f", "-Z", "-X", "acks=all", "-X", "linger.ms=200"]  # -Z: empty key/value -> NULL
        for name, value in recs[0].headers:
            args += ["-H", f"{name}={(value or b'').decode()}"]
        done = subprocess.run(args, input=bytes(payload), capture_output=True, timeout=30)
        assert done.returncode == 0, done.stderr.decode(errors="replace")


PRODUCE = {
    "confluent": produce_confluent,
    "kafka-python": produce_kafka_python,
    "aiokafka": produce_aiokafka,
    "kcat": produce_kcat,
}


@dataclass
class Produced:
    broker: BrokerProcess
    errors: dict[str, BaseException]
    window: tuple[int, int]  # wall-clock ms bracket for records without explicit timestamps


def create_topics(bootstrap: str) -> None:
    """confluent-kafka's AdminClient creates its topic; kafka-python's KafkaAdminClient the others."""
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka.admin import KafkaAdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic_of("confluent"), len(CODECS), 1)], request_timeout=TIMEOUT)
    for future in futures.values():
        assert future.result(TIMEOUT) is None
    kadmin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(TIMEOUT * 1000))
    try:
        kadmin.create_topics(
            {topic_of(p): {"num_partitions": len(CODECS), "replication_factor": 1} for p in PRODUCERS[1:]}
        )
    finally:
        kadmin.close()
    md = admin.list_topics(timeout=TIMEOUT)
    for producer in PRODUCERS:
        assert sorted(md.topics[topic_of(producer)].partitions) == list(range(len(CODECS)))


@pytest.fixture(scope="module")
def produced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Produced]:
    with running_broker(tmp_path_factory.mktemp("roundtrip") / "data") as broker:
        create_topics(broker.bootstrap)
        errors: dict[str, BaseException] = {}
        start = int(time.time() * 1000)
        for name, produce in PRODUCE.items():
            try:
                produce(broker.bootstrap, topic_of(name))
            except Exception as e:  # noqa: BLE001 - reported by the test of that producer
                errors[name] = e
        yield Produced(broker, errors, (start - 1000, int(time.time() * 1000) + 1000))


def expected_of(producer: str, codec: str) -> list[Rec]:
    return dataset(producer, codec)


def assert_records_match(
    got: list[tuple[int, bytes | None, bytes | None, Headers, int]],
    producer: str,
    codec: str,
    window: tuple[int, int],
    who: str,
) -> None:
    expected = expected_of(producer, codec)
    where = f"{who} reading {producer}/{codec}"
    assert [g[0] for g in got] == list(range(len(expected))), where
    assert [g[1] for g in got] == [e.key for e in expected], where
    assert [g[2] for g in got] == [e.value for e in expected], where
    expected_headers = [e.headers for e in expected]
    if who == "kcat":
        # kcat's %h prints header values as C strings (a value ends at its first NUL byte) and a null
        # value as the text NULL.
        expected_headers = [
            tuple((n, b"NULL" if v is None else v.split(b"\0")[0]) for n, v in h) for h in expected_headers
        ]
    assert [g[3] for g in got] == expected_headers, where
    for g, e in zip(got, expected, strict=True):
        if e.timestamp is None:
            assert window[0] <= g[4] <= window[1], (where, g[4], window)
        else:
            assert g[4] == e.timestamp, where


# --- what the broker stored ----------------------------------------------------------------------------


@pytest.mark.parametrize("producer", PRODUCERS)
def test_producer_batches_are_stored_exactly(produced: Produced, producer: str) -> None:
    assert producer not in produced.errors, repr(produced.errors.get(producer))
    for partition, codec in enumerate(CODECS):
        dump = fetch_partition(produced.broker.bootstrap, topic_of(producer), partition)
        expected = expected_of(producer, codec)
        assert dump.high_watermark == len(expected)
        assert dump.batches, (producer, codec)
        assert all(batch.crc_ok for batch in dump.batches)
        offsets = [o for b in dump.batches for o in range(b.base_offset, b.last_offset + 1)]
        assert offsets == list(range(len(expected)))
        got = [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in dump.records]
        assert_records_match(got, producer, codec, produced.window, "raw fetch")


@pytest.mark.parametrize("producer", PRODUCERS)
def test_stored_batches_use_the_configured_codec(produced: Produced, producer: str) -> None:
    """The client compressed with the codec it was asked for, so the broker advertised what it needs.

    librdkafka (confluent-kafka and kcat) enables LZ4 only when the broker advertises FindCoordinator
    (its "Kafka >= 0.8.2" probe, rdkafka_feature.c) and otherwise silently sends LZ4 batches
    uncompressed; kcat's librdkafka 2.0.2 likewise drops every codec if Produce min > 0 (KAFKA-18659).
    """
    assert producer not in produced.errors, repr(produced.errors.get(producer))
    for partition, codec in enumerate(CODECS):
        dump = fetch_partition(produced.broker.bootstrap, topic_of(producer), partition)
        wanted = CODEC_BITS[codec]
        used = {Compression(b.attributes & 0x07) for b in dump.batches}
        assert wanted in used, (codec, used)
        assert used <= {wanted, Compression.NONE}, (codec, used)
        # librdkafka sends a batch uncompressed when compressing it would not make it smaller
        # (rd_kafka_msgset_writer_compress); the data set has incompressible random values, so a batch
        # that happens to hold only those may go out plain. Any such batch must really be incompressible.
        for batch in dump.batches:
            if Compression(batch.attributes & 0x07) is Compression.NONE and wanted is not Compression.NONE:
                body = batch.raw[61:]
                assert len(compress(wanted, body)) > 0.9 * len(body), (codec, batch.base_offset)


# --- consuming --------------------------------------------------------------------------------------


def _norm_headers(headers: Any) -> Headers:
    if not headers:
        return ()
    return tuple(
        (k if isinstance(k, str) else k.decode(), None if v is None else bytes(v)) for k, v in headers
    )


def consume_confluent(bootstrap: str, topic: str, counts: list[int]) -> dict[int, list[Any]]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "roundtrip-unused",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            "fetch.wait.max.ms": 50,
            "session.timeout.ms": 6000,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(len(counts))])
        out: dict[int, list[Any]] = {p: [] for p in range(len(counts))}
        deadline = time.monotonic() + TIMEOUT
        while any(len(out[p]) < counts[p] for p in out) and time.monotonic() < deadline:
            for msg in consumer.consume(100, 0.5):
                assert msg.error() is None, msg.error()
                out[msg.partition()].append(
                    (msg.offset(), msg.key(), msg.value(), _norm_headers(msg.headers()), msg.timestamp()[1])
                )
        return out
    finally:
        consumer.close()


def consume_kafka_python(bootstrap: str, topic: str, counts: list[int]) -> dict[int, list[Any]]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        fetch_max_wait_ms=50,
        request_timeout_ms=int(TIMEOUT * 1000),
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(len(counts))]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        out: dict[int, list[Any]] = {p: [] for p in range(len(counts))}
        deadline = time.monotonic() + TIMEOUT
        while any(len(out[p]) < counts[p] for p in out) and time.monotonic() < deadline:
            for tp, msgs in consumer.poll(timeout_ms=500).items():
                for m in msgs:
                    out[tp.partition].append(
                        (m.offset, m.key, m.value, _norm_headers(m.headers), m.timestamp)
                    )
        return out
    finally:
        consumer.close()


def consume_aiokafka(bootstrap: str, topic: str, counts: list[int]) -> dict[int, list[Any]]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> dict[int, list[Any]]:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=None,
            enable_auto_commit=False,
            fetch_max_wait_ms=50,
            request_timeout_ms=int(TIMEOUT * 1000),
        )
        await consumer.start()
        try:
            tps = [TopicPartition(topic, p) for p in range(len(counts))]
            consumer.assign(tps)
            for tp in tps:
                consumer.seek(tp, 0)
            out: dict[int, list[Any]] = {p: [] for p in range(len(counts))}
            deadline = time.monotonic() + TIMEOUT
            while any(len(out[p]) < counts[p] for p in out) and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500)
                for tp, msgs in batches.items():
                    for m in msgs:
                        out[tp.partition].append(
                            (m.offset, m.key, m.value, _norm_headers(m.headers), m.timestamp)
                        )
            return out
        finally:
            await consumer.stop()

    return asyncio.run(run())


def consume_kcat(bootstrap: str, topic: str, counts: list[int]) -> dict[int, list[Any]]:
    """kcat -C with a -f format that carries lengths, so binary keys/values parse unambiguously."""
    fmt = "@@%p,%o,%T,%K,%S|%k%s|%h|##\\n"
    done = subprocess.run(
        ["kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-f", fmt],
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    data = done.stdout
    out: dict[int, list[Any]] = {p: [] for p in range(len(counts))}
    pos = 0
    while pos < len(data):
        assert data[pos : pos + 2] == b"@@", data[pos : pos + 50]
        bar = data.index(b"|", pos)
        p, o, ts, klen, vlen = (int(x) for x in data[pos + 2 : bar].split(b","))
        pos = bar + 1
        key = None if klen < 0 else data[pos : pos + klen]
        pos += max(klen, 0)
        value = None if vlen < 0 else data[pos : pos + vlen]
        pos += max(vlen, 0)
        assert data[pos : pos + 1] == b"|"
        end = data.index(b"|##\n", pos)
        raw_headers = data[pos + 1 : end]
        pos = end + 4
        headers: list[tuple[str, bytes | None]] = []
        if raw_headers:
            for item in raw_headers.split(b","):
                name, eq, val = item.partition(b"=")
                headers.append((name.decode(), val if eq else None))
        out[p].append((o, key, value, tuple(headers), ts))
    return out


CONSUME = {
    "confluent": consume_confluent,
    "kafka-python": consume_kafka_python,
    "aiokafka": consume_aiokafka,
    "kcat": consume_kcat,
}


@pytest.mark.parametrize("consumer", list(CONSUME))
def test_every_client_reads_every_producer(produced: Produced, consumer: str) -> None:
    for producer in PRODUCERS:
        counts = [len(expected_of(producer, codec)) for codec in CODECS]
        got = CONSUME[consumer](produced.broker.bootstrap, topic_of(producer), counts)
        for partition, codec in enumerate(CODECS):
            assert_records_match(got[partition], producer, codec, produced.window, consumer)

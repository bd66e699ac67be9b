"""Scale on one machine (issue 14): many partitions and many connections on one broker.

    python -m exactly.bench.scale [--topics 100] [--partitions-per-topic 100] [--nofile 20000]
                                  [--connections 1000]      (or `exactly bench scale`)

One broker process with RLIMIT_NOFILE = --nofile (soft and hard). Printed, one line each:

* create: CreateTopics of every topic (50 per request), seconds;
* metadata: a Metadata request for every topic (confluent-kafka `list_topics`), median of 3, seconds;
* produce: one record to each partition (acks=all, idempotent), from the first send to the last
  acknowledgement, seconds, as the Java client sends them: Produce requests of up to 1 MB that each carry
  many partitions, 5 in flight (our own codecs; no Java client can be installed here). librdkafka sends
  one partition per Produce request and its own CPU grows faster than the partition count (10,000
  partitions: 9.8 s of client CPU for the idempotent producer), so its figure is measured as well only up
  to --librdkafka-max partitions;
* consume: every record read back (one consumer, assigned), seconds;
* rss: the broker's resident memory after that, MB; its open descriptors;
* restart: SIGTERM then start, and kill -9 then start: seconds until the port accepts connections;
* connections: --connections idle TCP connections held open (each sent one ApiVersions), while a producer
  and a consumer move 1,000 records; the broker's RSS before and after, MB per connection.

Targets (2 cores, 24 GiB): 100,000 partitions with --nofile 20000: RSS <= 2 GiB, Metadata <= 1 s, the
100,000 records acknowledged within 30 s, listening <= 10 s after SIGTERM and <= 60 s after kill -9;
10,000 idle connections.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import resource
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from exactly.client.connection import AsyncKafkaConnection, KafkaConnection
from exactly.errors import ErrorCode, ProtocolError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.api_versions import ApiVersionsRequest
from exactly.protocol.messages.init_producer_id import InitProducerIdRequest
from exactly.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from exactly.records.builder import build_batch
from exactly.testing.processes import BrokerProcess


@dataclass(frozen=True, slots=True)
class ScaleResult:
    partitions: int
    create_s: float
    metadata_s: float
    produce_s: float
    produce_librdkafka_s: float | None
    consume_s: float
    rss_mb: float
    open_fds: int
    restart_clean_s: float
    restart_kill_s: float
    connections: int
    connections_rss_mb: float
    per_connection_kb: float
    records_moved: int


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _pid(broker: BrokerProcess) -> int:
    assert broker.proc is not None
    return broker.proc.pid


def _create(bootstrap: str, topics: list[str], partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for i in range(0, len(topics), 50):
        futures = admin.create_topics(
            [NewTopic(t, partitions, 1) for t in topics[i : i + 50]],
            operation_timeout=120,
            request_timeout=300,
        )
        for future in futures.values():
            future.result(timeout=600)


_REQUEST_BYTES = 1 << 20  # the Java client's max.request.size
_IN_FLIGHT = 5  # its max.in.flight.requests.per.connection with idempotence


def _produce_wide(port: int, topics: list[str], partitions: int) -> None:
    """One record to each partition, idempotent, acks=all, many partitions per Produce request."""

    async def run() -> None:
        conn = await AsyncKafkaConnection.open("127.0.0.1", port, client_id="bench-scale")
        try:
            init = await conn.request(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(None, -1, -1, -1))
            if init.error_code != ErrorCode.NONE:
                raise RuntimeError(f"InitProducerId: {ErrorCode(init.error_code).name}")
            now = int(time.time() * 1000)
            requests: list[list[TopicProduceData]] = [[]]
            size = 0
            for topic in topics:
                data = []
                for p in range(partitions):
                    value = f"{topic}-{p}".encode()
                    batch = build_batch(
                        [(None, value)],
                        timestamp=now,
                        producer_id=init.producer_id,
                        producer_epoch=init.producer_epoch,
                        base_sequence=0,
                    )
                    data.append(PartitionProduceData(p, batch))
                    size += len(batch)
                requests[-1].append(TopicProduceData(topic, partition_data=data))
                if size >= _REQUEST_BYTES:
                    requests.append([])
                    size = 0
            slots = asyncio.Semaphore(_IN_FLIGHT)

            async def send(topic_data: list[TopicProduceData]) -> None:
                async with slots:
                    response = await conn.request(
                        ApiKey.PRODUCE, 9, ProduceRequest(None, -1, 120_000, topic_data)
                    )
                failed = [
                    (t.name, r.index, ErrorCode(r.error_code).name)
                    for t in response.responses
                    for r in t.partition_responses
                    if r.error_code != ErrorCode.NONE
                ]
                if failed:
                    raise RuntimeError(f"{len(failed)} partitions refused, e.g. {failed[:3]}")

            await asyncio.gather(*(send(r) for r in requests if r))
        finally:
            conn.close()

    asyncio.run(run())


def _produce(bootstrap: str, topics: list[str], partitions: int) -> None:
    """librdkafka's way, every delivery report checked. Its records wait in its own queue for up to
    message.timeout.ms (default 300 s) and then fail without reaching the broker: at 100,000 partitions
    librdkafka needs about 370 s of its own CPU, so the timeout is raised to 15 minutes."""
    failed: list[str] = []

    def delivered(error: object, message: object) -> None:
        if error is not None:
            failed.append(str(error))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "enable.idempotence": True,
            "queue.buffering.max.messages": 1_000_000,
            "message.timeout.ms": 900_000,
        }
    )
    for topic in topics:
        for p in range(partitions):
            producer.produce(topic, f"{topic}-{p}".encode(), partition=p, on_delivery=delivered)
            producer.poll(0)
    left = producer.flush(900)
    if left or failed:
        raise RuntimeError(f"{left} records not acknowledged, {len(failed)} failed (e.g. {failed[:1]})")


def _consume(bootstrap: str, topics: list[str], partitions: int, expected: int) -> int:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench-scale", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(t, p, 0) for t in topics for p in range(partitions)])
        seen = 0
        deadline = time.monotonic() + 600
        while seen < expected:
            if time.monotonic() > deadline:
                raise RuntimeError(f"read {seen} of {expected} records")
            for message in consumer.consume(1000, timeout=0.5):
                if message.error() is None:
                    seen += 1
        return seen
    finally:
        consumer.close()


def _time_restart(broker: BrokerProcess, kill: bool) -> tuple[float, float, float | None]:
    """(seconds to stop, seconds from then until listening, seconds until every log is loaded in the
    background, from the broker's own log line; None when none was needed or it did not come in 10 min)."""
    mark = len(broker.full_log())
    t0 = time.monotonic()
    if kill:
        broker.kill()
    else:
        broker.stop(timeout=600)
    stopped = time.monotonic()
    broker.start(timeout=600)
    listening = time.monotonic()
    loaded = _background_load_seconds(broker, mark, deadline=listening + 600)
    return stopped - t0, listening - stopped, loaded


_LOADED = re.compile(r"loaded \d+ logs in the background in ([0-9.]+) s")


def _background_load_seconds(broker: BrokerProcess, mark: int, deadline: float) -> float | None:
    while time.monotonic() < deadline:
        found = _LOADED.search(broker.full_log()[mark:])
        if found:
            return float(found.group(1))
        time.sleep(0.5)
    return None


def _idle_connections(port: int, count: int) -> list[KafkaConnection]:
    """Up to `count` connections, each answered once (an ApiVersions); stops at the first the broker
    refuses or drops (its open-file limit reached), so that the caller can report how many it got."""
    connections: list[KafkaConnection] = []
    for _ in range(count):
        try:
            connection = KafkaConnection.open("127.0.0.1", port, client_id="idle", timeout=30)
        except OSError:
            break
        try:
            connection.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("idle", "1"))
        except (OSError, ProtocolError):
            connection.close()
            break
        connections.append(connection)
    return connections


def _move_records(bootstrap: str, count: int) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("scale-live", 1, 1)])["scale-live"].result(timeout=60)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce("scale-live", str(i).encode(), partition=0)
    if producer.flush(120):
        raise RuntimeError("live producer: records not acknowledged")
    return _count_topic(bootstrap, "scale-live", count)


def _count_topic(bootstrap: str, topic: str, expected: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-scale-live"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[bytes | None] = []
        deadline = time.monotonic() + 120
        while len(values) < expected and time.monotonic() < deadline:
            values += [m.value() for m in consumer.consume(1000, timeout=2) if m.error() is None]
        if values != [str(i).encode() for i in range(expected)]:
            raise RuntimeError(f"live consumer read {len(values)} of {expected} records, or out of order")
        return len(values)
    finally:
        consumer.close()


def measure(
    topics: int,
    per_topic: int,
    nofile: int,
    connections: int,
    data_dir: Path,
    librdkafka_max: int = 20_000,
    say: Callable[[str], None] = lambda line: print(line, flush=True),
) -> ScaleResult:
    """Run every step, printing each figure as soon as it is measured (a long run shows its progress)."""
    names = [f"scale-{i:05d}" for i in range(topics)]
    total = topics * per_topic
    broker = BrokerProcess(data_dir, nofile=nofile)
    broker.start(timeout=60)
    say(f"partitions        {total:,} ({topics} topics x {per_topic}), nofile {nofile:,}")
    try:
        t0 = time.monotonic()
        _create(broker.bootstrap, names, per_topic)
        create_s = time.monotonic() - t0
        say(f"create            {create_s:.2f} s")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        samples = []
        for _ in range(3):
            t0 = time.monotonic()
            listed = admin.list_topics(timeout=120)
            samples.append(time.monotonic() - t0)
            if sum(len(listed.topics[n].partitions) for n in names) != total:
                raise RuntimeError("Metadata does not list every partition")
        del admin, listed  # no client left to reconnect through the restarts below
        say(f"metadata          {statistics.median(samples):.3f} s (median of 3, all topics)")
        t0 = time.monotonic()
        _produce_wide(broker.port, names, per_topic)
        produce_s = time.monotonic() - t0
        say(f"produce           {produce_s:.2f} s (a record per partition, acks=all, idempotent, 1 MB each)")
        records = total
        librdkafka_s = None
        if total <= librdkafka_max:
            t0 = time.monotonic()
            _produce(broker.bootstrap, names, per_topic)
            librdkafka_s = time.monotonic() - t0
            records += total
            say(f"produce librdkafka {librdkafka_s:.2f} s (a record more per partition, 1 per request)")
        else:
            say(f"produce librdkafka not run above {librdkafka_max:,} partitions (--librdkafka-max)")
        t0 = time.monotonic()
        _consume(broker.bootstrap, names, per_topic, records)
        consume_s = time.monotonic() - t0
        say(f"consume           {consume_s:.2f} s ({records:,} records)")
        rss = rss_mb(_pid(broker))
        fds = len(os.listdir(f"/proc/{_pid(broker)}/fd"))
        say(f"rss               {rss:.0f} MB, {fds:,} open descriptors")
        stop_s, start_s, loaded_s = _time_restart(broker, kill=False)
        clean = stop_s + start_s
        say(
            f"restart           SIGTERM: stopped in {stop_s:.2f} s, listening {start_s:.2f} s later "
            f"({clean:.2f} s in all); every log loaded {_seconds(loaded_s)} after listening"
        )
        _, killed, loaded_s = _time_restart(broker, kill=True)
        say(
            f"restart           kill -9: listening {killed:.2f} s later; every log loaded (recovered) "
            f"{_seconds(loaded_s)} after listening"
        )
        before = rss_mb(_pid(broker))
        idle = _idle_connections(broker.port, connections)
        held = len(idle)
        try:
            moved = _move_records(broker.bootstrap, 1000)
            after = rss_mb(_pid(broker))
        finally:
            for connection in idle:
                connection.close()
        per_connection_kb = (after - before) * 1024 / max(held, 1)
        say(
            f"connections       {held:,} of {connections:,} idle connections held, and a "
            f"producer/consumer moving {moved} records: "
            f"+{after - before:.1f} MB RSS, {per_connection_kb:.1f} KB per connection"
        )
        return ScaleResult(
            total,
            create_s,
            statistics.median(samples),
            produce_s,
            librdkafka_s,
            consume_s,
            rss,
            fds,
            clean,
            killed,
            held,
            after - before,
            per_connection_kb,
            moved,
        )
    finally:
        broker.stop(timeout=600)


def _seconds(value: float | None) -> str:
    return "(not seen)" if value is None else f"{value:.1f} s"


def _raise_own_limit(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(needed, hard), hard))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="exactly scale benchmark (partitions, connections)")
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--partitions-per-topic", type=int, default=100)
    parser.add_argument("--nofile", type=int, default=20_000)
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--librdkafka-max", type=int, default=20_000)
    args = parser.parse_args(argv)
    _raise_own_limit(args.connections + 1000)
    with tempfile.TemporaryDirectory(prefix="exactly-bench-scale-") as tmp:
        measure(
            args.topics,
            args.partitions_per_topic,
            args.nofile,
            args.connections,
            Path(tmp) / "data",
            args.librdkafka_max,
        )


if __name__ == "__main__":
    main()

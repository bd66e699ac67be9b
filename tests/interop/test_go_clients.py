"""Go clients against the real broker: sarama 1.22, kafka-go 0.2.1 and confluent-kafka-go 0.11.6.

The clients are Debian bookworm's packages (golang-github-shopify-sarama-dev 1.22.1,
golang-github-segmentio-kafka-go-dev 0.2.1, golang-github-confluentinc-confluent-kafka-go-dev 0.11.6 over
Debian's librdkafka 2.0.2), built offline in GOPATH mode from /usr/share/gocode. Each one has a small
program in tests/interop/go/<client>/ that takes a bootstrap address and a scenario and prints its
results as JSON lines; this module builds them once (into the pytest tmp dir) and checks what they
report against what the broker stores and what confluent-kafka (Python) reads:

- sarama: an idempotent SyncProducer (acks=all, MaxOpenRequests=1) writes keyed records with a header
  across partitions as producer-id'd batches; a ConsumerGroup member reads every record exactly once and
  commits the high watermarks; a new member of the group continues from there (reads only what was
  produced since, nothing again); ClusterAdmin creates (with a config), describes and deletes a topic.
- kafka-go 0.2.1 predates record batches: its Writer sends Produce v2 (magic 1 message sets), its Reader
  Fetch v2, Conn.CreateTopics CreateTopics v0 - versions Kafka 4.0 removed (KIP-896) and exactly refuses
  the same way (the connection is closed), so kafka-go 0.2.1 cannot produce or consume against Kafka 4.x
  or exactly; the test pins that refusal, and that what it still speaks works: Metadata v1 and
  ListOffsets v1 (partitions and offsets of records produced from Python), a Reader with GroupID joining
  and committing offsets (OffsetCommit v2) that persist across a broker restart, DeleteTopics v1.
- sarama 1.22 commits with OffsetCommit v1 unless Consumer.Offsets.Retention is set (the program sets
  it, and so must its users); its DescribeConfigs is always v0, refused likewise.
- records written by sarama and by confluent-kafka-go are read by confluent-kafka (Python) with the same
  keys, values and headers at the offsets the Go clients reported, and records written by confluent-kafka
  (Python) are read back the same by sarama's and confluent-kafka-go's group consumers.

Skipped, with the reason, when `go` is absent (.ci/run installs the Debian packages) or a client's
package is not installed; confluent-kafka-go's tests skip if it does not build against the installed
librdkafka.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from exactly.testing.processes import BrokerProcess
from tests.interop.cluster_support import until
from tests.interop.groups_support import committed_offsets
from tests.interop.support import LATEST, create_topic, fetch_partition, list_offset, running_broker

pytestmark = [pytest.mark.interop, pytest.mark.slow]

GOCODE = Path("/usr/share/gocode")
SOURCES = Path(__file__).resolve().parent / "go"
PACKAGES = {  # program -> the Go package it imports (under GOCODE/src)
    "sarama": "github.com/Shopify/sarama",
    "kafkago": "github.com/segmentio/kafka-go",
    "confluent": "github.com/confluentinc/confluent-kafka-go/kafka",
}
PARTITIONS = 3
TIMEOUT = 90.0  # one program run, on a loaded 2-core machine

Record = tuple[str, str, dict[str, str]]  # key, value, headers


@dataclass(frozen=True)
class GoPrograms:
    """The built programs (a program is None when it could not be built, with the reason)."""

    paths: dict[str, Path]
    skipped: dict[str, str]

    def path(self, name: str) -> Path:
        if name not in self.paths:
            pytest.skip(self.skipped[name])
        return self.paths[name]


@pytest.fixture(scope="module")
def go_programs(tmp_path_factory: pytest.TempPathFactory) -> GoPrograms:
    go = shutil.which("go")
    if go is None:
        pytest.skip("go is not installed (.ci/run installs golang-go and the Go client packages)")
    out = tmp_path_factory.mktemp("go")
    gopath = os.pathsep.join(filter(None, [str(GOCODE), os.environ.get("GOPATH")]))
    env = {
        **os.environ,
        "GO111MODULE": "off",
        "GOPATH": gopath,
        "GOCACHE": str(out / "cache"),
        "GOFLAGS": "",
        "CGO_CFLAGS": "-w",  # DataDog/zstd's deprecation warnings
    }
    paths: dict[str, Path] = {}
    skipped: dict[str, str] = {}
    for name, package in PACKAGES.items():
        if not (GOCODE / "src" / package).is_dir():
            skipped[name] = f"{package} is not installed under {GOCODE} (.ci/run installs it)"
            continue
        target = out / name
        built = subprocess.run(
            [go, "build", "-o", str(target), "."],
            cwd=SOURCES / name,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if built.returncode != 0:
            if name == "confluent":  # optional: it must build against the installed librdkafka
                skipped[name] = f"confluent-kafka-go does not build here: {built.stderr[-2000:]}"
                continue
            raise AssertionError(f"go build of {name} failed:\n{built.stderr}")
        paths[name] = target
    return GoPrograms(paths, skipped)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("go-clients") / "data"
    with running_broker(data, "group.initial.rebalance.delay.ms=0") as proc:
        yield proc


def run(
    programs: GoPrograms, name: str, broker: BrokerProcess, scenario: str, *args: str
) -> list[dict[str, Any]]:
    """Runs one scenario; its JSON lines. Fails (with its output and the broker log) if it exits non-zero."""
    done = subprocess.run(
        [str(programs.path(name)), broker.bootstrap, scenario, *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, (
        f"{name} {scenario} {args} exited {done.returncode}\nstdout:\n{done.stdout[-3000:]}\n"
        f"stderr:\n{done.stderr[-3000:]}\nbroker:\n{broker.log()[-3000:]}"
    )
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def records_of(lines: list[dict[str, Any]]) -> dict[tuple[int, int], Record]:
    """(partition, offset) -> (key, value, headers) of the record lines (those with a key)."""
    return {
        (x["partition"], x["offset"]): (x["key"], x["value"], x.get("headers", {}))
        for x in lines
        if "key" in x
    }


def dataset(prefix: str, count: int) -> list[Record]:
    """What the Go programs' produce scenarios write: keys prefix-key-i, values prefix-value-i, seq=i."""
    return [(f"{prefix}-key-{i}", f"{prefix}-value-{i}", {"seq": str(i)}) for i in range(count)]


def high_watermarks(bootstrap: str, topic: str) -> dict[int, int]:
    return {p: list_offset(bootstrap, topic, p, LATEST)[1] for p in range(PARTITIONS)}


def read_python(bootstrap: str, topic: str, count: int) -> dict[tuple[int, int], Record]:
    """Every record of `topic` as confluent-kafka (Python) reads it, assigned from the start."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"py-{topic}", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        got: dict[tuple[int, int], Record] = {}
        for message in _poll(consumer, count):
            headers = {k: (v or b"").decode() for k, v in message.headers() or []}
            got[(message.partition(), message.offset())] = (
                message.key().decode(),
                message.value().decode(),
                headers,
            )
        return got
    finally:
        consumer.close()


def _poll(consumer: Any, count: int) -> list[Any]:
    deadline = time.monotonic() + 30
    messages: list[Any] = []
    while len(messages) < count and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is None:
            continue
        assert message.error() is None, message.error()
        messages.append(message)
    assert len(messages) == count, f"read {len(messages)} of {count}"
    return messages


def produce_python(bootstrap: str, topic: str, records: list[Record]) -> dict[tuple[int, int], Record]:
    """Writes `records` with confluent-kafka (Python); (partition, offset) -> record."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    placed: dict[tuple[int, int], Record] = {}

    def report(err: Any, message: Any) -> None:
        assert err is None, err
        placed[(message.partition(), message.offset())] = by_key[message.key().decode()]

    by_key = {record[0]: record for record in records}  # a delivery report carries no headers

    for key, value, headers in records:
        producer.produce(topic, key=key, value=value, headers=list(headers.items()), on_delivery=report)
    assert producer.flush(30) == 0
    assert len(placed) == len(records)
    return placed


# --- sarama --------------------------------------------------------------------------------------


def test_sarama_idempotent_producer_and_consumer_group_continue_from_committed_offsets(
    go_programs: GoPrograms, broker: BrokerProcess
) -> None:
    topic, group, first, more = "sarama-orders", "sarama-group", 60, 21
    create_topic(broker.bootstrap, topic, PARTITIONS)

    produced = records_of(
        run(go_programs, "sarama", broker, "produce", "-topic", topic, "-count", str(first))
    )
    assert sorted(produced.values()) == sorted((k, v, {}) for k, v, _ in dataset("sarama", first))
    assert len({p for p, _ in produced}) == PARTITIONS, "the hash partitioner spreads the keys"
    for p in range(PARTITIONS):
        offsets = sorted(o for q, o in produced if q == p)
        assert offsets == list(range(len(offsets))), f"partition {p}: offsets {offsets}"
        dump = fetch_partition(broker.bootstrap, topic, p)
        assert [r.offset for r in dump.records] == offsets
        stored = {(p, r.offset): (r.key, r.value, r.headers) for r in dump.records}
        for (q, o), (key, value, _) in produced.items():
            if q == p:
                assert stored[(q, o)][:2] == (key.encode(), value.encode())
                assert list(stored[(q, o)][2]) == [("seq", key.rsplit("-", 1)[1].encode())]
        # the idempotent producer: one producer id, sequences that follow the offsets
        assert {b.producer_id for b in dump.batches} != {-1}
        assert len({b.producer_id for b in dump.batches}) == 1
        assert [b.base_sequence for b in dump.batches] == [b.base_offset for b in dump.batches]

    consumed = run(
        go_programs, "sarama", broker, "consume", "-topic", topic, "-group", group, "-count", str(first)
    )
    assert consumed[-1] == {"event": "closed", "consumed": first, "timed_out": False}, consumed[-3:]
    read = records_of(consumed)
    assert len([x for x in consumed if "key" in x]) == first, "each record once"
    assert read == {at: (k, v, {"seq": k.rsplit("-", 1)[1]}) for at, (k, v, _) in produced.items()}
    assert committed_offsets(broker.bootstrap, group, topic, PARTITIONS) == high_watermarks(
        broker.bootstrap, topic
    )

    # a new member of the group (a restart) reads only what was produced since
    again = records_of(
        run(go_programs, "sarama", broker, "produce", "-topic", topic, "-count", str(more), "-prefix", "more")
    )
    restarted = run(
        go_programs, "sarama", broker, "consume", "-topic", topic, "-group", group, "-count", str(more)
    )
    assert restarted[-1] == {"event": "closed", "consumed": more, "timed_out": False}, restarted[-3:]
    assert records_of(restarted) == {
        at: (k, v, {"seq": k.rsplit("-", 1)[1]}) for at, (k, v, _) in again.items()
    }
    assert committed_offsets(broker.bootstrap, group, topic, PARTITIONS) == high_watermarks(
        broker.bootstrap, topic
    )


def test_sarama_cluster_admin_creates_describes_and_deletes_a_topic(
    go_programs: GoPrograms, broker: BrokerProcess
) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    topic = "sarama-admin"
    created = run(go_programs, "sarama", broker, "create", "-topic", topic, "-partitions", "4")
    assert created[0] == {"op": "create", "error": None}
    assert created[1]["op"] == "create-again"
    assert "already exists" in created[1]["error"]

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(timeout=20)
    assert configs["retention.ms"].value == "3600000"

    assert run(go_programs, "sarama", broker, "describe", "-topic", topic) == [
        {"op": "describe", "error": None, "name": topic, "topic_error": 0, "partitions": [0, 1, 2, 3]}
    ]
    # DescribeConfigs v0 (sarama 1.22's only version) is refused as Kafka 4.0 refuses it: connection closed
    [described] = run(go_programs, "sarama", broker, "describe-config", "-topic", topic)
    assert described["error"] is not None
    assert described["configs"] == {}
    # logged as the connection closes, which the client may see first
    until(lambda: "api_key=32 api_version=0" in broker.full_log(), 30, "DescribeConfigs v0 refused")

    deleted = run(go_programs, "sarama", broker, "delete", "-topic", topic)
    assert deleted[0] == {"op": "delete", "error": None}
    assert deleted[1]["topic_error"] == 3, deleted  # UNKNOWN_TOPIC_OR_PARTITION
    assert topic not in admin.list_topics(timeout=20).topics


# --- kafka-go ------------------------------------------------------------------------------------


def test_kafka_go_lists_offsets_and_its_group_commits_persist(
    go_programs: GoPrograms, broker: BrokerProcess
) -> None:
    topic, group = "kafkago-offsets", "kafkago-group"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    placed = produce_python(broker.bootstrap, topic, [(f"k{i}", f"v{i}", {}) for i in range(40)])
    ends = high_watermarks(broker.bootstrap, topic)
    assert sum(ends.values()) == len(placed)

    listed = run(go_programs, "kafkago", broker, "offsets", "-topic", topic)
    assert listed == [{"partition": p, "leader": 0, "first": 0, "last": ends[p]} for p in range(PARTITIONS)]

    commits = {p: ends[p] - p for p in range(PARTITIONS)}
    spec = ",".join(f"{p}:{o}" for p, o in commits.items())
    assert run(
        go_programs, "kafkago", broker, "commit", "-topic", topic, "-group", group, "-offsets", spec
    ) == [{"op": "commit", "error": None}]
    assert committed_offsets(broker.bootstrap, group, topic, PARTITIONS) == commits
    broker.restart()
    assert committed_offsets(broker.bootstrap, group, topic, PARTITIONS) == commits
    assert run(go_programs, "kafkago", broker, "offsets", "-topic", topic) == listed


def test_kafka_go_produce_fetch_and_create_topics_versions_are_refused_as_in_kafka_4(
    go_programs: GoPrograms, broker: BrokerProcess
) -> None:
    topic = "kafkago-refused"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    placed = produce_python(broker.bootstrap, topic, [("k", "v", {})])
    before = high_watermarks(broker.bootstrap, topic)

    for scenario, request in [
        ("produce", "api_key=0 api_version=2"),
        ("fetch", "api_key=1 api_version=2"),
        ("create", "api_key=19 api_version=0"),
    ]:
        [line] = run(go_programs, "kafkago", broker, scenario, "-topic", topic, "-count", "3")
        assert line["op"] == scenario
        assert line["error"] is not None, line
        # the broker logs the refusal as it closes the connection, which the client may see first
        until(
            lambda r=request: r in broker.full_log(), 30, f"the broker naming the refused {scenario} request"
        )
    assert high_watermarks(broker.bootstrap, topic) == before, "nothing was written"
    assert read_python(broker.bootstrap, topic, 1) == placed

    assert run(go_programs, "kafkago", broker, "delete", "-topic", topic) == [{"op": "delete", "error": None}]
    from confluent_kafka.admin import AdminClient

    assert topic not in AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=20).topics


# --- across clients ------------------------------------------------------------------------------


@pytest.mark.parametrize("client", ["sarama", "confluent"])
def test_go_records_are_read_by_confluent_kafka_python(
    go_programs: GoPrograms, broker: BrokerProcess, client: str
) -> None:
    topic, count = f"from-go-{client}", 45
    create_topic(broker.bootstrap, topic, PARTITIONS)
    produced = records_of(run(go_programs, client, broker, "produce", "-topic", topic, "-count", str(count)))
    assert sorted(k for k, _, _ in produced.values()) == sorted(
        k for k, _, _ in dataset(client_prefix(client), count)
    )
    read = read_python(broker.bootstrap, topic, count)
    assert read == {at: (k, v, {"seq": k.rsplit("-", 1)[1]}) for at, (k, v, _) in produced.items()}


@pytest.mark.parametrize("client", ["sarama", "confluent"])
def test_python_records_are_read_by_go_group_consumers(
    go_programs: GoPrograms, broker: BrokerProcess, client: str
) -> None:
    topic, group = f"to-go-{client}", f"go-{client}"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    records = [(f"py-key-{i}", f"ключ ✓ {i}", {"seq": str(i), "from": "python"}) for i in range(30)]
    placed = produce_python(broker.bootstrap, topic, records)
    consumed = run(go_programs, client, broker, "consume", "-topic", topic, "-group", group, "-count", "30")
    assert consumed[-1] == {"event": "closed", "consumed": 30, "timed_out": False}, consumed[-3:]
    assert len([x for x in consumed if "key" in x]) == 30
    assert records_of(consumed) == placed
    assert committed_offsets(broker.bootstrap, group, topic, PARTITIONS) == high_watermarks(
        broker.bootstrap, topic
    )


def client_prefix(client: str) -> str:
    return {"sarama": "sarama", "confluent": "confluent-go"}[client]

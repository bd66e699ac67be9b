"""Clients following a three-broker cluster precisely: KIP-392 fetching from the closest replica, KIP-951
leader hints, and kafka-python, aiokafka and kcat producing and consuming across a leader kill.

One cluster for the module: brokers 1, 2, 3 in racks a, b, c, with Kafka's RackAwareReplicaSelector.
The failover test runs last (it kills a broker).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from exactly.client.connection import KafkaConnection
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from exactly.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from exactly.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from exactly.replication.replica_selector import RACK_AWARE_REPLICA_SELECTOR
from exactly.testing.cluster import ClusterProcesses
from exactly.testing.zookeeper import ZooKeeperProcess
from tests.interop import cluster_support as cs
from tests.storage.helpers import data_batch

pytestmark = pytest.mark.slow

RACKS = {1: "a", 2: "b", 3: "c"}


@pytest.fixture(scope="module")
def cluster(
    zookeeper_server: ZooKeeperProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterProcesses]:
    connect = f"{zookeeper_server.connect_string}/clients-{uuid.uuid4().hex[:8]}"
    with ClusterProcesses(
        tmp_path_factory.mktemp("cluster-clients"),
        connect,
        3,
        f"replica.selector.class={RACK_AWARE_REPLICA_SELECTOR}",
        racks=[RACKS[1], RACKS[2], RACKS[3]],
    ) as c:
        yield c


def _create(cluster: ClusterProcesses, name: str, assignment: list[int]) -> None:
    """A one-partition topic on `assignment` (its first broker leads), once every replica is in sync.
    Waits first for every broker to be registered: a test before may have restarted one a moment ago,
    and the controller refuses an assignment that names a broker it does not know yet."""
    cluster.wait_for_brokers(3)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.create_topics([NewTopic(name, 1, replica_assignment=[assignment])]).values():
        future.result(60)

    def ready() -> bool:
        partition = admin.list_topics(name, timeout=10).topics[name].partitions.get(0)
        return (
            partition is not None
            and partition.leader == assignment[0]
            and sorted(partition.isrs) == sorted(assignment)
        )

    cs.until(ready, 60, f"{name} led by {assignment[0]} with every replica in sync")


def _connect(cluster: ClusterProcesses, broker_id: int) -> KafkaConnection:
    return KafkaConnection.open("127.0.0.1", cluster.brokers[broker_id].port)


def _partition_metadata(cluster: ClusterProcesses, topic: str) -> tuple[uuid.UUID, int, int]:
    """(topic id, leader, leader epoch) of partition 0, by Metadata v12 to broker 2 (never restarted),
    once it knows a leader."""
    found: list[tuple[uuid.UUID, int, int]] = []

    def known() -> bool:
        with _connect(cluster, 2) as conn:
            response = conn.request(
                ApiKey.METADATA, 12, MetadataRequest([MetadataRequestTopic(name=topic)], False)
            )
        (answer,) = response.topics
        if len(answer.partitions) == 1 and answer.partitions[0].leader_id >= 0:
            found.append((answer.topic_id, answer.partitions[0].leader_id, answer.partitions[0].leader_epoch))
        return bool(found)

    cs.until(known, 30, f"a leader of {topic}-0")
    return found[0]


def _stats_of(stats: list[dict[str, Any]], topic: str) -> tuple[int, int, dict[int, int]]:
    """From librdkafka's last statistics: (the broker partition 0 is fetched from, its leader, bytes
    received from each broker id)."""
    last = stats[-1]
    partition = last["topics"][topic]["partitions"]["0"]
    received = {b["nodeid"]: b["rxbytes"] for b in last["brokers"].values() if b["nodeid"] >= 0}
    return partition["broker"], partition["leader"], received


# --- KIP-392 ---------------------------------------------------------------------------------------------


def test_a_consumer_reads_from_the_replica_in_its_rack(cluster: ClusterProcesses) -> None:
    topic = "near"
    _create(cluster, topic, [1, 2, 3])  # led by broker 1, rack a
    count, value = 500, b"x" * 1000
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(count):
        producer.produce(topic, value, key=str(i).encode())
    assert producer.flush(60) == 0

    stats: list[dict[str, Any]] = []
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": f"near-{uuid.uuid4().hex[:6]}",
            "client.rack": RACKS[2],
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "statistics.interval.ms": 200,
            "stats_cb": lambda raw: stats.append(json.loads(raw)),
        }
    )
    keys: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 60
        while len(keys) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                keys.append(message.key())
        seen = len(stats)
        cs.until(lambda: consumer.poll(0.1) is None and len(stats) > seen, 10, "fresh statistics")
    finally:
        consumer.close()
    assert keys == [str(i).encode() for i in range(count)]
    fetched_from, leader, received = _stats_of(stats, topic)
    assert (fetched_from, leader) == (2, 1)  # the leader sent the consumer to rack b's broker
    assert received[2] > count * len(value)  # and the records came from there
    assert received[1] < count * len(value) // 10


def test_a_consumer_without_a_rack_match_reads_from_the_leader(cluster: ClusterProcesses) -> None:
    topic = "near"  # written by the test above
    stats: list[dict[str, Any]] = []
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": f"far-{uuid.uuid4().hex[:6]}",
            "client.rack": "elsewhere",
            "enable.auto.commit": False,
            "statistics.interval.ms": 200,
            "stats_cb": lambda raw: stats.append(json.loads(raw)),
        }
    )
    got = 0
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 60
        while got < 500 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got += 1
        seen = len(stats)
        cs.until(lambda: consumer.poll(0.1) is None and len(stats) > seen, 10, "fresh statistics")
    finally:
        consumer.close()
    assert got == 500
    fetched_from, leader, _ = _stats_of(stats, topic)
    assert fetched_from == leader == 1


def test_a_follower_serves_a_consumer_fetch_up_to_its_high_watermark(cluster: ClusterProcesses) -> None:
    topic_id, leader, epoch = _partition_metadata(cluster, "near")
    assert leader == 1
    request = FetchRequest(
        max_wait_ms=0,
        min_bytes=0,
        topics=[FetchTopic(topic_id=topic_id, partitions=[FetchPartition(0, epoch, 0, -1, -1, 1 << 20)])],
        rack_id=RACKS[3],
    )
    with _connect(cluster, 3) as conn:  # broker 3 follows
        response = conn.request(ApiKey.FETCH, 16, request)
    (data,) = response.responses[0].partitions
    assert data.error_code == ErrorCode.NONE
    assert data.preferred_read_replica == -1  # only the leader chooses
    assert data.high_watermark == 500
    assert len(data.records) > 0
    old = FetchRequest(
        max_wait_ms=0,
        topics=[FetchTopic(topic="near", partitions=[FetchPartition(0, epoch, 0, -1, -1, 1 << 20)])],
    )
    with _connect(cluster, 3) as conn:  # before KIP-392 a consumer reads from the leader only
        response = conn.request(ApiKey.FETCH, 10, old)
    assert response.responses[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


# --- KIP-951 ---------------------------------------------------------------------------------------------


def _produce(conn: KafkaConnection, topic: str, partition: int = 0) -> Any:
    request = ProduceRequest(
        acks=-1,
        timeout_ms=10_000,
        topic_data=[TopicProduceData(topic, partition_data=[PartitionProduceData(partition, data_batch(1))])],
    )
    return conn.request(ApiKey.PRODUCE, 10, request)


def test_a_produce_to_a_follower_names_the_leader_and_its_endpoint(cluster: ClusterProcesses) -> None:
    _, leader, epoch = _partition_metadata(cluster, "near")
    with _connect(cluster, 2) as conn:
        response = _produce(conn, "near")
    (answer,) = response.responses[0].partition_responses
    assert answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (answer.current_leader.leader_id, answer.current_leader.leader_epoch) == (leader, epoch)
    assert [(n.node_id, n.host, n.port, n.rack) for n in response.node_endpoints] == [
        (1, "127.0.0.1", cluster.brokers[1].port, RACKS[1])
    ]


def test_a_broker_without_a_replica_answers_not_leader_with_hints(cluster: ClusterProcesses) -> None:
    topic = "lonely"
    _create(cluster, topic, [3])
    topic_id, leader, epoch = _partition_metadata(cluster, topic)
    assert leader == 3
    endpoint = [(3, "127.0.0.1", cluster.brokers[3].port, RACKS[3])]
    with _connect(cluster, 1) as conn:
        produced = _produce(conn, topic)
        fetched = conn.request(
            ApiKey.FETCH,
            16,
            FetchRequest(
                max_wait_ms=0,
                topics=[
                    FetchTopic(topic_id=topic_id, partitions=[FetchPartition(0, -1, 0, -1, -1, 1 << 20)])
                ],
            ),
        )
        missing = _produce(conn, topic, partition=7)
    (answer,) = produced.responses[0].partition_responses
    assert answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (answer.current_leader.leader_id, answer.current_leader.leader_epoch) == (3, epoch)
    assert [(n.node_id, n.host, n.port, n.rack) for n in produced.node_endpoints] == endpoint
    (data,) = fetched.responses[0].partitions
    assert data.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert data.current_leader is not None
    assert (data.current_leader.leader_id, data.current_leader.leader_epoch) == (3, epoch)
    assert [(n.node_id, n.host, n.port, n.rack) for n in fetched.node_endpoints] == endpoint
    (unknown,) = missing.responses[0].partition_responses
    assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # the cluster has no such partition
    assert missing.node_endpoints == []


# --- other clients across a leader kill ------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (.ci/run installs it)")
def test_clients_produce_and_consume_across_a_leader_kill(cluster: ClusterProcesses) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as AioTopicPartition
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KafkaTopicPartition

    topic = "failover"
    _create(cluster, topic, [1, 2, 3])
    half = 50
    names = ("kp", "aio", "kcat")
    expected = {f"{name}-{i}".encode() for name in names for i in range(2 * half)}
    first = {f"{name}-{i}".encode() for name in names for i in range(half)}
    kcat_base = [
        "kcat",
        "-b",
        cluster.bootstrap,
        "-t",
        topic,
        "-X",
        "topic.metadata.refresh.interval.ms=1000",
    ]
    kcat_consumer = subprocess.Popen(
        [*kcat_base, "-C", "-p", "0", "-o", "beginning", "-c", str(len(expected)), "-q"],
        stdout=subprocess.PIPE,
    )
    kcat_producer = [*kcat_base, "-P", "-p", "0", "-X", "enable.idempotence=true"]  # one per half

    async def run() -> None:
        kp = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", enable_idempotence=True)
        kc = KafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False)
        kc.assign([KafkaTopicPartition(topic, 0)])
        kc.seek_to_beginning()
        ap = AIOKafkaProducer(
            bootstrap_servers=cluster.bootstrap,
            acks="all",
            enable_idempotence=True,
            request_timeout_ms=60_000,
        )
        ac = AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False)
        await ap.start()
        await ac.start()
        ac.assign([AioTopicPartition(topic, 0)])
        await ac.seek_to_beginning()
        seen_kp: set[bytes] = set()
        seen_aio: set[bytes] = set()

        async def consume_until(want: set[bytes], seconds: float) -> None:
            deadline = time.monotonic() + seconds
            while not (want <= seen_kp and want <= seen_aio) and time.monotonic() < deadline:
                for records in kc.poll(timeout_ms=200).values():
                    seen_kp.update(r.value for r in records)
                for records in (await ac.getmany(timeout_ms=200)).values():
                    seen_aio.update(r.value for r in records)
            assert want - seen_kp == set(), "kafka-python's consumer missed records"
            assert want - seen_aio == set(), "aiokafka's consumer missed records"

        async def produce(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                kp.send(topic, f"kp-{i}".encode(), partition=0)
            await asyncio.to_thread(kp.flush, 60)
            await asyncio.gather(
                *[ap.send_and_wait(topic, f"aio-{i}".encode(), partition=0) for i in range(lo, hi)]
            )
            lines = b"".join(f"kcat-{i}\n".encode() for i in range(lo, hi))  # kcat reads stdin to its end
            done = await asyncio.to_thread(
                subprocess.run, kcat_producer, input=lines, capture_output=True, timeout=90
            )
            assert done.returncode == 0, done.stderr.decode(errors="replace")

        try:
            await produce(0, half)
            await consume_until(first, 60)
            cluster.brokers[1].kill()  # the leader, SIGKILL
            await produce(half, 2 * half)
            await consume_until(expected, 90)
        finally:
            kp.close()
            kc.close()
            await ap.stop()
            await ac.stop()

    try:
        asyncio.run(run())
        out, _ = kcat_consumer.communicate(timeout=90)
        assert kcat_consumer.returncode == 0
        assert set(out.splitlines()) == expected
    finally:
        if kcat_consumer.poll() is None:
            kcat_consumer.kill()
            kcat_consumer.wait()
        cluster.brokers[1].start()
        cluster.wait_for_brokers(3)
    metadata = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(topic, timeout=10)
    assert metadata.topics[topic].partitions[0].leader in (2, 3)  # someone else took over


def test_a_fetch_with_a_fenced_epoch_names_the_leader(cluster: ClusterProcesses) -> None:
    """After the failover above, `failover` is in a later leader epoch than its first."""
    topic_id, leader, epoch = _partition_metadata(cluster, "failover")
    request = FetchRequest(
        max_wait_ms=0,
        topics=[FetchTopic(topic_id=topic_id, partitions=[FetchPartition(0, epoch - 1, 0, -1, -1, 1 << 20)])],
    )
    with _connect(cluster, leader) as conn:
        response = conn.request(ApiKey.FETCH, 16, request)
    assert epoch > 0
    (data,) = response.responses[0].partitions
    assert data.error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert (data.current_leader.leader_id, data.current_leader.leader_epoch) == (leader, epoch)
    endpoint = (leader, "127.0.0.1", cluster.brokers[leader].port, RACKS[leader])
    assert [(n.node_id, n.host, n.port, n.rack) for n in response.node_endpoints] == [endpoint]


def test_the_spark_sources_offset_lookups_follow_a_killed_leader(cluster: ClusterProcesses) -> None:
    """The Spark source's driver asks ListOffsets while the partition's leader was just killed: it asks
    again (each attempt bounded) until the new leader answers, rather than reporting an unreachable
    broker (the dead leader's refused connection) or waiting out one request to it."""
    from exactly.spark.admin import SourceAdmin
    from exactly.spark.offsets import TopicPartition as SourcePartition
    from exactly.spark.options import parse_reader_options

    topic = "spark-offsets"
    _create(cluster, topic, [3, 1, 2])
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(10):
        producer.produce(topic, f"r{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    options = {"kafka.bootstrap.servers": cs.bootstrap(cluster, via=[1, 2]), "subscribe": topic}
    admin = SourceAdmin(parse_reader_options(options))
    tp = SourcePartition(topic, 0)
    assert admin.latest([tp]) == {tp: 10}
    cluster.brokers[3].kill()
    try:
        assert admin.latest([tp]) == {tp: 10}
        assert admin.earliest([tp]) == {tp: 0}
        assert cs.partitions(cluster, topic, via=[1, 2])[0][0] in (1, 2)
    finally:
        cluster.brokers[3].start()
        cluster.wait_for_brokers(3)

"""Share groups in a cluster (KIP-932, issue 24 part 2): a share partition's state is stored by the share
coordinator of its key — the leader of its `__share_group_state` partition — which is another broker than
the data partition's leader here (the group is chosen so), reached through the share coordinator RPCs.

A librdkafka share consumer (explicit acknowledgements) reads a topic of one partition, replication
factor 3, on three brokers. It accepts records as it goes and holds some unacknowledged; then the data
partition's leader is killed with SIGKILL, later (after it came back) the state partition's leader. At
the end every record was delivered and acknowledged, no record was delivered again after an
acknowledgement the broker confirmed, and the records held at the first kill came back with their
delivery count raised (the new leader read the stored window, in which they were in flight).

FindCoordinator with key type SHARE (v6) names the state partition's leader; the RPCs are cluster
actions, answered NOT_COORDINATOR by a broker that does not lead the key's state partition.

Transactional share acknowledgements (docs/share-transactional-acks.md) need the data partition and its
state partition led by one broker: across two, AddShareAcksToTxn answers NOT_COORDINATOR with a message,
before the transaction is touched.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from exactly.client.connection import KafkaConnection
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.add_share_acks_to_txn import (
    AcknowledgementBatch,
    AcknowledgePartition,
    AcknowledgeTopic,
    AddShareAcksToTxnRequest,
)
from exactly.protocol.messages.find_coordinator import FindCoordinatorRequest
from exactly.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from exactly.protocol.messages.read_share_group_state import (
    PartitionData,
    ReadShareGroupStateRequest,
    ReadStateData,
)
from exactly.testing.cluster import ClusterProcesses
from exactly.testing.zookeeper import ZooKeeperProcess
from tests.interop import cluster_support as cs

pytestmark = [pytest.mark.slow, pytest.mark.interop]

TOPIC = "queue"
RECORDS = 400
SETTINGS = (
    "group.share.enable=true",
    "share.auto.offset.reset=earliest",
    "group.share.record.lock.duration.ms=15000",
    "share.coordinator.state.topic.num.partitions=3",
    "share.coordinator.snapshot.update.records.per.snapshot=4",  # updates and snapshots both
    "offsets.topic.num.partitions=3",
    "transaction.state.log.num.partitions=1",
    "share.transactional.ack.enable=true",
)


@pytest.fixture(scope="module")
def cluster(
    zookeeper_server: ZooKeeperProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterProcesses]:
    connect = f"{zookeeper_server.connect_string}/shares-{uuid.uuid4().hex[:8]}"
    with ClusterProcesses(tmp_path_factory.mktemp("cluster"), connect, 3, *SETTINGS) as c:
        c.start()
        yield c


def _connection(cluster: ClusterProcesses, broker: int) -> KafkaConnection:
    host, port = cluster.brokers[broker].bootstrap.rsplit(":", 1)
    return KafkaConnection.open(host, int(port), timeout=10)


def _topic_id(cluster: ClusterProcesses, broker: int) -> uuid.UUID:
    with _connection(cluster, broker) as conn:
        answer = conn.request(ApiKey.METADATA, 12, MetadataRequest([MetadataRequestTopic(name=TOPIC)]))
    return answer.topics[0].topic_id


def _share_key(group: str, topic_id: uuid.UUID) -> str:
    printed = base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()
    return f"{group}:{printed}:0"


def _share_coordinator(cluster: ClusterProcesses, broker: int, key: str) -> tuple[int, int]:
    """FindCoordinator v6, key type SHARE, asked of `broker`: (error code, node id)."""
    with _connection(cluster, broker) as conn:
        answer = conn.request(
            ApiKey.FIND_COORDINATOR, 6, FindCoordinatorRequest(key_type=2, coordinator_keys=[key])
        )
    found = answer.coordinators[0]
    return found.error_code, found.node_id


def _live(cluster: ClusterProcesses) -> list[int]:
    return [b for b, p in cluster.brokers.items() if p.running]


def _leader(cluster: ClusterProcesses, topic: str, partition: int) -> int:
    found = cs.view(cluster, topic, _live(cluster))
    return found[partition][0] if partition in found else -1


@dataclass
class Ledger:
    """What the consumer saw: every delivery (value, delivery count) in order, and when each
    acknowledgement was confirmed (its position in the deliveries)."""

    deliveries: list[tuple[str, int]] = field(default_factory=list)
    acked_at: dict[str, int] = field(default_factory=dict)

    def redelivered_after_ack(self) -> list[str]:
        return [v for i, (v, _) in enumerate(self.deliveries) if v in self.acked_at and self.acked_at[v] <= i]


def _consumer(cluster: ClusterProcesses, group: str) -> Any:
    consumer = ShareConsumer(
        {
            "bootstrap.servers": cs.bootstrap(cluster),
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
            "log_level": 3,
        }
    )
    consumer.subscribe([TOPIC])
    return consumer


def _produce(cluster: ClusterProcesses, numbers: range) -> None:
    producer = Producer({"bootstrap.servers": cs.bootstrap(cluster), "acks": "all", "linger.ms": 5})
    for i in numbers:
        producer.produce(TOPIC, f"r{i}".encode(), partition=0)
    assert producer.flush(30) == 0


def _consume(consumer: Any, ledger: Ledger, *, until: int, seconds: float = 40) -> None:
    """Poll, accept every record, commit, until `until` records are acknowledged. Acknowledgements whose
    commit failed are not counted (they may come back)."""
    deadline = time.monotonic() + seconds
    while len(ledger.acked_at) < until:
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(ledger.acked_at)} of {until} acknowledged after {seconds:.0f} s")
        messages = [m for m in consumer.poll(0.5) if m.error() is None]
        for m in messages:
            ledger.deliveries.append((m.value().decode(), m.delivery_count()))
            consumer.acknowledge(m, AcknowledgeType.ACCEPT)
        if not messages:
            continue
        try:
            results = consumer.commit_sync(30)
        except KafkaException:  # the leader went away mid-commit: not confirmed
            continue
        if results and all(error is None for error in results.values()):
            for m in messages:
                ledger.acked_at.setdefault(m.value().decode(), len(ledger.deliveries))


def test_share_group_survives_the_data_leader_and_the_state_leader(cluster: ClusterProcesses) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, 1, 3)]).values():
        future.result(60)
    cs.until(lambda: len(cs.partitions(cluster, TOPIC)[0][2]) == 3, 30, "the topic's ISR")
    _produce(cluster, range(100))

    data_leader = _leader(cluster, TOPIC, 0)
    topic_id = _topic_id(cluster, data_leader)
    # a group whose state partition another broker leads (FindCoordinator SHARE creates the topic)
    cs.until(
        lambda: _share_coordinator(cluster, data_leader, _share_key("probe", topic_id))[1] >= 0,
        30,
        "the share state topic",
    )
    group = next(
        g
        for g in (f"queue-{i}" for i in range(100))
        if _share_coordinator(cluster, data_leader, _share_key(g, topic_id))[1] not in (-1, data_leader)
    )
    key = _share_key(group, topic_id)
    code, state_leader = _share_coordinator(cluster, data_leader, key)
    assert code == 0
    assert state_leader != data_leader

    # the RPC itself: NOT_COORDINATOR from a broker that does not lead the key's state partition
    with _connection(cluster, data_leader) as conn:
        answer = conn.request(
            ApiKey.READ_SHARE_GROUP_STATE,
            0,
            ReadShareGroupStateRequest(group, [ReadStateData(topic_id, [PartitionData(0, 0)])]),
        )
    assert answer.results[0].partitions[0].error_code == ErrorCode.NOT_COORDINATOR

    consumer = _consumer(cluster, group)
    holder = _consumer(cluster, group)
    ledger = Ledger()
    try:
        _consume(consumer, ledger, until=100)
        # a second member acquires the next records and never acknowledges them
        _produce(cluster, range(100, 120))
        held: set[str] = set()

        def holder_got_some() -> bool:
            held.update(m.value().decode() for m in holder.poll(0.5) if m.error() is None)
            return bool(held)

        cs.until(holder_got_some, 20, "a delivery to the holder")
        _produce(cluster, range(120, 160))
        _consume(consumer, ledger, until=140)  # its commits store the window, the held records in flight
        assert not held & set(ledger.acked_at), "the holder's locks have not expired"

        # 1. the data partition's leader dies; its successor reads the window from the state leader
        cluster.brokers[data_leader].kill()
        holder.close()
        cs.until(lambda: _leader(cluster, TOPIC, 0) not in (-1, data_leader), 40, "a new data leader")
        seen = len(ledger.deliveries)
        _produce(cluster, range(160, 280))
        _consume(consumer, ledger, until=280, seconds=60)
        again = [(v, n) for v, n in ledger.deliveries[seen:] if v in held]
        assert {v for v, _ in again} == held, "the held records came back"
        assert all(n >= 2 for _, n in again), f"delivery counts kept across the failover: {again}"

        # 2. the first broker comes back (min.insync.replicas=2 needs it), then the state leader dies
        cluster.brokers[data_leader].start()

        def all_in_sync() -> bool:
            views = [cs.view(cluster, t, _live(cluster)) for t in (TOPIC, "__share_group_state")]
            return all(v and all(len(isr) == 3 for _, _, isr in v.values()) for v in views)

        cs.until(all_in_sync, 60, "the restarted broker back in every ISR")
        _, state_leader = _share_coordinator(cluster, _live(cluster)[0], key)
        cluster.brokers[state_leader].kill()
        cs.until(
            lambda: _share_coordinator(cluster, _live(cluster)[0], key)[1] not in (-1, state_leader),
            40,
            "a new share coordinator",
            retry_on=(LookupError, OSError),
        )
        _produce(cluster, range(280, RECORDS))
        _consume(consumer, ledger, until=RECORDS, seconds=60)
    finally:
        consumer.close()
        holder.close()
        for broker in cluster.brokers.values():
            if not broker.running:
                broker.start()

    assert set(ledger.acked_at) == {f"r{i}" for i in range(RECORDS)}
    assert ledger.redelivered_after_ack() == []


def test_transactional_acks_across_two_brokers_answer_not_coordinator(cluster: ClusterProcesses) -> None:
    topic = "acks-apart"
    cluster.wait_for_brokers(3)  # the test before restarts the brokers it killed: all three back first
    admin = AdminClient({"bootstrap.servers": cs.bootstrap(cluster)})
    for future in admin.create_topics([NewTopic(topic, 1, 3)]).values():
        future.result(60)
    cs.until(lambda: _leader(cluster, topic, 0) >= 0, 30, "the topic's leader")
    data_leader = _leader(cluster, topic, 0)
    with _connection(cluster, data_leader) as conn:
        answer = conn.request(ApiKey.METADATA, 12, MetadataRequest([MetadataRequestTopic(name=topic)]))
    topic_id = answer.topics[0].topic_id

    def apart(group: str) -> bool:
        return _share_coordinator(cluster, data_leader, _share_key(group, topic_id))[1] not in (
            -1,
            data_leader,
        )

    cs.until(lambda: _share_coordinator(cluster, data_leader, _share_key("p", topic_id))[1] >= 0, 30, "state")
    group = next(g for g in (f"apart-{i}" for i in range(100)) if apart(g))
    request = AddShareAcksToTxnRequest(
        transactional_id="worker",
        producer_id=1,
        producer_epoch=0,
        group_id=group,
        member_id="m",
        topics=[AcknowledgeTopic(topic_id, [AcknowledgePartition(0, [AcknowledgementBatch(0, 0, [1])])])],
    )
    with _connection(cluster, data_leader) as conn:
        answer = conn.request(ApiKey.ADD_SHARE_ACKS_TO_TXN, 0, request)
    assert answer.error_code == ErrorCode.NONE
    result = answer.responses[0].partitions[0]
    assert result.error_code == ErrorCode.NOT_COORDINATOR
    assert "led by another broker" in (result.error_message or "")

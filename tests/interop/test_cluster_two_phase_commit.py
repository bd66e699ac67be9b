"""exactly's two-phase commit extension (the Spark sink's) on a three-broker cluster: `TwoPhaseClient`
given a bootstrap of one broker that coordinates nothing of the query finds the coordinator
(FindCoordinator); the batch's transactions, placed in the query id's `__transaction_state` partition by
their ids (`exactly.txn.placement.placement_key`), are decided there and visible exactly once; after
that coordinator is killed -9, the same client (its coordinator forgotten on the lost connection /
NOT_COORDINATOR) decides the next batch at the new leader, and a repeated decision of the first batch
answers AlreadyDecided with its winners.

One cluster for the module; the killed broker is restarted before the end.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from exactly.client.twopc import TwoPhaseClient
from exactly.group.partitioning import partition_for
from exactly.testing.cluster import ClusterProcesses
from exactly.testing.zookeeper import ZooKeeperProcess
from tests.interop import cluster_support as cs

pytestmark = pytest.mark.slow

TXN_TOPIC = "__transaction_state"
TOPIC = "prepared"


@pytest.fixture(scope="module")
def cluster(
    zookeeper_server: ZooKeeperProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterProcesses]:
    connect = f"{zookeeper_server.connect_string}/cluster-2pc-{uuid.uuid4().hex[:8]}"
    with ClusterProcesses(tmp_path_factory.mktemp("cluster-2pc"), connect, 3, session_timeout_ms=6000) as c:
        yield c


def _coordinator(cluster: ClusterProcesses, key: str) -> int:
    partitions = cs.partitions(cluster, TXN_TOPIC)
    return partitions[partition_for(key, len(partitions))][0]


def _prepared(cluster: ClusterProcesses, client: TwoPhaseClient, query: str, batch: int, rows: int) -> str:
    """One task's transaction of (query, batch): `rows` records over three partitions, prepared."""
    tid = f"exactly-spark.{query}.{batch}.0.{uuid.uuid4().hex}"  # placed in the query's partition
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": tid})
    producer.init_transactions(60)
    producer.begin_transaction()
    for n in range(rows):
        producer.produce(TOPIC, f"{query[:6]}-{batch}-{n}".encode(), partition=n % 3)
    assert producer.flush(60) == 0
    client.prepare(tid, query, batch, 0)
    return tid


def test_a_batch_is_decided_by_its_querys_coordinator_across_a_failover(cluster: ClusterProcesses) -> None:
    admin = cs.admin(cluster)
    for future in admin.create_topics([NewTopic(TOPIC, 3, 3)]).values():
        future.result(60)
    # the first transactional id creates __transaction_state
    Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "warm-up"}).init_transactions(60)
    cs.until(
        lambda: (
            len(cs.view(cluster, TXN_TOPIC)) == 50
            and all(leader >= 0 for leader, _, _ in cs.view(cluster, TXN_TOPIC).values())
        ),
        60,
        "__transaction_state created and led",
    )
    # a query whose coordinator is not broker 1, asked through broker 1 alone
    query = next(
        q for q in (str(uuid.uuid4()) for _ in range(1000)) if _coordinator(cluster, q) not in (1, -1)
    )
    victim = _coordinator(cluster, query)
    client = TwoPhaseClient(cluster.brokers[1].bootstrap, timeout=90)
    try:
        first = [_prepared(cluster, client, query, 0, 5), _prepared(cluster, client, query, 0, 4)]
        loser = _prepared(cluster, client, query, 0, 3)  # a failed attempt: aborted by the decision
        decision = client.commit_batch(query, 0, first)
        assert (set(decision.winners), decision.already_decided) == (set(first), False)

        cluster.brokers[victim].kill()
        cs.until(
            lambda: _coordinator(cluster, query) not in (victim, -1),
            60,
            "a new coordinator of the query",
            retry_on=(Exception,),
        )
        second = [_prepared(cluster, client, query, 1, 6)]
        assert client.commit_batch(query, 1, second).winners == tuple(second)
        again = client.commit_batch(query, 0, first)  # a driver replaying its decision after a restart
        assert (set(again.winners), again.already_decided) == (set(first), True)
    finally:
        client.close()
    cluster.brokers[victim].start()
    cluster.wait_for_brokers(3)
    values = sorted(v.decode() for v in cs.read_committed(cluster, TOPIC))
    prefix = query[:6]
    expected = [f"{prefix}-0-{n}" for n in range(5)] + [f"{prefix}-0-{n}" for n in range(4)]
    expected += [f"{prefix}-1-{n}" for n in range(6)]
    assert values == sorted(expected)
    assert loser not in decision.winners

"""The two-phase commit extension on a three-broker cluster (docs/two-phase-commit.md): Spark-like tasks
(confluent-kafka transactional producers with the sink's `exactly-spark.<query>...` ids, prepared through
`exactly.client.twopc`) write to a replicated topic; the broker that coordinates the query — the leader
of the query's `__transaction_state` partition, where its tasks' ids live too — is killed with SIGKILL.

* A decision recorded before the kill (the coordinator parks right after writing it, before any
  transition) is carried out by the new coordinator: the winners become visible, the loser never does,
  and the driver's retried CommitBatch answers the same winners, already decided.
* Prepared transactions survive the kill: the new coordinator lists them (`exactly txn list-prepared`
  over the cluster), and aborting the batch afterwards frees the partitions.

Every broker runs with `exactly.debug.end.txn.pause=decision-written`: only the broker that records a
decision parks; a new coordinator carries out a loaded decision without recording it again.
One cluster for the module; each test restarts the broker it killed.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from exactly.client.twopc import BatchDecision, TwoPhaseClient, TwoPhaseCommitError
from exactly.group.partitioning import partition_for
from exactly.testing.cluster import ClusterProcesses
from exactly.testing.processes import child_env
from exactly.testing.zookeeper import ZooKeeperProcess
from tests.interop import cluster_support as cs

pytestmark = pytest.mark.slow

TOPIC = "out"
TXN_TOPIC = "__transaction_state"
PAUSE = "exactly.debug.end.txn.pause=decision-written"


@pytest.fixture(scope="module")
def cluster(
    zookeeper_server: ZooKeeperProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterProcesses]:
    connect = f"{zookeeper_server.connect_string}/two-phase-{uuid.uuid4().hex[:8]}"
    with ClusterProcesses(tmp_path_factory.mktemp("cluster"), connect, 3, PAUSE) as c:
        admin = cs.admin(c)
        for future in admin.create_topics([NewTopic(TOPIC, 2, 3)]).values():
            future.result(60)
        yield c


def task(cluster: ClusterProcesses, query: str, batch: int, partition: int, tag: str) -> str:
    """A Spark task attempt: produce three records to TOPIC-`partition`, flush, prepare, drop the producer."""
    tid = f"exactly-spark.{query}.{batch}.{partition}.{uuid.uuid4().hex}"
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": tid, "linger.ms": 0})
    producer.init_transactions(60)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(TOPIC, value=f"{tag}-{i}".encode(), partition=partition)
    assert producer.flush(60) == 0
    with TwoPhaseClient(cluster.bootstrap, timeout=60) as client:
        client.prepare(tid, query, batch, partition)
    del producer
    return tid


def coordinator(cluster: ClusterProcesses, query: str) -> int:
    """The leader of the query's `__transaction_state` partition."""
    found = cs.partitions(cluster, TXN_TOPIC)
    return found[partition_for(query, len(found))][0]


def restart(cluster: ClusterProcesses, broker: int) -> None:
    cluster.brokers[broker].start()
    cluster.wait_for_brokers(3)
    for topic in (TOPIC, TXN_TOPIC):
        cs.until(
            lambda topic=topic: all(len(isr) == 3 for _, _, isr in cs.partitions(cluster, topic).values()),
            90,
            f"every replica of {topic} back in sync",
        )


def values(tag: str) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(3)]


def test_a_decision_recorded_before_the_kill_is_carried_out_by_the_new_coordinator(
    cluster: ClusterProcesses,
) -> None:
    query = uuid.uuid4().hex
    w0 = task(cluster, query, 4, 0, "w0")
    w1 = task(cluster, query, 4, 1, "w1")
    loser = task(cluster, query, 4, 0, "loser")
    victim = coordinator(cluster, query)
    broker = cluster.brokers[victim]
    since = len(broker.full_log())
    outcome: list[BatchDecision | TwoPhaseCommitError] = []

    def drive() -> None:
        try:
            with TwoPhaseClient(cluster.bootstrap, timeout=90) as client:
                outcome.append(client.commit_batch(query, 4, [w0, w1]))
        except TwoPhaseCommitError as e:
            outcome.append(e)

    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    cs.until(lambda: "parked" in broker.full_log()[since:], 60, f"broker {victim} to park after the decision")
    broker.kill()
    driver.join(120)
    assert len(outcome) == 1
    decided = outcome[0]
    assert isinstance(decided, BatchDecision), decided
    assert (decided.winners, decided.already_decided) == ((w0, w1), True)  # answered by the new coordinator
    assert coordinator(cluster, query) != victim
    assert sorted(cs.read_committed(cluster, TOPIC)) == sorted(values("w0") + values("w1"))
    with TwoPhaseClient(cluster.bootstrap, timeout=60) as client:
        again = client.commit_batch(query, 4, [loser])  # a replayed driver
        assert (again.winners, again.already_decided) == ((w0, w1), True)
        assert client.list_prepared(query)[0] == []
    restart(cluster, victim)


def test_prepared_transactions_survive_the_loss_of_their_coordinator(cluster: ClusterProcesses) -> None:
    query = uuid.uuid4().hex
    before = set(cs.read_committed(cluster, TOPIC))
    tids = {task(cluster, query, 7, p, f"prepared-{p}") for p in (0, 1)}
    victim = coordinator(cluster, query)
    cluster.brokers[victim].kill()
    cs.until(lambda: coordinator(cluster, query) not in (victim, -1), 60, "a new coordinator for the query")
    listed = subprocess.run(
        [
            sys.executable,
            "-m",
            "exactly",
            "txn",
            "list-prepared",
            "--bootstrap-server",
            cs.bootstrap(cluster),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=child_env(),
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    for tid in tids:
        assert tid in listed.stdout, listed.stdout
    with TwoPhaseClient(cluster.bootstrap, timeout=60) as client:
        prepared, _ = client.list_prepared(query)
        assert {t.transactional_id for t in prepared} == tids
        assert {(t.batch_id, t.partitions) for t in prepared} == {(7, ((TOPIC, 0),)), (7, ((TOPIC, 1),))}
        assert client.abort_batch(query, 7) is None  # undecided: its prepared work is aborted
        assert client.list_prepared(query)[0] == []
    # read_committed reaches the high watermarks only once the aborts' markers are written everywhere
    assert set(cs.read_committed(cluster, TOPIC)) == before
    restart(cluster, victim)

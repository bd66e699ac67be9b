"""Transactions across a three-broker cluster, driven by confluent-kafka: the transaction coordinator of a
transactional id (the leader of its `__transaction_state` partition) writes COMMIT/ABORT markers to
partitions led by every broker (WriteTxnMarkers to the others), a read_committed consumer sees exactly
the committed records, and the coordinator's broker killed with SIGKILL — between transactions, in the
middle of a stream of commits, and after a PrepareCommit whose markers it never wrote — leaves every
committed transaction visible exactly once and no aborted record visible; the new coordinator finishes
the commit the old one decided.

One cluster for the module (the tests run in file order and leave it whole: a killed broker is restarted).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    ElectionType,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from exactly.client.txn import TransactionalProducer
from exactly.errors import ErrorCode
from exactly.group.partitioning import partition_for
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.find_coordinator import FindCoordinatorRequest
from exactly.testing.cluster import ClusterProcesses
from exactly.testing.zookeeper import ZooKeeperProcess
from tests.interop import cluster_support as cs
from tests.interop.txn_support import RawTxn

pytestmark = pytest.mark.slow

TXN_TOPIC = "__transaction_state"
PAUSE = "exactly.debug.end.txn.pause=prepare-written"


@pytest.fixture(scope="module")
def cluster(
    zookeeper_server: ZooKeeperProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterProcesses]:
    connect = f"{zookeeper_server.connect_string}/cluster-txn-{uuid.uuid4().hex[:8]}"
    with ClusterProcesses(tmp_path_factory.mktemp("cluster-txn"), connect, 3, session_timeout_ms=6000) as c:
        yield c


def _create(cluster: ClusterProcesses, name: str, partitions: int) -> None:
    admin = cs.admin(cluster)
    for future in admin.create_topics([NewTopic(name, partitions, 3)]).values():
        future.result(60)
    cs.until(
        lambda: (
            len(cs.partitions(cluster, name)) == partitions
            and all(leader >= 0 and len(isr) == 3 for leader, _, isr in cs.partitions(cluster, name).values())
        ),
        60,
        f"{name} led and in sync",
    )


def _producer(cluster: ClusterProcesses, txn_id: str) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "transactional.id": txn_id,
            "transaction.timeout.ms": 60000,
            "message.timeout.ms": 60000,
            "socket.connection.setup.timeout.ms": 3000,
            "reconnect.backoff.max.ms": 1000,
        }
    )
    producer.init_transactions(60)
    return producer


def _coordinated_by(cluster: ClusterProcesses, broker: int | None = None, preferred: bool = False) -> str:
    """A fresh transactional id whose `__transaction_state` partition `broker` leads (or, `preferred`,
    whose preferred replica it is; None: any broker)."""
    partitions = cs.partitions(cluster, TXN_TOPIC)
    for n in itertools.count():
        txn_id = f"txn-{uuid.uuid4().hex[:6]}-{n}"
        leader, replicas, _ = partitions[partition_for(txn_id, len(partitions))]
        owner = replicas[0] if preferred else leader
        if broker is None or owner == broker:
            return txn_id
    raise AssertionError("unreachable")


def _coordinator(cluster: ClusterProcesses, txn_id: str) -> int:
    partitions = cs.partitions(cluster, TXN_TOPIC)
    return partitions[partition_for(txn_id, len(partitions))][0]


def _transaction(producer: Producer, topic: str, partitions: int, tag: str) -> list[bytes]:
    values = [f"{tag}-{p}".encode() for p in range(partitions)]
    producer.begin_transaction()
    for p, value in enumerate(values):
        producer.produce(topic, value, partition=p)
    return values


def _wait_in_sync(cluster: ClusterProcesses, topic: str) -> None:
    cs.until(
        lambda: all(
            len(isr) == 3 and leader >= 0 for leader, _, isr in cs.partitions(cluster, topic).values()
        ),
        90,
        f"every replica of {topic} back in sync",
    )


def test_commit_and_abort_span_partitions_led_by_every_broker(cluster: ClusterProcesses) -> None:
    _create(cluster, "span", 6)
    warmup = _producer(cluster, f"warmup-{uuid.uuid4().hex[:6]}")  # creates __transaction_state
    _wait_in_sync(cluster, TXN_TOPIC)
    assert {leader for leader, _, _ in cs.partitions(cluster, "span").values()} == {1, 2, 3}
    committed: list[bytes] = []
    for coordinator in (1, 2, 3):
        txn_id = _coordinated_by(cluster, coordinator)
        producer = _producer(cluster, txn_id)
        committed += _transaction(producer, "span", 6, f"{txn_id}-c1")
        producer.commit_transaction(30)
        _transaction(producer, "span", 6, f"{txn_id}-aborted")
        producer.flush(30)
        producer.abort_transaction(30)
        committed += _transaction(producer, "span", 6, f"{txn_id}-c2")
        producer.commit_transaction(30)
    del warmup
    assert sorted(cs.read_committed(cluster, "span")) == sorted(committed)


def test_kip890_verification_asks_a_coordinator_on_another_broker(cluster: ClusterProcesses) -> None:
    """A partition leader verifies a producer's first transactional batch with the transaction's
    coordinator on another broker (AddPartitionsToTxn v4, VerifyOnly): a batch to a partition not added
    to the transaction is refused, one to an added partition is written, and so are its next batches."""
    _create(cluster, "verified", 3)
    txn_id = _coordinated_by(cluster)
    coordinator = _coordinator(cluster, txn_id)
    view = cs.partitions(cluster, "verified")
    partition = next(p for p, (leader, _, _) in sorted(view.items()) if leader != coordinator)
    leader = view[partition][0]
    with (
        RawTxn(cluster.brokers[coordinator].bootstrap) as coord,
        RawTxn(cluster.brokers[leader].bootstrap) as lead,
    ):
        pid, epoch = _init(coord, txn_id)
        assert (
            lead.produce(txn_id, pid, epoch, "verified", partition, b"not-added")
            == ErrorCode.INVALID_TXN_STATE
        )
        assert coord.add(txn_id, pid, epoch, {"verified": [partition]}) == {("verified", partition): 0}
        assert (
            lead.produce(txn_id, pid, epoch - 1, "verified", partition, b"old")
            == ErrorCode.INVALID_PRODUCER_EPOCH
        )
        assert lead.produce(txn_id, pid, epoch, "verified", partition, b"added") == ErrorCode.NONE
        assert lead.produce(txn_id, pid, epoch, "verified", partition, b"more", sequence=1) == ErrorCode.NONE
        assert coord.end(txn_id, pid, epoch, commit=True) == ErrorCode.NONE
    assert cs.read_committed(cluster, "verified") == [b"added", b"more"]


def test_kip890_offsets_in_a_transaction_are_verified_with_a_coordinator_on_another_broker(
    cluster: ClusterProcesses,
) -> None:
    """TxnOffsetCommit to a group coordinator that does not coordinate the transaction: the coordinator is
    asked (AddPartitionsToTxn v4, VerifyOnly) whether the group's offsets partition is in the
    transaction; without AddOffsetsToTxn the commit is refused and nothing is stored, with it the offsets
    are committed with the transaction."""
    _create(cluster, "verified-offsets", 1)
    cs.until(lambda: _find_group_coordinator(cluster, "any") >= 0, 60, "__consumer_offsets")
    txn_id = _coordinated_by(cluster)
    coordinator = _coordinator(cluster, txn_id)
    group = next(
        g
        for g in (f"offsets-{uuid.uuid4().hex[:6]}-{n}" for n in itertools.count())
        if _find_group_coordinator(cluster, g) not in (coordinator, -1)
    )
    group_coordinator = _find_group_coordinator(cluster, group)
    offsets = {"verified-offsets": {0: 42}}
    with (
        RawTxn(cluster.brokers[coordinator].bootstrap) as coord,
        RawTxn(cluster.brokers[group_coordinator].bootstrap) as groups,
    ):
        pid, epoch = _init(coord, txn_id)
        assert groups.commit_offsets(txn_id, pid, epoch, group, offsets) == {
            ("verified-offsets", 0): ErrorCode.INVALID_TXN_STATE
        }
        assert groups.commit_offsets(txn_id, pid, epoch, group, offsets, version=4) == {
            ("verified-offsets", 0): ErrorCode.TRANSACTION_ABORTABLE
        }
        assert coord.add_offsets(txn_id, pid, epoch, group) == ErrorCode.NONE
        assert groups.commit_offsets(txn_id, pid, epoch - 1, group, offsets) == {
            ("verified-offsets", 0): ErrorCode.INVALID_PRODUCER_EPOCH
        }
        assert groups.commit_offsets(txn_id, pid, epoch, group, offsets) == {("verified-offsets", 0): 0}
        assert coord.end(txn_id, pid, epoch, commit=True) == ErrorCode.NONE
    admin = cs.admin(cluster)
    cs.until(
        lambda: _committed_offsets(admin, group) == {("verified-offsets", 0): 42}, 30, "the committed offset"
    )


def test_transaction_version_2_across_brokers(cluster: ClusterProcesses) -> None:
    """A transaction version 2 client (exactly.client.txn) on the cluster: Produce v12 to partitions led by
    every broker makes each leader add its partition through the coordinator on another broker
    (AddPartitionsToTxn v5), TxnOffsetCommit v5 does the same for the group's partition, EndTxn v5 bumps the
    epoch; a duplicate of T1's EndTxn is answered as its retry, a delayed one while T2 is open is
    PRODUCER_FENCED, and only T1 and T3 are visible."""
    _create(cluster, "tv2-span", 3)
    cs.until(lambda: _find_group_coordinator(cluster, "any") >= 0, 60, "__consumer_offsets")
    txn_id = _coordinated_by(cluster)
    coordinator = _coordinator(cluster, txn_id)
    group = next(
        g
        for g in (f"tv2-{uuid.uuid4().hex[:6]}-{n}" for n in itertools.count())
        if _find_group_coordinator(cluster, g) not in (coordinator, -1)
    )
    with TransactionalProducer(cluster.bootstrap, txn_id) as p:
        p.init()
        pid, epoch = p.producer_id, p.producer_epoch
        for partition in range(3):
            p.send("tv2-span", partition, [f"t1-{partition}".encode()])
        p.send_offsets(group, {("tv2-span", 0): 7})
        assert (p.commit().producer_epoch, p.producer_id) == (epoch + 1, pid)
        t1_end = p.last_end_request
        assert t1_end is not None
        assert p.end_txn(t1_end).error_code == ErrorCode.NONE  # a duplicate: T1's retry
        for partition in range(3):
            p.send("tv2-span", partition, [f"t2-{partition}".encode()])
        assert p.end_txn(t1_end).error_code == ErrorCode.PRODUCER_FENCED  # delayed, T2 open
        p.abort()
        for partition in range(3):
            p.send("tv2-span", partition, [f"t3-{partition}".encode()])
        p.send_offsets(group, {("tv2-span", 0): 9})
        p.commit()
        assert (p.producer_id, p.producer_epoch) == (pid, epoch + 3)
    expected = [f"t{t}-{partition}".encode() for t in (1, 3) for partition in range(3)]
    assert sorted(cs.read_committed(cluster, "tv2-span")) == sorted(expected)
    admin = cs.admin(cluster)
    cs.until(lambda: _committed_offsets(admin, group) == {("tv2-span", 0): 9}, 30, "the committed offset")


def _init(coordinator: RawTxn, txn_id: str) -> tuple[int, int]:
    """InitProducerId, again while the coordinator (named by metadata) still loads its partition."""
    answers: list[tuple[int, int, int]] = []

    def granted() -> bool:
        answers.append(coordinator.init(txn_id))
        return answers[-1][0] == ErrorCode.NONE

    cs.until(granted, 60, "a producer id")
    return answers[-1][1], answers[-1][2]


def _find_group_coordinator(cluster: ClusterProcesses, group: str) -> int:
    """The node FindCoordinator names for `group` (-1 while none is available)."""
    with RawTxn(cluster.brokers[1].bootstrap) as raw:
        answer = raw.client.request(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(group, 0))
    node: int = answer.node_id if answer.error_code == ErrorCode.NONE else -1
    return node


def _committed_offsets(admin: AdminClient, group: str) -> dict[tuple[str, int], int]:
    request = ConsumerGroupTopicPartitions(group)
    found = admin.list_consumer_group_offsets([request])[group].result(30)
    return {(tp.topic, tp.partition): tp.offset for tp in found.topic_partitions}


def test_coordinator_killed_between_transactions(cluster: ClusterProcesses) -> None:
    _create(cluster, "between", 6)
    txn_id = _coordinated_by(cluster)
    victim = _coordinator(cluster, txn_id)
    producer = _producer(cluster, txn_id)
    committed = _transaction(producer, "between", 6, "before")
    producer.commit_transaction(30)
    cluster.brokers[victim].kill()
    cs.until(lambda: _coordinator(cluster, txn_id) not in (victim, -1), 60, "a new transaction coordinator")
    committed += _transaction(producer, "between", 6, "after")
    producer.commit_transaction(60)
    _transaction(producer, "between", 6, "aborted")
    producer.flush(60)
    producer.abort_transaction(60)
    cluster.brokers[victim].start()
    cluster.wait_for_brokers(3)
    assert sorted(cs.read_committed(cluster, "between")) == sorted(committed)
    _wait_in_sync(cluster, "between")


def test_coordinator_killed_during_a_stream_of_commits(cluster: ClusterProcesses) -> None:
    """Transactions back to back while the coordinator's broker is killed: every acknowledged commit is
    visible once, every abort invisible, and one whose outcome the producer never learnt all or nothing."""
    _create(cluster, "stream", 6)
    txn_id = _coordinated_by(cluster)
    victim = _coordinator(cluster, txn_id)
    committed: list[list[bytes]] = []
    aborted: list[list[bytes]] = []
    unknown: list[list[bytes]] = []
    stop = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        producer = _producer(cluster, txn_id)
        try:
            for n in itertools.count():
                if stop.is_set():
                    return
                values: list[bytes] = []
                try:
                    values = _transaction(producer, "stream", 6, f"t{n}")
                    producer.commit_transaction(60)
                    committed.append(values)
                except KafkaException as e:
                    error: KafkaError = e.args[0]
                    if error.txn_requires_abort():
                        try:
                            producer.abort_transaction(60)
                            aborted.append(values)
                        except KafkaException:
                            unknown.append(values)
                            producer = _producer(cluster, txn_id)
                    elif error.retriable():
                        try:
                            producer.commit_transaction(60)
                            committed.append(values)
                        except KafkaException:
                            unknown.append(values)
                            producer = _producer(cluster, txn_id)
                    else:  # fatal: a new instance (its InitProducerId aborts or completes the old one)
                        unknown.append(values)
                        producer = _producer(cluster, txn_id)
        except BaseException as e:  # noqa: BLE001 (reported by the test)
            errors.append(e)
        finally:
            producer.flush(10)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    cs.until(lambda: len(committed) >= 3 or errors, 60, "commits before the kill")
    cluster.brokers[victim].kill()
    before = len(committed)
    cs.until(lambda: len(committed) >= before + 3 or errors, 120, "commits after the kill")
    stop.set()
    thread.join(120)
    assert not errors, errors
    cluster.brokers[victim].start()
    cluster.wait_for_brokers(3)
    seen = cs.read_committed(cluster, "stream")
    assert len(seen) == len(set(seen))  # nothing twice
    visible = set(seen)
    for values in committed:
        assert set(values) <= visible
    for values in aborted:
        assert not set(values) & visible
    for values in unknown:  # all or nothing
        assert set(values) <= visible or not set(values) & visible
    expected = {v for values in committed for v in values}
    assert expected <= visible
    assert visible - expected <= {v for values in unknown for v in values}
    _wait_in_sync(cluster, "stream")


def test_new_coordinator_completes_a_commit_decided_before_the_kill(cluster: ClusterProcesses) -> None:
    """The coordinator writes PrepareCommit (EndTxn is answered) and is killed before any marker: the
    broker that takes over its `__transaction_state` partition writes the markers."""
    _create(cluster, "decided", 6)
    _wait_in_sync(cluster, TXN_TOPIC)
    txn_id = _coordinated_by(cluster, preferred=True)
    partitions = cs.partitions(cluster, TXN_TOPIC)
    txn_partition = partition_for(txn_id, len(partitions))
    victim = partitions[txn_partition][1][0]
    broker = cluster.brokers[victim]
    broker.kill()
    # Its session expires and leadership moves (before that, its old registration still shows; the
    # partition may already be led by another replica, so its leader alone does not say the kill was seen).
    cluster.wait_for_brokers(2)
    cs.until(
        lambda: cs.partitions(cluster, TXN_TOPIC)[txn_partition][0] not in (victim, -1),
        60,
        f"{TXN_TOPIC}-{txn_partition} to fail over",
    )
    broker.settings.append(PAUSE)  # its marker jobs park right after PrepareCommit is durable
    broker.start()
    cluster.wait_for_brokers(3)
    _wait_in_sync(cluster, TXN_TOPIC)
    admin = cs.admin(cluster)

    def elected() -> bool:
        if cs.partitions(cluster, TXN_TOPIC)[txn_partition][0] == victim:
            return True
        with contextlib.suppress(KafkaException):
            admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(TXN_TOPIC, txn_partition)]).result(30)
        return cs.partitions(cluster, TXN_TOPIC)[txn_partition][0] == victim

    cs.until(elected, 60, f"broker {victim} leading {TXN_TOPIC}-{txn_partition} again")
    producer = _producer(cluster, txn_id)
    values = _transaction(producer, "decided", 6, "decided")
    producer.commit_transaction(30)  # answered once PrepareCommit is durable
    cs.until(lambda: "parked at prepare-written" in broker.full_log(), 30, "the marker job parked")
    broker.kill()
    broker.settings.remove(PAUSE)
    cs.until(lambda: _coordinator(cluster, txn_id) not in (victim, -1), 60, "a new transaction coordinator")
    assert sorted(cs.read_committed(cluster, "decided")) == sorted(values)
    broker.start()
    cluster.wait_for_brokers(3)
    _wait_in_sync(cluster, "decided")

"""A replicated cluster of three real brokers on one real ZooKeeper, driven by confluent-kafka: every
broker in Metadata, partitions with three replicas in sync, acks=all with min.insync.replicas, replicas
byte-identical below the high watermark, and no acknowledged record lost or duplicated when the leader of
the partitions being written is killed with SIGKILL, again and again.

One cluster for the module (the tests run in file order and leave it whole: a killed broker is restarted).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ElectionType, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaTopicPartition

from exactly.testing.cluster import ClusterProcesses
from exactly.testing.zookeeper import ZooKeeperProcess
from tests.interop import cluster_support as cs

pytestmark = pytest.mark.slow

SESSION_TIMEOUT_MS = 6000


@pytest.fixture(scope="module")
def cluster(
    zookeeper_server: ZooKeeperProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterProcesses]:
    connect = f"{zookeeper_server.connect_string}/cluster-{uuid.uuid4().hex[:8]}"
    with ClusterProcesses(
        tmp_path_factory.mktemp("cluster"), connect, 3, session_timeout_ms=SESSION_TIMEOUT_MS
    ) as c:
        yield c


def _create(cluster: ClusterProcesses, name: str, partitions: int, rf: int = 3, **configs: str) -> None:
    admin = cs.admin(cluster)  # kept until the futures resolve (a collected client cancels them)
    futures = admin.create_topics(
        [NewTopic(name, partitions, rf, config={k.replace("_", "."): v for k, v in configs.items()})]
    )
    for future in futures.values():
        future.result(60)


def _consume_all(
    cluster: ClusterProcesses, topic: str, expected: int, timeout: float = 60
) -> dict[int, list[bytes]]:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": f"check-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([topic])
    out: dict[int, list[bytes]] = {}
    count = 0
    deadline = time.monotonic() + timeout
    try:
        while count < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            out.setdefault(message.partition(), []).append(message.value())
            count += 1
    finally:
        consumer.close()
    return out


def test_metadata_lists_every_broker_and_three_replicas_in_sync(cluster: ClusterProcesses) -> None:
    _create(cluster, "described", 6)
    metadata = cs.admin(cluster).list_topics("described", timeout=10)
    assert sorted(metadata.brokers) == [1, 2, 3]
    assert metadata.controller_id in (1, 2, 3)
    partitions = cs.partitions(cluster, "described")
    assert len(partitions) == 6
    leaders = [leader for leader, _, _ in partitions.values()]
    assert sorted(set(leaders)) == [1, 2, 3]  # leadership spread over the brokers
    for leader, replicas, isr in partitions.values():
        assert sorted(replicas) == [1, 2, 3]
        assert leader == replicas[0]  # the preferred replica leads a new partition
        assert sorted(isr) == [1, 2, 3]


def test_acks_all_writes_reach_every_replica_byte_for_byte(cluster: ClusterProcesses) -> None:
    _create(cluster, "copied", 2)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "acks": "all"})
    failures: list[KafkaError] = []
    for i in range(2000):
        producer.produce(
            "copied",
            f"value-{i}".encode(),
            partition=i % 2,
            on_delivery=lambda err, msg: failures.append(err) if err else None,
        )
    assert producer.flush(60) == 0
    assert failures == []
    got = _consume_all(cluster, "copied", 2000)
    assert got[0] == [f"value-{i}".encode() for i in range(0, 2000, 2)]
    assert got[1] == [f"value-{i}".encode() for i in range(1, 2000, 2)]

    for partition in (0, 1):
        cs.until(
            lambda p=partition: len({cs.segments(cluster, b, "copied", p) for b in (1, 2, 3)}) == 1,
            30,
            f"the replicas of copied-{partition} to be identical",
        )
        assert len(cs.segments(cluster, 1, "copied", partition)) > 1000 * len(b"value-0")


def test_min_insync_replicas_refuses_acks_all_when_the_isr_is_too_small(cluster: ClusterProcesses) -> None:
    _create(cluster, "strict", 1, min_insync_replicas="3")
    leader, replicas, _ = cs.partitions(cluster, "strict")[0]
    victim = next(b for b in replicas if b != leader)
    cluster.brokers[victim].kill()
    try:
        cs.until(lambda: len(cs.partitions(cluster, "strict")[0][2]) == 2, 30, "the ISR to shrink to two")
        producer = Producer(
            {"bootstrap.servers": cluster.bootstrap, "acks": "all", "message.timeout.ms": 4000, "retries": 0}
        )
        errors: list[KafkaError] = []
        producer.produce("strict", b"x", on_delivery=lambda err, msg: errors.append(err))
        producer.flush(20)
        assert len(errors) == 1
        assert errors[0] is not None
        assert errors[0].code() in (KafkaError.NOT_ENOUGH_REPLICAS, KafkaError._MSG_TIMED_OUT)
    finally:
        cluster.brokers[victim].start()
        cluster.wait_for_brokers(3)
    cs.until(
        lambda: len(cs.partitions(cluster, "strict")[0][2]) == 3,
        60,
        "the restarted follower to rejoin the ISR",
    )


def test_killing_the_leader_again_and_again_loses_and_duplicates_nothing(cluster: ClusterProcesses) -> None:
    _create(cluster, "failover", 1)
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "message.timeout.ms": 120_000,
            "linger.ms": 5,
        }
    )
    acked: list[bytes] = []
    failed: list[KafkaError] = []
    stop = threading.Event()

    def write() -> None:
        i = 0
        while not stop.is_set():
            try:
                producer.produce(
                    "failover",
                    f"{i:08d}".encode(),
                    on_delivery=lambda err, msg: failed.append(err) if err else acked.append(msg.value()),
                )
                i += 1
            except BufferError:
                producer.poll(0.05)
            producer.poll(0)
            if i % 100 == 0:
                time.sleep(0.01)
        producer.flush(120)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        for _ in range(3):
            cs.until(lambda: len(acked) > 200 + len(acked) // 2, 60, "acknowledged writes")
            leader = cs.partitions(cluster, "failover")[0][0]
            cluster.brokers[leader].kill()
            before = len(acked)
            cs.until(lambda b=before: len(acked) > b + 100, 60, "writes acknowledged by a new leader")
            cluster.brokers[leader].start()
            cluster.wait_for_brokers(3)
            cs.until(
                lambda: len(cs.partitions(cluster, "failover")[0][2]) == 3,
                60,
                "the old leader back in the ISR",
            )
    finally:
        stop.set()
        writer.join(180)
    assert failed == []
    got = _consume_all(cluster, "failover", len(acked), timeout=120)[0]
    assert len(got) == len(set(got)), "duplicates"
    assert got == sorted(got), "out of order"
    assert set(acked) <= set(got), f"{len(set(acked) - set(got))} acknowledged records lost"
    assert len(got) == len(acked)


def test_a_stopped_follower_catches_up_and_rejoins_the_isr(cluster: ClusterProcesses) -> None:
    _create(cluster, "catchup", 1)
    leader, replicas, _ = cs.partitions(cluster, "catchup")[0]
    follower = next(b for b in replicas if b != leader)
    cluster.brokers[follower].stop()
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(500):
        producer.produce("catchup", f"{i}".encode())
    assert producer.flush(60) == 0
    cluster.brokers[follower].start()
    cluster.wait_for_brokers(3)
    cs.until(lambda: len(cs.partitions(cluster, "catchup")[0][2]) == 3, 60, "the follower back in the ISR")
    cs.until(
        lambda: cs.segments(cluster, follower, "catchup", 0) == cs.segments(cluster, leader, "catchup", 0),
        30,
        "the follower's log to equal the leader's",
    )
    got = _consume_all(cluster, "catchup", 500)
    assert got[0] == [f"{i}".encode() for i in range(500)]


def test_controlled_shutdown_moves_leadership_and_preferred_election_moves_it_back(
    cluster: ClusterProcesses,
) -> None:
    _create(cluster, "preferred", 1)
    leader, replicas, _ = cs.partitions(cluster, "preferred")[0]
    assert leader == replicas[0]
    started = time.monotonic()
    assert cluster.brokers[leader].stop() == 0  # SIGTERM: a controlled shutdown first
    stopped_in = time.monotonic() - started
    moved_to, _, isr = cs.partitions(cluster, "preferred")[0]
    assert moved_to in replicas
    assert moved_to != leader
    assert leader not in isr
    assert stopped_in < 10, f"the controlled shutdown took {stopped_in:.1f} s"
    cluster.brokers[leader].start()
    cluster.wait_for_brokers(3)
    cs.until(
        lambda: len(cs.partitions(cluster, "preferred")[0][2]) == 3, 60, "the preferred replica in the ISR"
    )
    assert cs.partitions(cluster, "preferred")[0][0] == moved_to  # nothing moves it back by itself (yet)
    admin = cs.admin(cluster)
    outcome = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("preferred", 0)]).result(30)
    assert outcome == {TopicPartition("preferred", 0): None}
    cs.until(lambda: cs.partitions(cluster, "preferred")[0][0] == leader, 30, "the preferred replica to lead")
    again = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("preferred", 0)]).result(30)
    error = again[TopicPartition("preferred", 0)]
    assert error is not None
    assert error.code() == KafkaError.ELECTION_NOT_NEEDED


def test_a_reassignment_moves_a_partition_to_other_brokers(cluster: ClusterProcesses) -> None:
    admin = cs.admin(cluster)
    futures = admin.create_topics([NewTopic("moved", num_partitions=1, replica_assignment=[[1, 2]])])
    futures["moved"].result(60)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(300):
        producer.produce("moved", f"{i}".encode())
    assert producer.flush(60) == 0
    with KafkaAdminClient(bootstrap_servers=cluster.bootstrap) as kafka_admin:
        answer = kafka_admin.alter_partition_reassignments({KafkaTopicPartition("moved", 0): [2, 3]})
        assert answer == {KafkaTopicPartition("moved", 0): None}
        cs.until(
            lambda: sorted(cs.partitions(cluster, "moved")[0][1]) == [2, 3], 60, "the reassignment to end"
        )
        assert kafka_admin.list_partition_reassignments() == {}
    leader, replicas, isr = cs.partitions(cluster, "moved")[0]
    assert replicas == [2, 3]
    assert sorted(isr) == [2, 3]
    assert leader in (2, 3)
    cs.until(
        lambda: not (cluster.brokers[1].data_dir / "moved-0").exists(),
        30,
        "broker 1 to delete its replica",
    )
    assert cs.segments(cluster, 3, "moved", 0) == cs.segments(cluster, 2, "moved", 0)
    assert _consume_all(cluster, "moved", 300)[0] == [f"{i}".encode() for i in range(300)]


def _cli(cluster: ClusterProcesses, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "exactly", *args, "--bootstrap-server", cluster.bootstrap],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_cli_reassigns_partitions_and_elects_leaders(cluster: ClusterProcesses, tmp_path: Path) -> None:
    admin = cs.admin(cluster)
    admin.create_topics([NewTopic("cli-moved", num_partitions=2, replica_assignment=[[1, 2], [2, 1]])])[
        "cli-moved"
    ].result(60)
    topics_file = tmp_path / "topics.json"
    topics_file.write_text(json.dumps({"version": 1, "topics": [{"topic": "cli-moved"}]}))
    generated = _cli(
        cluster,
        "topics",
        "reassign",
        "generate",
        "--topics-to-move-json-file",
        str(topics_file),
        "--broker-list",
        "2,3",
    )
    assert generated.returncode == 0, generated.stderr
    current_text, proposed_text = generated.stdout.split("Proposed partition reassignment configuration")
    assert json.loads(current_text.split("\n", 1)[1])["partitions"][0]["replicas"] == [1, 2]
    proposal = json.loads(proposed_text)
    assert {tuple(sorted(p["replicas"])) for p in proposal["partitions"]} == {(2, 3)}
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(proposal))
    executed = _cli(cluster, "topics", "reassign", "execute", "--reassignment-json-file", str(plan))
    assert executed.returncode == 0, executed.stderr
    assert "Successfully started partition reassignments for cli-moved-0, cli-moved-1" in executed.stdout

    def verified() -> bool:
        result = _cli(cluster, "topics", "reassign", "verify", "--reassignment-json-file", str(plan))
        return result.returncode == 0 and result.stdout.count("is completed.") == 2

    cs.until(verified, 60, "`reassign verify` to report both partitions completed")
    partitions = cs.partitions(cluster, "cli-moved")
    for p in proposal["partitions"]:
        assert partitions[p["partition"]][1] == p["replicas"]
    elected = _cli(cluster, "topics", "elect-leaders", "--topic", "cli-moved")
    assert elected.returncode == 0, elected.stderr
    assert "cli-moved-0" in elected.stdout
    assert "cli-moved-1" in elected.stdout
    for p in proposal["partitions"]:
        assert partitions[p["partition"]][0] in p["replicas"]
    missing = _cli(
        cluster, "topics", "reassign", "execute", "--reassignment-json-file", str(tmp_path / "none.json")
    )
    assert missing.returncode != 0
    assert missing.stderr.count("\n") == 1  # one readable line


def test_a_topic_deleted_while_a_broker_was_down_leaves_nothing_on_it(cluster: ClusterProcesses) -> None:
    _create(cluster, "doomed", 2)
    # librdkafka's producer asks for auto-creation of the topics it knows (allow.auto.create.topics is true
    # for producers): left on, its metadata refresh on broker 3's disconnect could create "doomed" again
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "acks": "all", "allow.auto.create.topics": False}
    )
    for i in range(50):
        producer.produce("doomed", f"{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    del producer
    absent = cluster.brokers[3]
    cs.until(lambda: (absent.data_dir / "doomed-0").exists(), 30, "broker 3's replica")
    absent.stop()
    admin = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})
    admin.delete_topics(["doomed"])["doomed"].result(30)
    cs.until(
        lambda: not (cluster.brokers[1].data_dir / "doomed-0").exists(), 30, "broker 1 to delete its replica"
    )
    absent.start()
    cluster.wait_for_brokers(3)
    cs.until(
        lambda: not (absent.data_dir / "doomed-0").exists(), 30, "the returning broker to drop its stray log"
    )
    # every broker's view drops it (the returning one's too, once its view of ZooKeeper has caught up)
    cs.until(lambda: "doomed" not in cs.admin(cluster).list_topics(timeout=10).topics, 30, "doomed gone")

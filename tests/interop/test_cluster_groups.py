"""Consumer groups across a coordinator failover, on three real brokers (one ZooKeeper): a group of three
consumers (two confluent-kafka, one kafka-python) reads a 6-partition topic with replication factor 3
while a producer keeps writing, committing as it goes. The broker that coordinates the group — the
leader of the group's `__consumer_offsets` partition, as FindCoordinator names it — is killed with
SIGKILL, and in the second test stopped with SIGTERM (a controlled shutdown). Each time the group carries
on with the new coordinator: no committed offset goes back (per partition, before and after), every record
is consumed (none skipped), a record is consumed again only if it was at or above the offset committed
when the coordinator went away, and the controlled shutdown barely pauses the group (measured).

One cluster for the module; each test restarts the broker it stopped.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, KafkaConsumer

from exactly.client.connection import KafkaConnection
from exactly.group.partitioning import partition_for
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.find_coordinator import FindCoordinatorRequest
from exactly.testing.cluster import ClusterProcesses
from exactly.testing.zookeeper import ZooKeeperProcess
from tests.interop import cluster_support as cs

pytestmark = pytest.mark.slow

PARTITIONS = 6
SESSION_TIMEOUT_MS = 6000
OFFSETS_TOPIC = "__consumer_offsets"


@pytest.fixture(scope="module")
def cluster(
    zookeeper_server: ZooKeeperProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterProcesses]:
    connect = f"{zookeeper_server.connect_string}/groups-{uuid.uuid4().hex[:8]}"
    with ClusterProcesses(
        tmp_path_factory.mktemp("cluster"), connect, 3, session_timeout_ms=SESSION_TIMEOUT_MS
    ) as c:
        yield c


def _create(cluster: ClusterProcesses, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.create_topics([NewTopic(name, PARTITIONS, 3)]).values():
        future.result(60)


def _coordinator(cluster: ClusterProcesses, group: str) -> int:
    """The group's coordinator: the leader of its `__consumer_offsets` partition (-1: none yet).

    Read from metadata, not from librdkafka's DescribeConsumerGroups: that admin call, asked while a
    coordinator dies, has aborted the test process (librdkafka 2.16 asserts `eonce->refcnt > 0` in its
    coordinator-request path); FindCoordinator's answer itself is checked by `_find_coordinator`."""
    found = cs.view(cluster, OFFSETS_TOPIC)
    if not found:
        return -1
    return found[partition_for(group, len(found))][0]


def _find_coordinator(cluster: ClusterProcesses, group: str, broker: int) -> tuple[int, int]:
    """FindCoordinator (v3, one key) asked of `broker`: (error code, node id)."""
    host, port = cluster.brokers[broker].bootstrap.rsplit(":", 1)
    with KafkaConnection.open(host, int(port), timeout=10) as conn:
        answer = conn.request(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(group, 0))
    return answer.error_code, answer.node_id


def _committed(cluster: ClusterProcesses, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets, asked without joining it (kafka-python's OffsetFetch on its
    coordinator; not librdkafka's, for the reason given at `_coordinator`)."""
    admin = KafkaAdminClient(bootstrap_servers=cs.bootstrap(cluster).split(","), request_timeout_ms=30_000)
    try:
        found = admin.list_group_offsets(group)[group]
    finally:
        admin.close()
    return {tp.partition: meta.offset for tp, meta in found.items() if tp.topic == topic and meta.offset >= 0}


@dataclass
class Consumed:
    """Every record the group consumed: (partition, offset, when), and each commit's time."""

    records: list[tuple[int, int, float]] = field(default_factory=list)
    commits: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, partition: int, offset: int) -> None:
        with self.lock:
            self.records.append((partition, offset, time.monotonic()))

    def committed(self) -> None:
        with self.lock:
            self.commits.append(time.monotonic())

    def max_offsets(self) -> dict[int, int]:
        with self.lock:
            out: dict[int, int] = {}
            for partition, offset, _ in self.records:
                out[partition] = max(out.get(partition, -1), offset)
            return out


class Workload:
    """A producer writing keyed records to every partition, and a group of three committing consumers."""

    def __init__(self, cluster: ClusterProcesses, topic: str, group: str) -> None:
        self.cluster = cluster
        self.topic = topic
        self.group = group
        self.consumed = Consumed()
        self.produced: dict[int, int] = {}  # partition -> records acknowledged
        self._stop_producing = threading.Event()
        self._stop_consuming = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        self._threads.append(threading.Thread(target=self._produce, daemon=True))
        for i in range(2):
            self._threads.append(threading.Thread(target=self._confluent, args=(i,), daemon=True))
        self._threads.append(threading.Thread(target=self._kafka_python, daemon=True))
        for thread in self._threads:
            thread.start()

    def stop_producing(self) -> None:
        self._stop_producing.set()
        self._threads[0].join(120)

    def stop(self) -> None:
        self._stop_producing.set()
        self._stop_consuming.set()
        for thread in self._threads:
            thread.join(120)

    def _produce(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.cluster.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "message.timeout.ms": 120_000,
                "linger.ms": 5,
            }
        )
        lock = threading.Lock()

        def acked(err: object, msg: object) -> None:
            if err is None:
                with lock:
                    p = msg.partition()  # type: ignore[attr-defined]
                    self.produced[p] = self.produced.get(p, 0) + 1
            else:
                self.consumed.errors.append(f"produce: {err}")

        i = 0
        while not self._stop_producing.is_set():
            producer.produce(self.topic, f"{i}".encode(), partition=i % PARTITIONS, on_delivery=acked)
            i += 1
            producer.poll(0)
            if i % 30 == 0:
                time.sleep(0.05)  # about 600 records/s
        producer.flush(120)

    def _confluent(self, index: int) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.cluster.bootstrap,
                "group.id": self.group,
                "client.id": f"confluent-{index}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": SESSION_TIMEOUT_MS,
                "heartbeat.interval.ms": 500,
            }
        )
        consumer.subscribe([self.topic])
        try:
            while not self._stop_consuming.is_set():
                messages = consumer.consume(100, 0.2)
                fresh = [m for m in messages if m.error() is None]
                for m in fresh:
                    self.consumed.add(m.partition(), m.offset())
                if fresh:
                    try:
                        consumer.commit(asynchronous=False)
                        self.consumed.committed()
                    except Exception:  # noqa: BLE001 (a commit during the failover: the next one retries)
                        pass
        finally:
            consumer.close()

    def _kafka_python(self) -> None:
        consumer = KafkaConsumer(
            self.topic,
            bootstrap_servers=self.cluster.bootstrap.split(","),
            group_id=self.group,
            client_id="kafka-python",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=500,
            request_timeout_ms=30_000,
        )
        try:
            while not self._stop_consuming.is_set():
                batches = consumer.poll(timeout_ms=200, max_records=100)
                count = 0
                for tp, records in batches.items():
                    for record in records:
                        self.consumed.add(tp.partition, record.offset)
                        count += 1
                if count:
                    try:
                        consumer.commit()
                        self.consumed.committed()
                    except Exception:  # noqa: BLE001 (a commit during the failover: the next one retries)
                        pass
        finally:
            consumer.close()

    def caught_up(self) -> bool:
        seen = self.consumed.max_offsets()
        return all(seen.get(p, -1) + 1 >= n for p, n in self.produced.items()) and len(seen) == PARTITIONS


def _run_failover(cluster: ClusterProcesses, how: str) -> tuple[Workload, dict[int, int], float, float]:
    """Start the workload, wait for the group to commit, stop the coordinator `how` ("kill"/"stop"),
    let the group catch up with everything produced. Returns the workload, the committed offsets just
    before the coordinator went away, when it went away, and how long stopping it took."""
    name = f"{how}-{uuid.uuid4().hex[:6]}"
    topic, group = f"work-{name}", f"group-{name}"
    _create(cluster, topic)
    work = Workload(cluster, topic, group)
    work.start()
    try:
        cs.until(lambda: len(work.consumed.commits) > 30, 90, "the group to commit")
        cs.until(
            lambda: len(_committed(cluster, group, topic)) == PARTITIONS, 60, "commits on every partition"
        )
        cs.until(lambda: len(work.consumed.commits) > 60, 60, "the group to keep committing")
        coordinator = _coordinator(cluster, group)
        before = _committed(cluster, group, topic)
        gone_at = time.monotonic()
        if how == "kill":
            cluster.brokers[coordinator].kill()
        else:
            assert cluster.brokers[coordinator].stop() == 0
        stopping = time.monotonic() - gone_at
        cs.until(lambda: _coordinator(cluster, group) not in (coordinator, -1), 60, "a new coordinator")
        successor = _coordinator(cluster, group)
        for broker in (b for b, p in cluster.brokers.items() if p.running):
            cs.until(
                lambda broker=broker: _find_coordinator(cluster, group, broker) == (0, successor),
                30,
                f"broker {broker} to name {successor} as the coordinator",
            )
        after_failover = len(work.consumed.commits)
        cs.until(
            lambda: len(work.consumed.commits) > after_failover + 20, 90, "commits on the new coordinator"
        )
        work.stop_producing()
        cs.until(work.caught_up, 120, "the group to consume everything produced")
        cluster.brokers[coordinator].start()
        cluster.wait_for_brokers(3)
    finally:
        work.stop()
    return work, before, gone_at, stopping


def _check(cluster: ClusterProcesses, work: Workload, before: dict[int, int], gone_at: float) -> None:
    assert work.consumed.errors == []
    after = _committed(cluster, work.group, work.topic)
    for p in range(PARTITIONS):
        assert after.get(p, -1) >= before[p], (
            f"partition {p}: committed {before[p]} before, {after.get(p)} after"
        )
    by_partition: dict[int, list[tuple[int, float]]] = {}
    for partition, offset, at in work.consumed.records:
        by_partition.setdefault(partition, []).append((offset, at))
    for p in range(PARTITIONS):
        seen = by_partition.get(p, [])
        offsets = {o for o, _ in seen}
        assert offsets == set(range(work.produced[p])), f"partition {p}: records skipped"
        # after the coordinator went away, nothing below what was committed then is read again
        later = [o for o, at in seen if at > gone_at]
        assert not later or min(later) >= before[p], (
            f"partition {p}: offset {min(later)} read again after the failover, {before[p]} was committed"
        )


def test_killing_the_group_coordinator_loses_no_committed_offset(cluster: ClusterProcesses) -> None:
    work, before, gone_at, _ = _run_failover(cluster, "kill")
    _check(cluster, work, before, gone_at)


def test_a_controlled_shutdown_of_the_coordinator_barely_pauses_the_group(cluster: ClusterProcesses) -> None:
    work, before, gone_at, stopping = _run_failover(cluster, "stop")
    _check(cluster, work, before, gone_at)
    commits = sorted(work.consumed.commits)
    around = [t for t in commits if gone_at - 5 <= t <= gone_at + stopping + 30]
    pause = max((b - a for a, b in itertools.pairwise(around)), default=0.0)
    print(f"controlled shutdown took {stopping:.2f} s; longest pause between commits {pause:.2f} s")
    assert pause < SESSION_TIMEOUT_MS / 1000, f"the group paused {pause:.1f} s"

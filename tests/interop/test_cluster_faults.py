"""The faults a replicated cluster must survive, with real processes and real clients: a group
coordinator cut off from ZooKeeper (it must stop answering before it is replaced), kill -9 of the
controller and then of a leader, a leader paused past its session (SIGSTOP/SIGCONT), a leader cut off
from ZooKeeper and from its followers (a network partition) and healed, power loss of a follower and of a
leader, a ZooKeeper restart under load, and a rolling restart of every broker under load.

After each, every producer's records are checked one by one: nothing acknowledged (acks=all) is lost,
nothing is duplicated, each producer's records keep their order within each partition, and the replicas
end byte-identical.

One cluster of three brokers for the module (the tests run in file order and leave it whole), on a
ZooKeeper of the module's own (one test restarts it). Every broker has an INTERNAL listener for the
inter-broker traffic; broker 3 reaches ZooKeeper, and is reached by its followers, through
`BlackholeProxy`s (exactly.testing.tcp_proxy), so that the partition test can cut it off. Every broker
keeps an fsync ledger so that the power-loss test can drop what a power loss would.
"""

from __future__ import annotations

import collections
import contextlib
import random
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ElectionType,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from exactly.client.connection import KafkaConnection
from exactly.cluster import znodes
from exactly.cluster.znodes import TopicAssignment
from exactly.errors import ErrorCode
from exactly.group.partitioning import partition_for
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.find_coordinator import FindCoordinatorRequest
from exactly.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic
from exactly.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from exactly.records.builder import build_batch
from exactly.testing.cluster import ClusterProcesses
from exactly.testing.processes import free_port
from exactly.testing.tcp_proxy import BlackholeProxy
from exactly.testing.zookeeper import ZooKeeperProcess
from exactly.verify.disk import power_loss
from tests.interop import cluster_support as cs

pytestmark = pytest.mark.slow

SESSION_TIMEOUT_MS = 6000
VICTIM = 3  # the broker behind the proxies
OFFSETS = "__consumer_offsets"
CHROOT = "/faults"


@dataclass
class Faults:
    cluster: ClusterProcesses
    zookeeper: ZooKeeperProcess
    zk_proxy: BlackholeProxy  # broker 3 -> ZooKeeper
    inter_proxy: BlackholeProxy  # the other brokers -> broker 3's INTERNAL listener
    ledgers: dict[int, Path]


@pytest.fixture(scope="module")
def faults(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Faults]:
    root = tmp_path_factory.mktemp("faults")
    with ZooKeeperProcess(root / "zookeeper") as zookeeper:
        chroot = CHROOT
        cluster = ClusterProcesses(
            root, f"{zookeeper.connect_string}{chroot}", 3, session_timeout_ms=SESSION_TIMEOUT_MS
        )
        internal = {b: free_port() for b in cluster.brokers}
        zk_proxy = BlackholeProxy(("127.0.0.1", zookeeper.port)).start()
        inter_proxy = BlackholeProxy(("127.0.0.1", internal[VICTIM])).start()
        ledgers = {b: root / f"broker-{b}" / "fsync.ledger" for b in cluster.brokers}
        for broker_id, broker in cluster.brokers.items():
            advertised_internal = inter_proxy.port if broker_id == VICTIM else internal[broker_id]
            if broker_id == VICTIM:
                broker.settings = [
                    f"zookeeper.connect={zk_proxy.address}{chroot}"
                    if s.startswith("zookeeper.connect=")
                    else s
                    for s in broker.settings
                ]
            broker.settings += [
                f"listeners=PLAINTEXT://127.0.0.1:{broker.port},INTERNAL://127.0.0.1:{internal[broker_id]}",
                f"advertised.listeners=PLAINTEXT://127.0.0.1:{broker.port},"
                f"INTERNAL://127.0.0.1:{advertised_internal}",
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
                "inter.broker.listener.name=INTERNAL",
                f"exactly.debug.fsync.ledger={ledgers[broker_id]}",
                # the tests assert who leads after a fault; the controller's periodic preferred-leader
                # rebalance (every 300 s, the module runs longer) would hand a partition back mid-assertion
                "auto.leader.rebalance.enable=false",
            ]
        try:
            with cluster:
                yield Faults(cluster, zookeeper, zk_proxy, inter_proxy, ledgers)
        finally:
            zk_proxy.close()
            inter_proxy.close()


# --- helpers ----------------------------------------------------------------------------------------------


def _create(cluster: ClusterProcesses, topic: NewTopic) -> None:
    admin = AdminClient({"bootstrap.servers": cs.bootstrap(cluster)})
    for future in admin.create_topics([topic]).values():
        future.result(60)


def _controller(cluster: ClusterProcesses) -> int:
    metadata = AdminClient({"bootstrap.servers": cs.bootstrap(cluster)}).list_topics(timeout=10)
    return int(metadata.controller_id)


def _isr_full(cluster: ClusterProcesses, topic: str, via: Sequence[int] | None = None) -> bool:
    parts = cs.view(cluster, topic, via)
    return bool(parts) and all(sorted(isr) == sorted(replicas) for _, replicas, isr in parts.values())


def _every_isr_full(cluster: ClusterProcesses) -> bool:
    """Every partition of every topic (the internal ones too) has all its replicas in sync."""
    try:
        metadata = AdminClient({"bootstrap.servers": cs.bootstrap(cluster)}).list_topics(timeout=5)
    except KafkaException:
        return False
    return all(
        p.leader >= 0 and sorted(p.isrs) == sorted(p.replicas)
        for t in metadata.topics.values()
        for p in t.partitions.values()
    )


def _wait_identical(cluster: ClusterProcesses, topic: str, partitions: Sequence[int]) -> None:
    for partition in partitions:
        cs.until(
            lambda p=partition: len({cs.segments(cluster, b, topic, p) for b in cluster.brokers}) == 1,  # type: ignore[misc]
            30,
            f"the replicas of {topic}-{partition} to be byte-identical",
        )


class Writer:
    """A producer thread writing `<name>-<seq>` round-robin over `partitions`, keeping what was acked."""

    def __init__(
        self, name: str, bootstrap: str, topic: str, partitions: Sequence[int], **config: object
    ) -> None:
        self.name = name
        self.topic = topic
        self.partitions = list(partitions)
        settings: dict[str, object] = {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 120_000,
        }
        settings.update({k.replace("_", "."): v for k, v in config.items()})
        self.producer = Producer(settings)
        self.acked: dict[int, list[bytes]] = collections.defaultdict(list)
        self.failed: list[tuple[bytes, KafkaError]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"writer-{name}")

    def start(self) -> Writer:
        self._thread.start()
        return self

    def count(self, partition: int | None = None) -> int:
        if partition is None:
            return sum(len(v) for v in list(self.acked.values()))
        return len(self.acked[partition])

    def wait_progress(self, more: int, timeout: float = 60, partition: int | None = None) -> None:
        target = self.count(partition) + more
        cs.until(lambda: self.count(partition) >= target, timeout, f"{more} more acks for writer {self.name}")

    def stop(self, timeout: float = 150) -> None:
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"writer {self.name} did not finish"

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        value = msg.value()
        assert value is not None
        if err is not None:
            self.failed.append((value, err))
        else:
            self.acked[msg.partition()].append(value)

    def _run(self) -> None:
        seq = 0
        while not self._stop.is_set():
            try:
                self.producer.produce(
                    self.topic,
                    f"{self.name}-{seq:08d}".encode(),
                    partition=self.partitions[seq % len(self.partitions)],
                    on_delivery=self._delivered,
                )
                seq += 1
            except BufferError:
                self.producer.poll(0.05)
            self.producer.poll(0)
            if seq % 20 == 0:
                time.sleep(0.01)
        self.producer.flush(140)


def _read_all(cluster: ClusterProcesses, topic: str) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of every partition up to its high watermark: partition -> [(offset, value)]."""
    partitions = sorted(cs.view(cluster, topic))
    consumer = Consumer(
        {
            "bootstrap.servers": cs.bootstrap(cluster),
            "group.id": f"read-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
        }
    )
    try:
        ends = {p: cs.high_watermark(consumer, topic, p) for p in partitions}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in partitions}
        deadline = time.monotonic() + 60
        while any((out[p][-1][0] + 1 if out[p] else 0) < ends[p] for p in partitions):
            assert time.monotonic() < deadline, (
                f"reading {topic} stopped at {[len(out[p]) for p in partitions]}"
            )
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            value = message.value()
            assert value is not None
            out[message.partition()].append((message.offset(), value))
        return out
    finally:
        consumer.close()


def _check(
    cluster: ClusterProcesses, topic: str, writers: Sequence[Writer], acked: Sequence[bytes] = ()
) -> dict[int, list[tuple[int, bytes]]]:
    """Each writer's records one by one: nothing acked lost, nothing duplicated, order per partition kept,
    offsets without gaps. `acked`: more values acknowledged by other means (raw produces)."""
    log = _read_all(cluster, topic)
    everything = collections.Counter(v for records in log.values() for _, v in records)
    duplicated = [v for v, n in everything.items() if n > 1]
    assert not duplicated, f"{len(duplicated)} records duplicated, e.g. {duplicated[:3]}"
    for partition, records in log.items():
        offsets = [o for o, _ in records]
        assert offsets == list(range(len(offsets))), f"{topic}-{partition}: offsets with gaps"
        last: dict[bytes, int] = {}
        for offset, value in records:
            name, _, seq = value.rpartition(b"-")
            assert int(seq) > last.get(name, -1), f"{topic}-{partition}: {value!r} at {offset} out of order"
            last[name] = int(seq)
        present = {v for _, v in records}
        for writer in writers:
            lost = [v for v in writer.acked.get(partition, []) if v not in present]
            assert not lost, (
                f"{topic}-{partition}: {len(lost)} acked records of {writer.name} lost: {lost[:3]}"
            )
    lost_raw = [v for v in acked if v not in everything]
    assert not lost_raw, f"acknowledged raw produces lost: {lost_raw[:3]}"
    return log


def _raw_send(
    connection: KafkaConnection, topic: str, partition: int, values: Sequence[bytes], timeout_ms: int
) -> None:
    batch = build_batch([(None, v) for v in values], timestamp=int(time.time() * 1000))
    request = ProduceRequest(
        None,
        -1,
        timeout_ms,
        [TopicProduceData(topic, partition_data=[PartitionProduceData(partition, batch)])],
    )
    connection.send(ApiKey.PRODUCE, 9, request)


def _raw_answer(connection: KafkaConnection, timeout: float) -> ErrorCode:
    response = connection.receive(deadline=time.monotonic() + timeout)
    return ErrorCode(response.responses[0].partition_responses[0].error_code)


def _produce_to_leader(
    cluster: ClusterProcesses, topic: str, partition: int, via: Sequence[int], acked: list[bytes]
) -> None:
    """One acks=all produce to the leader the brokers `via` name, which must be acknowledged."""
    leader = cs.view(cluster, topic, via)[partition][0]
    host, port = cluster.brokers[leader].bootstrap.split(":")
    values = [f"raw-{leader}-{uuid.uuid4().hex[:8]}-{i:08d}".encode() for i in range(2)]
    with KafkaConnection.open(host, int(port), timeout=30) as connection:
        _raw_send(connection, topic, partition, values, timeout_ms=10_000)
        assert _raw_answer(connection, 30) == ErrorCode.NONE
    acked += values


# --- the faults -------------------------------------------------------------------------------------------


def _led_group(cluster: ClusterProcesses, zookeeper: ZooKeeperProcess, leader: int) -> tuple[str, int]:
    """A group id whose `__consumer_offsets` partition `leader` leads (a preferred election puts it there
    when it leads none, as it may not after the earlier faults), and that partition."""
    cs.until(lambda: _isr_full(cluster, OFFSETS), 90, f"{OFFSETS} in sync")
    # the preferred replicas, from the topic's assignment znode (clients' metadata may sort replicas)
    zk = KazooClient(hosts=f"{zookeeper.connect_string}{CHROOT}")
    zk.start(30)
    try:
        data, _ = zk.get(znodes.topic_path(OFFSETS))
    finally:
        zk.stop()
        zk.close()
    assignment = TopicAssignment.decode(data).partitions
    n = 0
    while assignment[index := partition_for(group := f"stale-{n}", len(assignment))][0] != leader:
        n += 1

    def elected() -> bool:
        if cs.view(cluster, OFFSETS)[index][0] == leader:
            return True
        with contextlib.suppress(KafkaException):  # not yet possible, or done meanwhile
            election = [TopicPartition(OFFSETS, index)]
            cs.admin(cluster).elect_leaders(ElectionType.PREFERRED, election).result(30)
        return False

    cs.until(elected, 90, f"broker {leader} leading {OFFSETS}-{index}")
    return group, index


def _commit(bootstrap: str, group: str, offset: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition("stale", 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def _offset_fetch(connection: KafkaConnection, group: str) -> tuple[ErrorCode, int]:
    """OffsetFetch v7 (require_stable) of stale-0: the top-level error and the committed offset."""
    request = OffsetFetchRequest(group, [OffsetFetchRequestTopic("stale", [0])], require_stable=True)
    response = connection.request(ApiKey.OFFSET_FETCH, 7, request, deadline=time.monotonic() + 30)
    offsets = [p.committed_offset for t in response.topics for p in t.partitions]
    return ErrorCode(response.error_code), offsets[0] if offsets else -1


def test_a_group_coordinator_cut_off_from_zookeeper_stops_answering_before_it_is_replaced(
    faults: Faults,
) -> None:
    """The zombie coordinator (issue 22's copier duplicates): cut off, the old leader of a group's
    `__consumer_offsets` partition still believes it leads while the majority elects another broker and
    the group commits there. Answering OffsetFetch from its old state would hand a consumer offsets the
    group has moved on from (a transactional copier re-reads and re-copies its input). It answers
    NOT_COORDINATOR from the moment its ZooKeeper connection is gone (and FindCoordinator
    COORDINATOR_NOT_AVAILABLE), and NOT_COORDINATOR after it rejoins as a follower."""
    cluster = faults.cluster
    others = [b for b in cluster.brokers if b != VICTIM]
    _create(cluster, NewTopic("stale", 1, 3))
    _commit(cs.bootstrap(cluster), "stale-bootstrap", 1)  # __consumer_offsets exists
    group, index = _led_group(cluster, faults.zookeeper, VICTIM)
    _commit(cs.bootstrap(cluster), group, 10)
    host, port = cluster.brokers[VICTIM].bootstrap.split(":")
    with KafkaConnection.open(host, int(port), timeout=30) as zombie:
        assert _offset_fetch(zombie, group) == (ErrorCode.NONE, 10)
        faults.zk_proxy.blackhole(True)
        faults.inter_proxy.blackhole(True)
        try:
            # kazoo gives the connection up two thirds of the session timeout after its last answer
            cs.until(
                lambda: _offset_fetch(zombie, group)[0] == ErrorCode.NOT_COORDINATOR, 30, "no stale answer"
            )
            cs.until(lambda: cs.view(cluster, OFFSETS, others)[index][0] in others, 60, "a new coordinator")
            _commit(cs.bootstrap(cluster, others), group, 20)
            assert _offset_fetch(zombie, group)[0] == ErrorCode.NOT_COORDINATOR
            # nor does it send clients back to itself
            found = zombie.request(
                ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(group), deadline=time.monotonic() + 30
            )
            assert (found.error_code, found.node_id) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1)
        finally:
            faults.zk_proxy.blackhole(False)
            faults.inter_proxy.blackhole(False)
        # asked of the others: the cut-off broker's own metadata is its old view until it has caught up
        cs.until(
            lambda: _isr_full(cluster, OFFSETS, others) and _isr_full(cluster, "stale", others),
            90,
            "the cut-off broker back in the ISR",
        )
        # a follower now (or, were it the preferred leader again, leading with the group's new offset)
        assert _offset_fetch(zombie, group) in ((ErrorCode.NOT_COORDINATOR, -1), (ErrorCode.NONE, 20))
    consumer = Consumer({"bootstrap.servers": cs.bootstrap(cluster), "group.id": group})
    try:
        assert [tp.offset for tp in consumer.committed([TopicPartition("stale", 0)], 30)] == [20]
    finally:
        consumer.close()


def test_killing_the_controller_and_then_a_leader_elects_a_new_leader(faults: Faults) -> None:
    cluster = faults.cluster
    _create(cluster, NewTopic("ctl", 3, 3))
    writer = Writer("ctl", cluster.bootstrap, "ctl", [0, 1, 2]).start()
    try:
        writer.wait_progress(300)
        controller = _controller(cluster)
        partition, leader = next(
            (p, s[0]) for p, s in sorted(cs.view(cluster, "ctl").items()) if s[0] != controller
        )
        cluster.brokers[controller].kill()
        cluster.brokers[leader].kill()  # while no new controller is there yet
        survivor = next(b for b in cluster.brokers if b not in (controller, leader))
        cluster.brokers[controller].start(timeout=30)  # back, but its old session must expire first
        cs.until(
            lambda: cs.view(cluster, "ctl", [survivor]).get(partition, (-1,))[0] not in (-1, leader),
            60,
            f"a new leader of ctl-{partition} (not {leader})",
        )
        writer.wait_progress(300, partition=partition)  # writes go on there (the ISR is 2 again)
        cluster.brokers[leader].start(timeout=30)
        cluster.wait_for_brokers(3)
        cs.until(lambda: _isr_full(cluster, "ctl"), 60, "every replica of ctl back in sync")
        assert _controller(cluster) in (1, 2, 3)
    finally:
        writer.stop()
    assert writer.failed == []
    _check(cluster, "ctl", [writer])
    _wait_identical(cluster, "ctl", [0, 1, 2])


def test_a_leader_paused_past_its_session_acknowledges_nothing_and_rejoins(faults: Faults) -> None:
    cluster = faults.cluster
    _create(cluster, NewTopic("paused", 2, 3))
    controller = _controller(cluster)
    partition, leader = next(
        (p, s[0]) for p, s in sorted(cs.view(cluster, "paused").items()) if s[0] != controller
    )
    others = [b for b in cluster.brokers if b != leader]
    writer = Writer("all", cluster.bootstrap, "paused", [0, 1]).start()
    pinned = Writer("pinned", cluster.brokers[leader].bootstrap, "paused", [partition]).start()
    host, port = cluster.brokers[leader].bootstrap.split(":")
    raw = KafkaConnection.open(host, int(port), timeout=30)
    raw_values = [[f"raw-{i:08d}".encode() for i in range(j * 5, j * 5 + 5)] for j in range(3)]
    acked_raw: list[bytes] = []
    try:
        writer.wait_progress(200)
        pinned.wait_progress(50)
        cluster.brokers[leader].pause()
        try:
            for values in raw_values:  # they wait in the socket until the leader runs again
                _raw_send(raw, "paused", partition, values, timeout_ms=20_000)
            cs.until(
                lambda: cs.view(cluster, "paused", others).get(partition, (-1,))[0] in others,
                60,
                f"a new leader of paused-{partition}",
            )
            _produce_to_leader(cluster, "paused", partition, others, acked_raw)  # writes go on
        finally:
            cluster.brokers[leader].resume()
        answers = [_raw_answer(raw, 60) for _ in raw_values]
        assert set(answers) <= {
            ErrorCode.NONE,
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
            ErrorCode.REQUEST_TIMED_OUT,
        }, answers
        cs.until(
            lambda: cs.view(cluster, "paused", [leader]).get(partition, (leader,))[0] not in (-1, leader),
            60,
            f"broker {leader} to step down (its own metadata naming the new leader)",
        )
        acked_raw += [
            v
            for values, code in zip(raw_values, answers, strict=True)
            if code == ErrorCode.NONE
            for v in values
        ]
        cs.until(lambda: _isr_full(cluster, "paused"), 60, "the paused leader back in the ISR")
        pinned.wait_progress(50)  # the pinned producer found the new leader
    finally:
        raw.close()
        writer.stop()
        pinned.stop()
    assert writer.failed == []
    assert pinned.failed == []
    _check(cluster, "paused", [writer, pinned], acked_raw)
    _wait_identical(cluster, "paused", [0, 1])


def test_a_leader_cut_off_from_zookeeper_and_its_followers_steps_down_and_rejoins(faults: Faults) -> None:
    cluster = faults.cluster
    others = [b for b in cluster.brokers if b != VICTIM]
    _create(cluster, NewTopic("cut", 2, replica_assignment=[[VICTIM, *others], [*others, VICTIM]]))
    writer = Writer("all", cluster.bootstrap, "cut", [0, 1]).start()
    host, port = cluster.brokers[VICTIM].bootstrap.split(":")
    acked_raw: list[bytes] = []
    try:
        writer.wait_progress(200)
        raw = KafkaConnection.open(host, int(port), timeout=30)
        faults.zk_proxy.blackhole(True)
        faults.inter_proxy.blackhole(True)
        try:
            cs.until(
                lambda: cs.view(cluster, "cut", others).get(0, (-1,))[0] in others,
                60,
                "a new leader of cut-0 on the majority side",
            )
            # the old leader still takes the produce, but can neither replicate it nor shrink the ISR
            cut_off = [b"raw-cut-00000000", b"raw-cut-00000001"]
            _raw_send(raw, "cut", 0, cut_off, timeout_ms=3000)
            assert _raw_answer(raw, 30) in (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            _produce_to_leader(cluster, "cut", 0, others, acked_raw)  # the majority side takes writes
        finally:
            faults.zk_proxy.blackhole(False)
            faults.inter_proxy.blackhole(False)
            raw.close()
        # the cut-off broker's own view stays stale (leader 3, full ISR) until its new session reads the
        # states again, as a ZooKeeper-mode Kafka broker's metadata cache does: ask the majority side
        cs.until(lambda: _isr_full(cluster, "cut", others), 90, "the cut-off leader back in the ISR")
        cs.until(
            lambda: cs.view(cluster, "cut", [VICTIM]).get(0, (VICTIM,))[0] in others,
            60,
            f"broker {VICTIM} to step down (its own metadata naming the new leader)",
        )
        writer.wait_progress(200)
    finally:
        writer.stop()
    assert writer.failed == []
    _check(cluster, "cut", [writer], acked_raw)
    _wait_identical(cluster, "cut", [0, 1])


def test_power_loss_of_a_follower_and_then_of_a_leader_keeps_every_acknowledged_record(
    faults: Faults,
) -> None:
    cluster = faults.cluster
    rng = random.Random(20240607)
    _create(cluster, NewTopic("power", 2, 3))
    writer = Writer("all", cluster.bootstrap, "power", [0, 1]).start()
    try:
        writer.wait_progress(300)
        leader, replicas, _ = cs.view(cluster, "power")[0]
        follower = next(b for b in replicas if b != leader)
        for victim in (follower, leader):
            cluster.brokers[victim].kill()
            power_loss(cluster.brokers[victim].data_dir, faults.ledgers[victim], rng)
            writer.wait_progress(200, partition=0)  # the others go on (a new leader when it led)
            cluster.brokers[victim].start(timeout=30)
            cluster.wait_for_brokers(3)
            cs.until(
                lambda: _isr_full(cluster, "power"), 60, f"broker {victim} back in the ISR after power loss"
            )
            writer.wait_progress(200)
    finally:
        writer.stop()
    assert writer.failed == []
    _check(cluster, "power", [writer])
    _wait_identical(cluster, "power", [0, 1])


def test_a_zookeeper_restart_under_load_loses_nothing(faults: Faults) -> None:
    cluster = faults.cluster
    _create(cluster, NewTopic("zkrestart", 2, 3))
    writer = Writer("all", cluster.bootstrap, "zkrestart", [0, 1]).start()
    try:
        writer.wait_progress(300)
        faults.zookeeper.restart()
        writer.wait_progress(500)
        cs.until(lambda: _every_isr_full(cluster), 60, "every ISR full after the ZooKeeper restart")
        _create(cluster, NewTopic("after-zk", 1, 3))  # the cluster still changes state
        writer.wait_progress(200)
    finally:
        writer.stop()
    assert writer.failed == []
    _check(cluster, "zkrestart", [writer])
    _wait_identical(cluster, "zkrestart", [0, 1])


class GroupReader:
    """A consumer in group `group` that commits synchronously as it goes, keeping what it read and the
    last commit that succeeded."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        self.consumer.subscribe([topic])
        self.topic = topic
        self.read: dict[int, list[tuple[int, bytes]]] = collections.defaultdict(list)
        self.committed: dict[int, int] = {}
        self.commit_failures = 0
        self.jumps: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="group-reader")

    def start(self) -> GroupReader:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        assert not self._thread.is_alive()

    def _commit(self, positions: dict[int, int]) -> None:
        try:
            self.consumer.commit(
                offsets=[TopicPartition(self.topic, p, o) for p, o in positions.items()], asynchronous=False
            )
        except KafkaException:
            self.commit_failures += 1
            return
        self.committed.update(positions)

    def _run(self) -> None:
        pending: dict[int, int] = {}
        last_commit = time.monotonic()
        try:
            while not self._stop.is_set():
                message = self.consumer.poll(0.2)
                if message is not None and message.error() is None:
                    partition, offset = message.partition(), message.offset()
                    previous = self.read[partition][-1][0] if self.read[partition] else -1
                    if offset != previous + 1 and offset != self.committed.get(partition, 0):
                        # a rewind must go back to a commit that succeeded, never skip or go further back
                        self.jumps.append(f"{partition}: {previous} -> {offset}, committed {self.committed}")
                    value = message.value()
                    assert value is not None
                    self.read[partition].append((offset, value))
                    pending[partition] = offset + 1
                if pending and time.monotonic() - last_commit > 0.5:
                    self._commit(pending)
                    pending = {}
                    last_commit = time.monotonic()
            while pending:
                self._commit(pending)
                if all(self.committed.get(p) == o for p, o in pending.items()):
                    break
                time.sleep(0.5)
        finally:
            self.consumer.close()


def test_a_rolling_restart_under_load_fails_no_produce_and_consumers_resume(faults: Faults) -> None:
    cluster = faults.cluster
    _create(cluster, NewTopic("rolling", 3, 3))
    writer = Writer("all", cluster.bootstrap, "rolling", [0, 1, 2], message_timeout_ms=300_000).start()
    group = f"rolling-{uuid.uuid4().hex[:6]}"
    reader = GroupReader(cluster.bootstrap, group, "rolling").start()
    try:
        writer.wait_progress(300)
        for broker_id, broker in cluster.brokers.items():
            assert broker.stop() == 0, f"broker {broker_id} did not stop cleanly:\n{broker.log()}"
            writer.wait_progress(100, timeout=60)  # the others take the writes meanwhile
            broker.start(timeout=30)
            cluster.wait_for_brokers(3)
            cs.until(
                lambda: _every_isr_full(cluster), 90, f"every ISR full after restarting broker {broker_id}"
            )
        writer.wait_progress(300)
    finally:
        writer.stop()
        reader.stop()
    assert writer.failed == [], f"{len(writer.failed)} produce failures: {writer.failed[:3]}"
    log = _check(cluster, "rolling", [writer])
    assert sorted(reader.committed) == sorted(log), "the group member committed every partition"
    assert reader.jumps == [], f"the consumer skipped or rewound past its commits: {reader.jumps[:3]}"

    # a new member of the group resumes exactly where the first one committed, and reads the rest
    resumed = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        committed = resumed.committed([TopicPartition("rolling", p) for p in log], timeout=30)
        assert {tp.partition: tp.offset for tp in committed} == reader.committed
        resumed.subscribe(["rolling"])
        first: dict[int, int] = {}
        count = 0
        remaining = sum(len(log[p]) - reader.committed[p] for p in log)
        deadline = time.monotonic() + 60
        while count < remaining and time.monotonic() < deadline:
            message = resumed.poll(0.5)
            if message is None or message.error() is not None:
                continue
            first.setdefault(message.partition(), message.offset())
            count += 1
        assert count == remaining
        assert all(first[p] == reader.committed[p] for p in first)
    finally:
        resumed.close()
    for partition, records in log.items():  # the first member read everything below its commits, in order
        seen = dict(reader.read[partition])
        assert [seen.get(o) for o in range(reader.committed[partition])] == [
            v for _, v in records[: reader.committed[partition]]
        ]

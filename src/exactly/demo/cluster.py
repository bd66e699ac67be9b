"""`exactly demo --brokers N` (N >= 3): the demo on a replicated cluster, and the broker kills it runs.

`DemoCluster` is one ZooKeeper (`exactly.testing.zookeeper.ZooKeeperProcess`, ``<work>/zookeeper``) and N
brokers (`exactly.testing.cluster.ClusterProcesses`, ids 1..N, ``<work>/cluster/broker-<id>``; replication
factor 3, min.insync.replicas 2, the internal topics too). Its views come from Metadata only (confluent-kafka
``list_topics``): who leads which partition, and so which broker coordinates a transactional id (the
leader of its `__transaction_state` partition, `partition_for(id, 50)`) — never from a coordinator admin
call, which librdkafka 2.16 can abort on while a broker dies.

The kills (`exactly.demo.runner` decides when): first the broker that leads the busiest input partitions
(the most records under its leadership, `busiest_leader`); once producer and sink commits went on without
it, it is restarted and, once every replica is back in sync, the broker that coordinates the sink's
transactions (the sink's transactional ids live in their query id's partition, see
`exactly.txn.placement.placement_key`) is killed the same way, if it is another broker. A kill's pause is
the gap between the last successful commit before it and the first after it (`commit_gap`), for the
replay's producer commits and for the sink's (the checkpoint's ``commits/N`` files) apart, with the time
from the kill to the first commit after it (`first_after`; the gap also holds idle time before the kill,
when the replay waited for the job).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exactly.demo import DemoError
from exactly.demo.topics import LIBRDKAFKA_LOG, REQUEST_TIMEOUT
from exactly.group.partitioning import partition_for
from exactly.testing.cluster import ClusterProcesses
from exactly.testing.processes import child_env, tail
from exactly.testing.zookeeper import ZooKeeperNotInstalled, ZooKeeperProcess
from exactly.txn.placement import placement_key

TRANSACTION_STATE_TOPIC = "__transaction_state"
TRANSACTION_STATE_PARTITIONS = 50  # transaction.state.log.num.partitions (the default)
START_TIMEOUT = 90.0
SESSION_TIMEOUT_MS = 6000

log = logging.getLogger("exactly.demo.cluster")

Leaders = dict[str, dict[int, int]]  # topic -> partition -> leader broker id (-1: none)


@dataclass(frozen=True, slots=True)
class BrokerKill:
    """One broker killed -9 and restarted by the cluster demo."""

    broker: int
    why: str  # "leader of the busiest input partitions" | "coordinator of the sink's transactions"
    batch: int | None  # the micro-batch in flight at the kill
    led: tuple[str, ...]  # what it led: "flights-2", ... (the demo's topics)
    coordinated: tuple[str, ...]  # the transactional ids (or the sink's query) it was coordinator of
    # seconds from the kill to the first commit after it (None: none came), and between the last commit
    # before the kill and that one (which includes any idle time before the kill: back-pressure)
    producer_resumed: float | None  # the replay's transactions
    producer_gap: float | None
    sink_resumed: float | None  # the sink's batch decisions (micro-batches committed)
    sink_gap: float | None
    down_seconds: float  # killed until restarted and listening again


def busiest_leader(leaders: Mapping[int, int], records: Mapping[int, int]) -> int:
    """The broker leading the most records of a topic (`leaders`: partition -> leader; `records`:
    partition -> records); ties go to the broker leading more partitions, then to the lowest id."""
    load: dict[int, tuple[int, int]] = {}
    for partition, leader in leaders.items():
        if leader < 0:
            continue
        total, count = load.get(leader, (0, 0))
        load[leader] = (total + records.get(partition, 0), count + 1)
    if not load:
        raise ValueError("no partition has a leader")
    return min(load, key=lambda b: (-load[b][0], -load[b][1], b))


def commit_gap(times: Iterable[float], at: float) -> float | None:
    """The gap between the last commit at or before `at` and the first after it (None when none came after;
    from `at` itself when none came before)."""
    before = after = None
    for t in times:
        if t <= at:
            before = t if before is None else max(before, t)
        else:
            after = t if after is None else min(after, t)
    if after is None:
        return None
    return after - (before if before is not None else at)


def first_after(times: Iterable[float], at: float) -> float | None:
    """Seconds from `at` to the first commit after it (None when none came)."""
    after = [t for t in times if t > at]
    return min(after) - at if after else None


def coordinator_partition(transactional_id: str) -> int:
    return partition_for(placement_key(transactional_id), TRANSACTION_STATE_PARTITIONS)


def led_by(leaders: Leaders, broker: int, topics: Sequence[str]) -> tuple[str, ...]:
    """``topic-partition`` names of `topics` that `broker` leads."""
    return tuple(
        f"{topic}-{p}"
        for topic in topics
        for p, leader in sorted(leaders.get(topic, {}).items())
        if leader == broker
    )


def coordinated_by(leaders: Leaders, broker: int, ids: Mapping[str, str]) -> tuple[str, ...]:
    """The names (`ids`: name -> transactional id or query id) whose coordinator `broker` is."""
    state = leaders.get(TRANSACTION_STATE_TOPIC, {})
    return tuple(name for name, key in ids.items() if state.get(coordinator_partition(key)) == broker)


class DemoCluster:
    """ZooKeeper and `brokers` exactly brokers for the demo, under `root`."""

    def __init__(self, root: Path, brokers: int) -> None:
        self.root = root
        self.zookeeper = ZooKeeperProcess(root / "zookeeper")
        self.processes: ClusterProcesses | None = None
        self.size = brokers

    @property
    def cluster(self) -> ClusterProcesses:
        if self.processes is None:
            raise DemoError("the cluster is not started")
        return self.processes

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    def describe(self) -> str:
        ids = ", ".join(f"{b}: {p.bootstrap}" for b, p in self.cluster.brokers.items())
        return f"ZooKeeper on {self.zookeeper.connect_string}, brokers {ids}"

    def start(self) -> None:
        try:
            self.zookeeper.start(timeout=START_TIMEOUT)
        except ZooKeeperNotInstalled as e:
            raise DemoError(f"--brokers needs ZooKeeper: {e}") from None
        except (RuntimeError, TimeoutError) as e:
            raise DemoError(f"ZooKeeper did not start: {' '.join(str(e).split())[-500:]}") from None
        self.processes = ClusterProcesses(
            self.root / "cluster",
            self.zookeeper.connect_string,
            self.size,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            log_level="WARNING",
        )
        env = child_env()
        for broker in self.processes.brokers.values():
            broker.env = env
        try:
            self.processes.start(timeout=START_TIMEOUT)
        except (RuntimeError, TimeoutError) as e:
            logs = " ".join(tail(b.log_path, 300) for b in self.processes.brokers.values())
            raise DemoError(f"the cluster did not start: {e}: {' '.join(logs.split())}") from None

    def kill(self, broker: int) -> None:
        self.cluster.brokers[broker].kill(timeout=30)

    def restart(self, broker: int) -> None:
        """Start a killed broker again on its data directory and port; wait until every broker is listed."""
        process = self.cluster.brokers[broker]
        try:
            process.start(timeout=START_TIMEOUT)
            self.cluster.wait_for_brokers(self.size, START_TIMEOUT)
        except (RuntimeError, TimeoutError) as e:
            raise DemoError(
                f"broker {broker} did not come back: {e}: {tail(process.log_path, 500)}"
            ) from None

    def running_bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.cluster.running())

    def leaders(self, topics: Sequence[str]) -> tuple[Leaders, dict[str, dict[int, int]]]:
        """From the running brokers' Metadata: per topic, partition -> leader and partition -> ISR size."""
        metadata = _admin(self.running_bootstrap()).list_topics(timeout=REQUEST_TIMEOUT)
        leaders: Leaders = {}
        isr: dict[str, dict[int, int]] = {}
        for topic in topics:
            info = metadata.topics.get(topic)
            if info is None or info.error is not None:
                continue
            leaders[topic] = {p.id: p.leader for p in info.partitions.values()}
            isr[topic] = {p.id: len(p.isrs) for p in info.partitions.values()}
        return leaders, isr

    def in_sync(self, topics: Sequence[str]) -> bool:
        """Every partition of `topics` has every broker of its replica set (three) in its ISR."""
        try:
            leaders, isr = self.leaders(topics)
        except Exception as e:  # noqa: BLE001 - a metadata timeout: not yet
            log.info("metadata: %s", e)
            return False
        wanted = min(3, self.size)
        return all(t in isr for t in topics) and all(
            n >= wanted and leaders[t][p] >= 0 for t, parts in isr.items() for p, n in parts.items()
        )

    def wait_in_sync(self, topics: Sequence[str], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self.in_sync(topics):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.5)
        return True

    def stop(self) -> None:
        if self.processes is not None:
            self.processes.stop()
        self.zookeeper.stop()

    def abandon(self) -> None:
        """After a failure: kill everything (the work directory stays for its logs)."""
        if self.processes is not None:
            for broker in self.processes.brokers.values():
                if broker.running:
                    broker.kill()
        if self.zookeeper.running:
            self.zookeeper.kill()


def _admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "logger": LIBRDKAFKA_LOG}
    return AdminClient(config)

"""A replicated exactly cluster of real processes on loopback: brokers (`exactly serve`) joined through
one ZooKeeper, each with its own data directory and port. Used by the cluster tests, the cluster
benchmark and `exactly cluster up`.

The defaults are the ones a cluster of three wants: replication factor 3 (at most the brokers),
`min.insync.replicas` 2, the internal topics replicated the same way.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType

from exactly.testing.processes import BrokerProcess, free_port

__all__ = ["ClusterProcesses", "cluster_settings"]


def cluster_settings(
    broker_id: int,
    zookeeper_connect: str,
    brokers: int,
    *,
    session_timeout_ms: int = 6000,
    rack: str | None = None,
) -> list[str]:
    """The `--set` items of one broker of a cluster of `brokers`."""
    rf = min(3, brokers)
    settings = [
        f"broker.id={broker_id}",
        f"zookeeper.connect={zookeeper_connect}",
        f"zookeeper.session.timeout.ms={session_timeout_ms}",
        f"default.replication.factor={rf}",
        f"min.insync.replicas={min(2, rf)}",
        f"offsets.topic.replication.factor={rf}",
        f"transaction.state.log.replication.factor={rf}",
        f"transaction.state.log.min.isr={min(2, rf)}",
        "replica.lag.time.max.ms=10000",
        "controlled.shutdown.retry.backoff.ms=1000",
        "group.initial.rebalance.delay.ms=0",
    ]
    if rack is not None:
        settings.append(f"broker.rack={rack}")
    return settings


class ClusterProcesses:
    """`brokers` exactly brokers (ids 1..n) on ZooKeeper at `zookeeper_connect`, under `root`."""

    def __init__(
        self,
        root: Path,
        zookeeper_connect: str,
        brokers: int = 3,
        *settings: str,
        session_timeout_ms: int = 6000,
        racks: Sequence[str] | None = None,
        log_level: str | None = None,
        detached: bool = False,
    ) -> None:
        """`detached`: the brokers outlive this process (see `BrokerProcess`)."""
        self.root = root
        self.zookeeper_connect = zookeeper_connect
        self.brokers: dict[int, BrokerProcess] = {}
        for broker_id in range(1, brokers + 1):
            rack = racks[(broker_id - 1) % len(racks)] if racks else None
            items = cluster_settings(
                broker_id, zookeeper_connect, brokers, session_timeout_ms=session_timeout_ms, rack=rack
            )
            self.brokers[broker_id] = BrokerProcess(
                root / f"broker-{broker_id}" / "data",
                *items,
                *settings,
                port=free_port(),
                log_level=log_level,
                log_path=root / f"broker-{broker_id}.log",
                detached=detached,
            )
            (root / f"broker-{broker_id}").mkdir(parents=True, exist_ok=True)

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def running(self) -> Iterator[BrokerProcess]:
        return (b for b in self.brokers.values() if b.running)

    def start(self, timeout: float = 60.0) -> ClusterProcesses:
        for broker in self.brokers.values():
            if not broker.running:
                broker.start()
        self.wait_for_brokers(len(self.brokers), timeout)
        return self

    def wait_for_brokers(self, count: int, timeout: float = 60.0) -> None:
        """Until the running brokers' Metadata lists `count` brokers."""
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + timeout
        seen: set[int] = set()
        while time.monotonic() < deadline:
            bootstrap = ",".join(b.bootstrap for b in self.running())
            if bootstrap:
                try:
                    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=5)
                    seen = set(metadata.brokers)
                    if len(seen) == count and metadata.controller_id >= 0:
                        return
                except Exception:  # noqa: BLE001 (not up yet)
                    pass
            time.sleep(0.2)
        raise TimeoutError(f"the cluster shows brokers {sorted(seen)}, not {count}, after {timeout:.0f} s")

    def stop(self) -> None:
        for broker in self.brokers.values():
            if broker.running:
                try:
                    broker.stop()
                except Exception:  # noqa: BLE001 (stop the others anyway)
                    broker.kill()

    def __enter__(self) -> ClusterProcesses:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

"""Helpers the cluster test modules share: waiting for a condition, the cluster's view of a topic's
partitions (leader, replicas, ISR) through confluent-kafka, and a replica's segment bytes on disk."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from exactly.testing.cluster import ClusterProcesses

Partitions = dict[int, tuple[int, list[int], list[int]]]  # partition -> (leader, replicas, ISR)


def until(condition: Callable[[], object], timeout: float, what: str) -> None:
    """Poll `condition` until it is true; a LookupError counts as not yet (a broker's view may not show
    a topic just created elsewhere)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except LookupError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def bootstrap(cluster: ClusterProcesses, via: Sequence[int] | None = None) -> str:
    """The bootstrap servers of the brokers `via` (default: the running ones)."""
    ids = via if via is not None else [b for b, p in cluster.brokers.items() if p.running]
    return ",".join(cluster.brokers[b].bootstrap for b in ids)


def admin(cluster: ClusterProcesses, via: Sequence[int] | None = None) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap(cluster, via)})


def view(cluster: ClusterProcesses, topic: str, via: Sequence[int] | None = None) -> Partitions:
    """The topic's partitions as the brokers `via` see them ({} when they do not show it)."""
    try:
        metadata = admin(cluster, via).list_topics(topic, timeout=5)
    except KafkaException:
        return {}
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        return {}
    return {p.id: (p.leader, list(p.replicas), list(p.isrs)) for p in found.partitions.values()}


def partitions(cluster: ClusterProcesses, topic: str, via: Sequence[int] | None = None) -> Partitions:
    """The topic's partitions, waiting (up to 30 s) until the brokers asked show it."""
    deadline = time.monotonic() + 30
    while not (found := view(cluster, topic, via)):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after 30 s waiting for the metadata of {topic}")
        time.sleep(0.2)
    return found


def segments(cluster: ClusterProcesses, broker_id: int, topic: str, partition: int) -> bytes:
    """A replica's segment files, concatenated: replicas below the high watermark are byte-identical."""
    directory = cluster.brokers[broker_id].data_dir / f"{topic}-{partition}"
    return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))

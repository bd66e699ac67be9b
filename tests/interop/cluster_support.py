"""Helpers the cluster test modules share: waiting for a condition, the cluster's view of a topic's
partitions (leader, replicas, ISR) through confluent-kafka, and a replica's segment bytes on disk."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from exactly.spark.admin import LEADERSHIP_MOVING
from exactly.testing.cluster import ClusterProcesses

Partitions = dict[int, tuple[int, list[int], list[int]]]  # partition -> (leader, replicas, ISR)


def until(
    condition: Callable[[], object],
    timeout: float,
    what: str,
    *,
    retry_on: tuple[type[BaseException], ...] = (LookupError,),
) -> None:
    """Poll `condition` until it is true. An exception of `retry_on` counts as not yet (by default a
    LookupError: a broker's view may not show a topic just created elsewhere); the last one is named if
    time runs out."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except retry_on as e:
            last = e
        time.sleep(0.2)
    suffix = f" (last error: {last!r})" if last is not None else ""
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}{suffix}")


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


def high_watermark(consumer: Consumer, topic: str, partition: int, timeout: float = 30) -> int:
    """A partition's high watermark, asked again while its leadership moves: a leader elected a moment
    ago answers OFFSET_NOT_AVAILABLE until its high watermark reaches the start of its epoch (as Kafka's
    does), and confluent-kafka's `get_watermark_offsets` hands that error over rather than retrying."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            _, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=10, cached=False
            )
            return int(high)
        except KafkaException as e:
            if e.args[0].code() not in LEADERSHIP_MOVING or time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def read_committed(cluster: ClusterProcesses, topic: str, timeout: float = 60) -> list[bytes]:
    """Every record a read_committed consumer sees, read up to each partition's end (no open
    transaction may remain)."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": f"check-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    # The ends are the high watermarks (a read_committed consumer's watermarks would be the LSOs, below
    # any transaction still open: the read would end before its markers are written).
    ends_reader = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": "ends", "isolation.level": "read_uncommitted"}
    )
    try:
        count = len(partitions(cluster, topic))
        ends = {p: high_watermark(ends_reader, topic, p) for p in range(count)}
        ends_reader.close()
        consumer.assign([TopicPartition(topic, p, 0) for p in range(count)])
        seen: list[bytes] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.append(message.value())
            positions = consumer.position([TopicPartition(topic, p) for p in range(count)])
            if all(tp.offset >= ends[tp.partition] for tp in positions if ends[tp.partition] > 0):
                return seen
        raise AssertionError(f"read_committed did not reach the end of {topic}: {positions} < {ends}")
    finally:
        consumer.close()

"""CreateTopics and CreatePartitions are all or nothing (issue 14): a create the broker cannot serve (here:
the open-file limit runs out half-way) answers a per-topic error and leaves no trace, the broker keeps
serving; a crash in the middle of a create is repaired at start-up, with one line saying so."""

from __future__ import annotations

import resource
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from exactly.broker.config import _BROKER_KEYS
from exactly.errors import ErrorCode
from exactly.testing.processes import BrokerProcess
from tests.interop.support import running_broker

pytestmark = pytest.mark.interop

NOFILE = 256  # each partition holds a descriptor (its log segment): a 400-partition topic cannot be made
# Where segment descriptors are a budget (an LRU, `exactly.log.max.open.files`), a budget above the open-file
# limit stands for the way such a create still fails: the disk or the process refusing a file.
OVER_BUDGET = tuple(
    "exactly.log.max.open.files=1000000" for key in _BROKER_KEYS if key == "exactly.log.max.open.files"
)


def partition_dirs(data_dir: Path, topic: str) -> list[str]:
    return sorted(p.name for p in data_dir.iterdir() if p.name.rsplit("-", 1)[0] == topic)


def create_error(admin: AdminClient, topic: NewTopic) -> KafkaException:
    with pytest.raises(KafkaException) as info:
        admin.create_topics([topic], operation_timeout=20)[topic.topic].result(timeout=60)
    return info.value


def test_a_create_that_runs_out_of_file_descriptors_leaves_no_trace(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = BrokerProcess(data, *OVER_BUDGET, nofile=NOFILE).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        error = create_error(admin, NewTopic("big", 400, 1))
        assert error.args[0].code() == ErrorCode.KAFKA_STORAGE_ERROR
        assert "cannot create partition" in error.args[0].str()
        assert "big" not in admin.list_topics(timeout=20).topics
        assert partition_dirs(data, "big") == []
        # the broker keeps serving: a topic that fits is made, and grows within the budget
        admin.create_topics([NewTopic("small", 2, 1)])["small"].result(timeout=60)
        with pytest.raises(KafkaException) as grown:
            admin.create_partitions([NewPartitions("small", 400)])["small"].result(timeout=60)
        assert grown.value.args[0].code() == ErrorCode.KAFKA_STORAGE_ERROR
        assert len(admin.list_topics(timeout=20).topics["small"].partitions) == 2
        assert partition_dirs(data, "small") == ["small-0", "small-1"]
        admin.create_partitions([NewPartitions("small", 5)])["small"].result(timeout=60)
        assert len(admin.list_topics(timeout=20).topics["small"].partitions) == 5
        warnings = [line for line in broker.log().splitlines() if "nothing was created" in line]
        assert len(warnings) == 2
    finally:
        broker.stop()
    # and it starts again, with exactly what was created
    broker = BrokerProcess(data, *OVER_BUDGET, port=broker.port, nofile=NOFILE).start()
    try:
        topics = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=20).topics
        assert "big" not in topics
        assert len(topics["small"].partitions) == 5
    finally:
        broker.stop()


def test_a_crash_in_the_middle_of_a_create_is_repaired_at_start_up(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = BrokerProcess(data, "exactly.debug.create.crash.after.partitions=3").start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("half", 6, 1)], operation_timeout=5)
    assert broker.proc is not None
    assert broker.proc.wait(30) == 17
    assert partition_dirs(data, "half") == ["half-0", "half-1", "half-2"]
    with running_broker(data, port=broker.port) as restarted:
        admin = AdminClient({"bootstrap.servers": restarted.bootstrap})
        assert "half" not in admin.list_topics(timeout=20).topics
        assert partition_dirs(data, "half") == []
        repaired = [line for line in restarted.log().splitlines() if "interrupted" in line]
        assert len(repaired) == 1  # one line for the topic
        assert "removed 3 logs of half (partitions 0-2): the topic does not exist" in repaired[0]
        admin.create_topics([NewTopic("half", 6, 1)])["half"].result(timeout=60)
        assert len(admin.list_topics(timeout=20).topics["half"].partitions) == 6


def test_a_crash_in_the_middle_of_create_partitions_is_repaired_at_start_up(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = BrokerProcess(data, "exactly.debug.create.crash.after.partitions=3").start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("grow", 2, 1)])["grow"].result(timeout=60)  # 2 < 3: no crash
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for partition in (0, 1):
        producer.produce("grow", f"kept-{partition}".encode(), partition=partition)
    assert producer.flush(30) == 0
    del producer  # no reconnect attempts while the broker is down
    admin.create_partitions([NewPartitions("grow", 8)], operation_timeout=5)
    assert broker.proc is not None
    assert broker.proc.wait(30) == 17
    assert partition_dirs(data, "grow") == [f"grow-{p}" for p in range(5)]
    with running_broker(data, port=broker.port) as restarted:
        admin = AdminClient({"bootstrap.servers": restarted.bootstrap})
        assert len(admin.list_topics(timeout=20).topics["grow"].partitions) == 2
        assert partition_dirs(data, "grow") == ["grow-0", "grow-1"]
        repaired = [line for line in restarted.log().splitlines() if "interrupted" in line]
        assert len(repaired) == 1
        assert "removed 3 logs of grow (partitions 2-4): the topic has 2 partitions" in repaired[0]
        consumer = Consumer(
            {"bootstrap.servers": restarted.bootstrap, "group.id": "g", "auto.offset.reset": "earliest"}
        )
        try:
            consumer.subscribe(["grow"])
            seen: set[bytes] = set()
            deadline = time.monotonic() + 60
            while len(seen) < 2 and time.monotonic() < deadline:
                message = consumer.poll(1.0)
                if message is not None and message.error() is None:
                    seen.add(message.value())
            assert seen == {b"kept-0", b"kept-1"}  # the records of the partitions that existed are intact
        finally:
            consumer.close()


CONFIGS = {  # each stored in the topic's metadata record: a record of ~400 bytes
    "retention.ms": "604800001",
    "segment.ms": "604800002",
    "max.message.bytes": "1048589",
    "min.cleanable.dirty.ratio": "0.51",
    "delete.retention.ms": "86400001",
    "segment.index.bytes": "10485761",
    "file.delete.delay.ms": "60001",
    "flush.messages": "9223372036854775806",
    "message.timestamp.type": "LogAppendTime",
    "cleanup.policy": "compact,delete",
}


def test_a_create_whose_metadata_record_the_disk_refuses_leaves_no_trace(tmp_path: Path) -> None:
    """The disk refuses the metadata record half-way (a real short write: RLIMIT_FSIZE set on the running
    broker, as a full disk would): KAFKA_STORAGE_ERROR, no logs, and the records after it still load."""
    data = tmp_path / "data"
    broker = BrokerProcess(data, log_level="WARNING").start()
    assert broker.proc is not None
    metadata_file = data / "__cluster_metadata.log"
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        # grow the metadata file past the broker's own log file, so the limit below refuses only the former
        pumped = 0
        while metadata_file.stat().st_size < broker.log_path.stat().st_size + 2000:
            admin.create_topics([NewTopic(f"p{pumped}", 1, 1, config=CONFIGS)])[f"p{pumped}"].result(
                timeout=60
            )
            pumped += 1
        size = metadata_file.stat().st_size
        resource.prlimit(broker.proc.pid, resource.RLIMIT_FSIZE, (size + 200, resource.RLIM_INFINITY))
        error = create_error(admin, NewTopic("refused", 2, 1, config=CONFIGS))
        assert error.args[0].code() == ErrorCode.KAFKA_STORAGE_ERROR
        assert "cannot record topic 'refused'" in error.args[0].str()
        assert metadata_file.stat().st_size == size  # the short write was cut off again
        assert partition_dirs(data, "refused") == []
        admin.create_topics([NewTopic("fits", 1, 1)])["fits"].result(timeout=60)  # ~100 bytes: room for it
        topics = admin.list_topics(timeout=20).topics
        assert "refused" not in topics
        assert "fits" in topics
        resource.prlimit(
            broker.proc.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
        )
        del admin  # no reconnect attempts while the broker is down
    finally:
        broker.stop()
    with running_broker(data, port=broker.port) as restarted:  # before the fix: a torn line, then "fits"
        topics = AdminClient({"bootstrap.servers": restarted.bootstrap}).list_topics(timeout=20).topics
        assert "refused" not in topics
        assert len(topics["fits"].partitions) == 1
        assert len([t for t in topics if t.startswith("p")]) == pumped

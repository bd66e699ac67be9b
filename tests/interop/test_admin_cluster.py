"""The cluster-shaped admin APIs a one-node broker answers (issue 10.4), through the real admin clients
and, for what no client sends (bad election types, old versions, raw cursors), our own codecs.

DescribeLogDirs reports the sizes of the segment files on disk (and they grow after producing);
ElectLeaders answers ELECTION_NOT_NEEDED; reassigning to [this node] is a no-op and anything else
INVALID_REPLICA_ASSIGNMENT; no reassignment is ever listed; DescribeTopicPartitions pages by partition
count with Kafka's cursor.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from exactly.protocol.messages.api_versions import ApiVersionsRequest
from exactly.protocol.messages.describe_log_dirs import DescribableLogDirTopic, DescribeLogDirsRequest
from exactly.protocol.messages.describe_topic_partitions import (
    Cursor,
    DescribeTopicPartitionsRequest,
    TopicRequest,
)
from exactly.protocol.messages.elect_leaders import ElectLeadersRequest, TopicPartitions
from exactly.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsTopics,
)
from exactly.testing.processes import BrokerProcess
from tests.interop.client import RawClient
from tests.interop.support import create_topic, running_broker

pytestmark = pytest.mark.interop

TIMEOUT = 10.0
NODE = 0
PREFERRED = 0
UNCLEAN = 1


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory.mktemp("admin-cluster") / "data") as proc:
        for name, partitions in [("sizes", 2), ("elect", 3), ("move", 2), ("page-a", 3), ("page-b", 2)]:
            create_topic(proc.bootstrap, name, partitions)
        yield proc


@pytest.fixture(scope="module")
def kadmin(broker: BrokerProcess) -> Iterator[Any]:
    from kafka.admin import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=int(TIMEOUT * 1000))
    yield client
    client.close()


@pytest.fixture
def raw(broker: BrokerProcess) -> Iterator[RawClient]:
    client = RawClient(broker.bootstrap)
    yield client
    client.close()


def segment_bytes(data_dir: Path, topic: str, partition: int) -> int:
    """What Kafka calls the partition's size: the sum of its segment (.log) files."""
    directory = data_dir / f"{topic}-{partition}"
    return sum(f.stat().st_size for f in directory.iterdir() if f.suffix == ".log")


def produce(bootstrap: str, topic: str, partition: int, count: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, value=b"v" * 100 + str(i).encode(), partition=partition)
    assert producer.flush(TIMEOUT) == 0


def log_dir_sizes(kadmin: Any, wanted: Any) -> tuple[dict[str, Any], dict[tuple[str, int], int]]:
    (broker_result,) = kadmin.describe_log_dirs(wanted)
    assert broker_result["broker"] == NODE
    (log_dir,) = broker_result["log_dirs"]
    sizes = {
        (t["name"], p["partition_index"]): p["partition_size"]
        for t in log_dir["topics"]
        for p in t["partitions"]
    }
    return log_dir, sizes


# --- ApiVersions ------------------------------------------------------------------------------------------


def test_advertised_versions(raw: RawClient) -> None:
    response = raw.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("test", "1"))
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert ranges[ApiKey.DESCRIBE_LOG_DIRS] == (1, 5)
    assert ranges[ApiKey.ELECT_LEADERS] == (0, 2)
    assert ranges[ApiKey.ALTER_PARTITION_REASSIGNMENTS] == (0, 1)
    assert ranges[ApiKey.LIST_PARTITION_REASSIGNMENTS] == (0, 0)
    assert ranges[ApiKey.DESCRIBE_TOPIC_PARTITIONS] == (0, 0)
    assert ranges[ApiKey.DESCRIBE_CLIENT_QUOTAS] == (0, 1)
    assert ranges[ApiKey.ALTER_CLIENT_QUOTAS] == (0, 1)


# --- DescribeLogDirs ----------------------------------------------------------------------------------------


def test_describe_log_dirs_sizes_match_the_files_and_grow(broker: BrokerProcess, kadmin: Any) -> None:
    log_dir, sizes = log_dir_sizes(kadmin, {"sizes": [0, 1]})
    assert log_dir["error_code"] == ErrorCode.NONE
    assert log_dir["log_dir"] == os.path.abspath(broker.data_dir)
    assert sizes == {("sizes", 0): 0, ("sizes", 1): 0}
    (partition,) = [p for t in log_dir["topics"] for p in t["partitions"] if p["partition_index"] == 0]
    assert (partition["offset_lag"], partition["is_future_key"]) == (0, False)

    produce(broker.bootstrap, "sizes", 0, 50)
    _, sizes = log_dir_sizes(kadmin, {"sizes": [0, 1]})
    on_disk = segment_bytes(broker.data_dir, "sizes", 0)
    assert on_disk > 50 * 100
    assert sizes == {("sizes", 0): on_disk, ("sizes", 1): 0}

    produce(broker.bootstrap, "sizes", 0, 10)
    _, grown = log_dir_sizes(kadmin, {"sizes": [0]})
    assert grown == {("sizes", 0): segment_bytes(broker.data_dir, "sizes", 0)}
    assert grown[("sizes", 0)] > sizes[("sizes", 0)]


def test_describe_log_dirs_space_is_the_file_systems(broker: BrokerProcess, kadmin: Any) -> None:
    log_dir, _ = log_dir_sizes(kadmin, {"sizes": [0]})
    st = os.statvfs(broker.data_dir)
    assert log_dir["total_bytes"] == st.f_blocks * st.f_frsize
    # Other processes write to the same disk: usable space only has to be close to ours.
    assert 0 < log_dir["usable_bytes"] <= log_dir["total_bytes"]
    assert abs(log_dir["usable_bytes"] - st.f_bavail * st.f_frsize) < 1 << 30


def test_describe_log_dirs_selection(kadmin: Any) -> None:
    _, everything = log_dir_sizes(kadmin, None)
    assert {("elect", 2), ("move", 1), ("page-b", 1), ("sizes", 0)} <= set(everything)
    # Whole topic through kafka-python (it expands a name to its partitions), unknown ones left out.
    _, some = log_dir_sizes(kadmin, {"elect": [0, 2, 7], "no-such-topic": [0]})
    assert set(some) == {("elect", 0), ("elect", 2)}


def test_describe_log_dirs_old_and_new_versions(broker: BrokerProcess, raw: RawClient) -> None:
    request = DescribeLogDirsRequest([DescribableLogDirTopic("move", [1])])
    for version in (1, 3, 4, 5):
        response = raw.request(ApiKey.DESCRIBE_LOG_DIRS, version, request)
        assert response.error_code == ErrorCode.NONE
        (result,) = response.results
        assert result.log_dir == os.path.abspath(broker.data_dir)
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in result.topics] == [("move", [1])]
        if version < 4:
            assert (result.total_bytes, result.usable_bytes) == (-1, -1)  # not on the wire before v4
        else:
            assert result.total_bytes > 0
            assert result.usable_bytes > 0
        assert result.is_cordoned is False


# --- ElectLeaders -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("election", ["PREFERRED", "UNCLEAN"])
def test_elect_leaders_confluent(broker: BrokerProcess, election: str) -> None:
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    kind = getattr(ElectionType, election)
    result = admin.elect_leaders(kind, [TopicPartition("elect", 0), TopicPartition("elect", 9)]).result(
        TIMEOUT
    )
    codes = {(tp.topic, tp.partition): err.code() for tp, err in result.items()}
    assert codes == {
        ("elect", 0): ErrorCode.ELECTION_NOT_NEEDED,
        ("elect", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    messages = {tp.partition: err.str() for tp, err in result.items()}
    assert messages[9] == "No such partition as elect-9"
    # Every partition: nothing needs an election, and such partitions are not reported.
    assert admin.elect_leaders(kind, None).result(TIMEOUT) == {}


def test_elect_leaders_kafka_python(kadmin: Any) -> None:
    response = kadmin.elect_leaders(PREFERRED, {"elect": [1, 2], "nope": [0]}, raise_errors=False)
    assert response.error_code == ErrorCode.NONE
    got = {
        (r.topic, p.partition_id): (p.error_code, p.error_message)
        for r in response.replica_election_results
        for p in r.partition_result
    }
    assert got == {
        ("elect", 1): (ErrorCode.ELECTION_NOT_NEEDED, None),
        ("elect", 2): (ErrorCode.ELECTION_NOT_NEEDED, None),
        ("nope", 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "No such topic as nope"),
    }


def test_elect_leaders_raw(raw: RawClient) -> None:
    # v0 has no election type (preferred); null topic_partitions lists each topic with no results.
    response = raw.request(ApiKey.ELECT_LEADERS, 0, ElectLeadersRequest(0, None, 5000))
    topics = {r.topic: r.partition_result for r in response.replica_election_results}
    assert {"elect", "move", "sizes"} <= set(topics)
    assert all(results == [] for results in topics.values())

    response = raw.request(
        ApiKey.ELECT_LEADERS, 2, ElectLeadersRequest(7, [TopicPartitions("elect", [0, 1])], 5000)
    )
    assert response.error_code == ErrorCode.INVALID_REQUEST
    (result,) = response.replica_election_results
    assert [(p.partition_id, p.error_code, p.error_message) for p in result.partition_result] == [
        (0, ErrorCode.INVALID_REQUEST, "Unknown election type 7"),
        (1, ErrorCode.INVALID_REQUEST, "Unknown election type 7"),
    ]


# --- partition reassignments ------------------------------------------------------------------------------


def test_reassignments_kafka_python(broker: BrokerProcess, kadmin: Any) -> None:
    from kafka import TopicPartition
    from kafka.errors import (
        InvalidReplicationAssignmentError,
        NoReassignmentInProgressError,
        UnknownTopicOrPartitionError,
    )

    result = kadmin.alter_partition_reassignments(
        {
            TopicPartition("move", 0): [NODE],
            TopicPartition("move", 1): [NODE, 1],
            TopicPartition("move", 5): [NODE],
            TopicPartition("nope", 0): [NODE],
        }
    )
    assert result == {
        TopicPartition("move", 0): None,
        TopicPartition("move", 1): InvalidReplicationAssignmentError,
        TopicPartition("move", 5): UnknownTopicOrPartitionError,
        TopicPartition("nope", 0): UnknownTopicOrPartitionError,
    }
    cancel = kadmin.alter_partition_reassignments({TopicPartition("move", 1): None})
    assert cancel == {TopicPartition("move", 1): NoReassignmentInProgressError}
    # Nothing is, or ever was, in progress.
    assert kadmin.list_partition_reassignments() == {}
    assert kadmin.list_partition_reassignments({"move": [0, 1]}) == {}
    # The no-op changed nothing: the partition still lives here and takes data.
    (topic,) = kadmin.describe_topics(["move"])
    assert [(p["partition_index"], p["leader_id"], p["replica_nodes"]) for p in topic["partitions"]] == [
        (0, NODE, [NODE]),
        (1, NODE, [NODE]),
    ]
    produce(broker.bootstrap, "move", 0, 1)


def test_reassignments_raw_messages(raw: RawClient) -> None:
    def one(replicas: list[int] | None, version: int = 1, allow: bool = True) -> tuple[int, str | None]:
        request = AlterPartitionReassignmentsRequest(
            5000, allow, [ReassignableTopic("move", [ReassignablePartition(0, replicas)])]
        )
        response = raw.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, version, request)
        assert (response.error_code, response.error_message) == (ErrorCode.NONE, None)
        if version >= 1:
            assert response.allow_replication_factor_change is allow
        ((name, (partition,)),) = [(t.name, t.partitions) for t in response.responses]
        assert (name, partition.partition_index) == ("move", 0)
        return partition.error_code, partition.error_message

    assert one([NODE]) == (ErrorCode.NONE, None)
    assert one([NODE], version=0) == (ErrorCode.NONE, None)
    assert one([NODE], allow=False) == (ErrorCode.NONE, None)
    assert one([]) == (
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "The manual partition assignment includes an empty replica list.",
    )
    assert one([2, NODE]) == (
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "The manual partition assignment includes broker 2, but no such broker is registered.",
    )
    assert one([NODE, NODE]) == (
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        f"The manual partition assignment includes the broker {NODE} more than once.",
    )
    assert one(None) == (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress.")

    listed = raw.request(
        ApiKey.LIST_PARTITION_REASSIGNMENTS,
        0,
        ListPartitionReassignmentsRequest(5000, [ListPartitionReassignmentsTopics("move", [0, 1])]),
    )
    assert (listed.error_code, listed.error_message, listed.topics) == (ErrorCode.NONE, None, [])


# --- DescribeTopicPartitions ------------------------------------------------------------------------------


def test_describe_topic_partitions_pages_kafka_python(kadmin: Any) -> None:
    topics = ["page-b", "page-a"]
    pages = []
    cursor = None
    for _ in range(10):
        page = kadmin.describe_topic_partitions(topics, response_partition_limit=2, cursor=cursor)
        pages.append([(t["name"], p["partition_index"]) for t in page["topics"] for p in t["partitions"]])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == [
        [("page-a", 0), ("page-a", 1)],
        [("page-a", 2), ("page-b", 0)],
        [("page-b", 1)],
    ]
    (metadata,) = kadmin.describe_topics(["page-a"])
    whole = kadmin.describe_topic_partitions(["page-a"])
    (topic,) = whole["topics"]
    assert whole["next_cursor"] is None
    assert str(topic["topic_id"]) == str(metadata["topic_id"])
    assert (topic["error_code"], topic["is_internal"], topic["topic_authorized_operations"]) == (
        0,
        False,
        3576,
    )
    for p in topic["partitions"]:
        assert (p["leader_id"], p["leader_epoch"], p["replica_nodes"], p["isr_nodes"]) == (
            NODE,
            0,
            [NODE],
            [NODE],
        )
        assert p["offline_replicas"] == []


def test_describe_topic_partitions_raw(broker: BrokerProcess, raw: RawClient) -> None:
    def request(names: list[str], limit: int, cursor: tuple[str, int] | None = None) -> Any:
        body = DescribeTopicPartitionsRequest(
            [TopicRequest(n) for n in names], limit, Cursor(*cursor) if cursor else None
        )
        return raw.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, body)

    exact = request(["page-a", "page-b"], 3)
    assert [(t.name, len(t.partitions)) for t in exact.topics] == [("page-a", 3)]
    assert (exact.next_cursor.topic_name, exact.next_cursor.partition_index) == ("page-b", 0)
    p = exact.topics[0].partitions[0]
    assert (p.eligible_leader_replicas, p.last_known_elr, p.offline_replicas) == ([], [], [])

    unknown = request(["nope", "bad name!", "page-b"], 100)
    codes = {t.name: (t.error_code, t.topic_id) for t in unknown.topics}
    assert codes == {
        "bad name!": (ErrorCode.INVALID_TOPIC_EXCEPTION, uuid.UUID(int=0)),
        "nope": (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, uuid.UUID(int=0)),
        "page-b": (ErrorCode.NONE, codes["page-b"][1]),
    }
    assert codes["page-b"][1] != uuid.UUID(int=0)

    # All topics from a cursor: names before the cursor's topic are skipped.
    everything = request([], 100, ("page-a", 2))
    names = [t.name for t in everything.topics]
    assert names == sorted(names)
    assert names[:2] == ["page-a", "page-b"]
    assert [p.partition_index for p in everything.topics[0].partitions] == [2]

    bad = request(["page-a", "page-b"], 10, ("sizes", 0))
    assert [(t.name, t.error_code, t.partitions) for t in bad.topics] == [
        ("page-a", ErrorCode.INVALID_REQUEST, []),
        ("page-b", ErrorCode.INVALID_REQUEST, []),
    ]
    negative = request(["page-a"], 10, ("page-a", -1))
    assert [t.error_code for t in negative.topics] == [ErrorCode.INVALID_REQUEST]
    # A limit of 0 or less still returns one partition (Kafka: max(min(limit, cap), 1)).
    tiny = request(["page-b"], 0)
    assert [(t.name, len(t.partitions)) for t in tiny.topics] == [("page-b", 1)]


def test_describe_topic_partitions_broker_cap(tmp_path: Path) -> None:
    with running_broker(tmp_path / "data", "max.request.partition.size.limit=2") as proc:
        create_topic(proc.bootstrap, "capped", 5)
        client = RawClient(proc.bootstrap)
        try:
            response = client.request(
                ApiKey.DESCRIBE_TOPIC_PARTITIONS,
                0,
                DescribeTopicPartitionsRequest([TopicRequest("capped")], 2000),
            )
        finally:
            client.close()
    (topic,) = response.topics
    assert [p.partition_index for p in topic.partitions] == [0, 1]
    assert (response.next_cursor.topic_name, response.next_cursor.partition_index) == ("capped", 2)

"""Admin APIs through the real admin clients (issue 6.4).

confluent-kafka's AdminClient and kafka-python's KafkaAdminClient create, describe, alter
(IncrementalAlterConfigs), grow and delete topics; DeleteRecords moves the low watermark that ListOffsets
(earliest) and Fetch then report; ListOffsets by timestamp; DescribeCluster. Invalid requests get Kafka's
codes: INVALID_TOPIC_EXCEPTION 17, TOPIC_ALREADY_EXISTS 36, INVALID_PARTITIONS 37,
INVALID_REPLICATION_FACTOR 38, INVALID_CONFIG 40, UNKNOWN_TOPIC_OR_PARTITION 3, OFFSET_OUT_OF_RANGE 1.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.create_topics import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from exactly.protocol.messages.describe_quorum import DescribeQuorumRequest, PartitionData, TopicData
from exactly.testing.processes import BrokerProcess
from tests.interop.client import RawClient
from tests.interop.support import EARLIEST, LATEST, fetch_partition, list_offset, running_broker

pytestmark = pytest.mark.interop

TIMEOUT = 10.0
DYNAMIC_TOPIC_CONFIG = 1
DEFAULT_CONFIG = 5


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory.mktemp("admin") / "data") as proc:
        yield proc


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": broker.bootstrap})


@pytest.fixture(scope="module")
def kadmin(broker: BrokerProcess) -> Iterator[Any]:
    from kafka.admin import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=int(TIMEOUT * 1000))
    yield client
    client.close()


def confluent_code(future: Any) -> int:
    """The Kafka error code a confluent-kafka admin future failed with (0 if it succeeded)."""
    from confluent_kafka import KafkaException

    try:
        future.result(TIMEOUT)
    except KafkaException as e:
        code: int = e.args[0].code()
        return code
    return 0


def kafka_python_code(call: Any) -> int:
    from kafka.errors import KafkaError

    try:
        call()
    except KafkaError as e:
        code: int = e.errno
        return code
    return 0


def confluent_configs(admin: Any, topic: str) -> dict[str, tuple[str, int]]:
    from confluent_kafka.admin import ConfigResource, ResourceType

    (future,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    return {name: (entry.value, int(entry.source)) for name, entry in future.result(TIMEOUT).items()}


def topic_partitions(admin: Any, topic: str) -> list[int] | None:
    md = admin.list_topics(timeout=TIMEOUT)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return None
    return sorted(t.partitions)


def produce(
    bootstrap: str, topic: str, partition: int, values_ts: list[tuple[bytes, int]], *, batch: bool
) -> None:
    """confluent-kafka producer; one batch for all records (batch=True) or one request per record."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50 if batch else 0, "acks": "all"})
    for value, ts in values_ts:
        producer.produce(topic, value=value, partition=partition, timestamp=ts)
        if not batch:
            assert producer.flush(TIMEOUT) == 0
    assert producer.flush(TIMEOUT) == 0


# --- lifecycles -------------------------------------------------------------------------------------


def test_confluent_admin_topic_lifecycle(broker: BrokerProcess, admin: Any) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,
        OffsetSpec,
        ResourceType,
    )

    topic = "admin-confluent"
    (f,) = admin.create_topics(
        [NewTopic(topic, 2, 1, config={"retention.ms": "123456", "cleanup.policy": "delete"})],
        request_timeout=TIMEOUT,
    ).values()
    assert f.result(TIMEOUT) is None
    assert topic_partitions(admin, topic) == [0, 1]

    configs = confluent_configs(admin, topic)
    assert configs["retention.ms"] == ("123456", DYNAMIC_TOPIC_CONFIG)
    assert configs["cleanup.policy"] == ("delete", DYNAMIC_TOPIC_CONFIG)
    assert configs["segment.bytes"] == (str(1 << 30), DEFAULT_CONFIG)
    assert configs["max.message.bytes"] == ("1048588", DEFAULT_CONFIG)

    resource = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "999", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("max.message.bytes", "5000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ],
    )
    (f,) = admin.incremental_alter_configs([resource]).values()
    assert f.result(TIMEOUT) is None
    configs = confluent_configs(admin, topic)
    assert configs["retention.ms"] == ("999", DYNAMIC_TOPIC_CONFIG)
    assert configs["max.message.bytes"] == ("5000", DYNAMIC_TOPIC_CONFIG)
    assert set(configs["cleanup.policy"][0].split(",")) == {"compact", "delete"}

    resource = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SUBTRACT),
        ],
    )
    (f,) = admin.incremental_alter_configs([resource]).values()
    assert f.result(TIMEOUT) is None
    configs = confluent_configs(admin, topic)
    assert configs["retention.ms"] == (str(7 * 24 * 3600 * 1000), DEFAULT_CONFIG)
    assert configs["cleanup.policy"][0] == "delete"
    assert configs["max.message.bytes"] == ("5000", DYNAMIC_TOPIC_CONFIG)

    (f,) = admin.create_partitions([NewPartitions(topic, 5)], request_timeout=TIMEOUT).values()
    assert f.result(TIMEOUT) is None
    assert topic_partitions(admin, topic) == [0, 1, 2, 3, 4]
    produce(broker.bootstrap, topic, 4, [(b"in-new-partition", 1000)], batch=True)
    assert fetch_partition(broker.bootstrap, topic, 4).values == [b"in-new-partition"]
    (f,) = admin.list_offsets({TopicPartition(topic, 4): OffsetSpec.latest()}).values()
    assert f.result(TIMEOUT).offset == 1

    (f,) = admin.delete_topics([topic], request_timeout=TIMEOUT).values()
    assert f.result(TIMEOUT) is None
    assert topic_partitions(admin, topic) is None or _eventually_gone(admin, topic)
    (f,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    assert confluent_code(f) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    # Re-created under the same name: a new, empty log.
    (f,) = admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=TIMEOUT).values()
    assert f.result(TIMEOUT) is None
    assert list_offset(broker.bootstrap, topic, 0, LATEST)[:2] == (0, 0)
    assert confluent_configs(admin, topic)["max.message.bytes"] == ("1048588", DEFAULT_CONFIG)


def _eventually_gone(admin: Any, topic: str) -> bool:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if topic_partitions(admin, topic) is None:
            return True
        time.sleep(0.1)
    return False


def test_kafka_python_admin_topic_lifecycle(broker: BrokerProcess, kadmin: Any) -> None:
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, NewPartitions

    topic = "admin-kafka-python"
    result = kadmin.create_topics(
        {topic: {"num_partitions": 3, "replication_factor": 1, "configs": {"segment.bytes": "1048576"}}}
    )
    assert [(t["name"], t["error_code"], t["num_partitions"]) for t in result["topics"]] == [(topic, 0, 3)]

    described = kadmin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    entries = described["topic"][topic]
    assert entries["segment.bytes"]["value"] == "1048576"
    assert entries["segment.bytes"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"

    altered = kadmin.alter_configs(
        [
            ConfigResource(
                ConfigResourceType.TOPIC,
                topic,
                configs={
                    "retention.bytes": (AlterConfigOp.SET, "1000000"),
                    "segment.bytes": (AlterConfigOp.DELETE, None),
                },
            )
        ],
        incremental=True,
    )
    assert altered == {"topic": {topic: "OK"}}
    entries = kadmin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])["topic"][topic]
    assert entries["retention.bytes"]["value"] == "1000000"
    assert "segment.bytes" not in entries  # back to the default: no longer a modified config

    kadmin.create_partitions({topic: NewPartitions(4)})
    assert len(kadmin.describe_topics([topic])[0]["partitions"]) == 4
    code = kafka_python_code(lambda: kadmin.create_partitions({topic: NewPartitions(4)}))
    assert code == ErrorCode.INVALID_PARTITIONS
    code = kafka_python_code(lambda: kadmin.create_partitions({"admin-no-such-topic": NewPartitions(2)}))
    assert code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    deleted = kadmin.delete_topics([topic])
    assert [(t["name"], t["error_code"]) for t in deleted["topics"]] == [(topic, 0)]
    assert topic not in kadmin.list_topics()
    code = kafka_python_code(lambda: kadmin.delete_topics([topic]))
    assert code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


# --- DeleteRecords and ListOffsets ---------------------------------------------------------------


def test_delete_records_moves_the_low_watermark(broker: BrokerProcess, admin: Any, kadmin: Any) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import NewTopic, OffsetSpec
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    topic = "admin-delete-records"
    (f,) = admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=TIMEOUT).values()
    assert f.result(TIMEOUT) is None
    produce(broker.bootstrap, topic, 0, [(b"v%d" % i, 1000 + i) for i in range(6)], batch=True)
    produce(broker.bootstrap, topic, 0, [(b"v%d" % i, 1000 + i) for i in range(6, 10)], batch=False)

    (f,) = admin.delete_records([TopicPartition(topic, 0, 4)]).values()
    assert f.result(TIMEOUT).low_watermark == 4
    (f,) = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.earliest()}).values()
    assert f.result(TIMEOUT).offset == 4
    assert list_offset(broker.bootstrap, topic, 0, EARLIEST)[:2] == (0, 4)
    dump = fetch_partition(broker.bootstrap, topic, 0, start=4)
    assert dump.log_start_offset == 4
    assert [(r.offset, r.value) for r in dump.records if r.offset >= 4] == [
        (i, b"v%d" % i) for i in range(4, 10)
    ]
    # Below the log start offset there is nothing to fetch any more.
    assert fetch_partition(broker.bootstrap, topic, 0, start=1).error_code == ErrorCode.OFFSET_OUT_OF_RANGE

    # kafka-python deletes further (into the one-record batches); its consumer sees the new start.
    result = kadmin.delete_records({KTP(topic, 0): 7})
    assert result[KTP(topic, 0)]["low_watermark"] == 7
    assert result[KTP(topic, 0)]["error_code"] == 0
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, group_id=None, request_timeout_ms=int(TIMEOUT * 1000)
    )
    try:
        assert consumer.beginning_offsets([KTP(topic, 0)]) == {KTP(topic, 0): 7}
        assert consumer.end_offsets([KTP(topic, 0)]) == {KTP(topic, 0): 10}
    finally:
        consumer.close()
    assert fetch_partition(broker.bootstrap, topic, 0, start=7).values == [b"v7", b"v8", b"v9"]

    # Deleting never moves the start back; past the high watermark is OFFSET_OUT_OF_RANGE.
    (f,) = admin.delete_records([TopicPartition(topic, 0, 5)]).values()
    assert f.result(TIMEOUT).low_watermark == 7
    (f,) = admin.delete_records([TopicPartition(topic, 0, 11)]).values()
    assert confluent_code(f) == ErrorCode.OFFSET_OUT_OF_RANGE
    assert list_offset(broker.bootstrap, topic, 0, EARLIEST)[:2] == (0, 7)
    # -1 means "up to the high watermark".
    (f,) = admin.delete_records([TopicPartition(topic, 0, -1)]).values()
    assert f.result(TIMEOUT).low_watermark == 10
    assert list_offset(broker.bootstrap, topic, 0, EARLIEST)[:2] == (0, 10)
    assert list_offset(broker.bootstrap, topic, 0, LATEST)[:2] == (0, 10)


@pytest.mark.parametrize("batched", [True, False], ids=["one-batch", "batch-per-record"])
def test_list_offsets_by_timestamp(broker: BrokerProcess, admin: Any, batched: bool) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import NewTopic, OffsetSpec
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    topic = f"admin-by-timestamp-{batched}"
    (f,) = admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=TIMEOUT).values()
    assert f.result(TIMEOUT) is None
    timestamps = [1000, 3000, 2000, 5000, 4000, 5000]  # not monotonic, max appears twice
    produce(broker.bootstrap, topic, 0, [(b"t%d" % ts, ts) for ts in timestamps], batch=batched)

    # first offset whose timestamp >= target (Kafka's fetchOffsetByTimestamp)
    cases = {
        0: (0, 1000),
        1000: (0, 1000),
        1001: (1, 3000),
        2500: (1, 3000),
        3001: (3, 5000),
        4500: (3, 5000),
        5000: (3, 5000),
        5001: (-1, -1),
    }
    for target, (offset, ts) in cases.items():
        (f,) = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.for_timestamp(target)}).values()
        info = f.result(TIMEOUT)
        assert (target, info.offset) == (target, offset)
        if offset >= 0:
            assert info.timestamp == ts
        assert list_offset(broker.bootstrap, topic, 0, target)[:2] == (0, offset)
        assert list_offset(broker.bootstrap, topic, 0, target, version=1)[:2] == (0, offset)
    # MAX_TIMESTAMP (-3, ListOffsets v7): the first record carrying the largest timestamp.
    (f,) = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.max_timestamp()}).values()
    info = f.result(TIMEOUT)
    assert (info.offset, info.timestamp) == (3, 5000)

    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, group_id=None, request_timeout_ms=int(TIMEOUT * 1000)
    )
    try:
        found = consumer.offsets_for_times({KTP(topic, 0): 2500})[KTP(topic, 0)]
        assert (found.offset, found.timestamp) == (1, 3000)
        assert consumer.offsets_for_times({KTP(topic, 0): 9999})[KTP(topic, 0)] is None
    finally:
        consumer.close()


def test_describe_cluster(broker: BrokerProcess, admin: Any, kadmin: Any) -> None:
    described = admin.describe_cluster(request_timeout=TIMEOUT).result(TIMEOUT)
    assert described.cluster_id == "exactly-cluster"
    assert described.controller.id == 0
    assert [(n.id, n.host, n.port) for n in described.nodes] == [(0, "127.0.0.1", broker.port)]
    k = kadmin.describe_cluster()
    assert k["cluster_id"] == "exactly-cluster"
    assert k["controller_id"] == 0
    assert [(b["broker_id"], b["host"], b["port"]) for b in k["brokers"]] == [(0, "127.0.0.1", broker.port)]


def test_describe_quorum_single_broker_is_the_only_voter(broker: BrokerProcess, kadmin: Any) -> None:
    """DescribeQuorum (key 55): the broker alone is the quorum's leader and only voter."""
    from kafka.admin import NewTopic

    def quorum() -> tuple[dict[str, Any], dict[str, Any]]:
        described = kadmin.describe_metadata_quorum()
        (topic,) = described["topics"]
        assert topic["topic_name"] == "__cluster_metadata"
        (partition,) = topic["partitions"]
        return described, partition

    before = int(time.time() * 1000)
    described, partition = quorum()
    assert (partition["error"], partition["leader_id"], partition["leader_epoch"]) == (None, 0, 1)
    (voter,) = partition["current_voters"]
    assert (voter["replica_id"], voter["log_end_offset"]) == (0, partition["high_watermark"])
    assert voter["last_fetch_timestamp"] >= before
    assert voter["last_caught_up_timestamp"] >= before
    assert partition["observers"] == []
    (node,) = described["nodes"]
    assert node["node_id"] == 0
    assert [(x["host"], x["port"]) for x in node["listeners"]] == [("127.0.0.1", broker.port)]
    # a metadata record (a new topic) moves the metadata offset by one
    kadmin.create_topics([NewTopic("quorum-offset", 1, 1)])
    assert quorum()[1]["high_watermark"] == partition["high_watermark"] + 1
    # v0 (no nodes, no timestamps), and anything but __cluster_metadata-0
    client = RawClient(broker.bootstrap)
    try:
        request = DescribeQuorumRequest([TopicData("__cluster_metadata", [PartitionData(0)])])
        v0 = client.request(ApiKey.DESCRIBE_QUORUM, 0, request)
        assert (v0.error_code, v0.topics[0].partitions[0].leader_id) == (ErrorCode.NONE, 0)
        other = DescribeQuorumRequest([TopicData("quorum-offset", [PartitionData(0)])])
        (answer,) = client.request(ApiKey.DESCRIBE_QUORUM, 2, other).topics[0].partitions
        assert (answer.error_code, answer.leader_id) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)
    finally:
        client.close()


# --- errors --------------------------------------------------------------------------------------


def raw_create(bootstrap: str, *topics: CreatableTopic, validate_only: bool = False) -> list[tuple[str, int]]:
    client = RawClient(bootstrap)
    try:
        response = client.request(
            ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest(list(topics), 10_000, validate_only)
        )
        return [(t.name, t.error_code) for t in response.topics]
    finally:
        client.close()


BAD_NAMES = ["", ".", "..", "a" * 250, "bad name", "bad/name", "tab\tname", "ünïcode", "star*"]


@pytest.mark.parametrize("name", BAD_NAMES, ids=[f"bad{i}" for i in range(len(BAD_NAMES))])
def test_invalid_topic_names_are_rejected(broker: BrokerProcess, name: str) -> None:
    assert raw_create(broker.bootstrap, CreatableTopic(name, 1, 1)) == [
        (name, ErrorCode.INVALID_TOPIC_EXCEPTION)
    ]


def test_longest_legal_topic_name_and_collisions(broker: BrokerProcess, admin: Any) -> None:
    longest = "x" * 249
    assert raw_create(broker.bootstrap, CreatableTopic(longest, 1, 1)) == [(longest, ErrorCode.NONE)]
    assert topic_partitions(admin, longest) == [0]
    # '.' and '_' collide in metric names: Kafka refuses the second with INVALID_TOPIC_EXCEPTION.
    assert raw_create(broker.bootstrap, CreatableTopic("collide.me", 1, 1)) == [
        ("collide.me", ErrorCode.NONE)
    ]
    assert raw_create(broker.bootstrap, CreatableTopic("collide_me", 1, 1)) == [
        ("collide_me", ErrorCode.INVALID_TOPIC_EXCEPTION)
    ]
    assert topic_partitions(admin, "collide_me") is None


def test_create_topic_errors_through_confluent(broker: BrokerProcess, admin: Any) -> None:
    from confluent_kafka.admin import NewTopic

    (f,) = admin.create_topics([NewTopic("admin-exists", 1, 1)], request_timeout=TIMEOUT).values()
    assert f.result(TIMEOUT) is None
    futures = admin.create_topics(
        [
            NewTopic("admin-exists", 1, 1),
            NewTopic("bad name", 1, 1),
            NewTopic("admin-zero-partitions", 0, 1),
            NewTopic("admin-rf3", 1, 3),
            NewTopic("admin-bad-config-name", 1, 1, config={"no.such.config": "1"}),
            NewTopic("admin-bad-config-value", 1, 1, config={"retention.ms": "forever"}),
            NewTopic("admin-bad-cleanup", 1, 1, config={"cleanup.policy": "shred"}),
            NewTopic("admin-bad-ts-type", 1, 1, config={"message.timestamp.type": "Tuesday"}),
            NewTopic("admin-small-segment", 1, 1, config={"segment.bytes": "1"}),
        ],
        request_timeout=TIMEOUT,
    )
    codes = {name: confluent_code(f) for name, f in futures.items()}
    assert codes == {
        "admin-exists": ErrorCode.TOPIC_ALREADY_EXISTS,
        "bad name": ErrorCode.INVALID_TOPIC_EXCEPTION,
        "admin-zero-partitions": ErrorCode.INVALID_PARTITIONS,
        "admin-rf3": ErrorCode.INVALID_REPLICATION_FACTOR,
        "admin-bad-config-name": ErrorCode.INVALID_CONFIG,
        "admin-bad-config-value": ErrorCode.INVALID_CONFIG,
        "admin-bad-cleanup": ErrorCode.INVALID_CONFIG,
        "admin-bad-ts-type": ErrorCode.INVALID_CONFIG,
        "admin-small-segment": ErrorCode.INVALID_CONFIG,
    }
    topics = admin.list_topics(timeout=TIMEOUT).topics
    assert not {n for n in codes if n != "admin-exists"} & set(topics)


def test_create_topic_errors_through_kafka_python(broker: BrokerProcess, kadmin: Any) -> None:
    kadmin.create_topics({"admin-kp-exists": {"num_partitions": 1}})
    cases = {
        "admin-kp-exists": ({"num_partitions": 1}, ErrorCode.TOPIC_ALREADY_EXISTS),
        "bad/name": ({"num_partitions": 1}, ErrorCode.INVALID_TOPIC_EXCEPTION),
        "admin-kp-zero": ({"num_partitions": 0, "replication_factor": 1}, ErrorCode.INVALID_PARTITIONS),
        "admin-kp-rf2": (
            {"num_partitions": 1, "replication_factor": 2},
            ErrorCode.INVALID_REPLICATION_FACTOR,
        ),
        "admin-kp-badcfg": (
            {"num_partitions": 1, "configs": {"segment.bytes": "x"}},
            ErrorCode.INVALID_CONFIG,
        ),
    }
    for name, (spec, expected) in cases.items():
        assert kafka_python_code(lambda n=name, s=spec: kadmin.create_topics({n: s})) == expected, name
    # validate_only: checked, answered, not created.
    result = kadmin.create_topics({"admin-kp-dry": {"num_partitions": 2}}, validate_only=True)
    assert [(t["name"], t["error_code"]) for t in result["topics"]] == [("admin-kp-dry", 0)]
    assert "admin-kp-dry" not in kadmin.list_topics()


def test_invalid_alter_leaves_config_unchanged(broker: BrokerProcess, admin: Any, kadmin: Any) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType
    from kafka.admin import AlterConfigOp
    from kafka.admin import ConfigResource as KConfigResource
    from kafka.admin import ConfigResourceType as KType

    topic = "admin-alter-errors"
    (f,) = admin.create_topics(
        [NewTopic(topic, 1, 1, config={"retention.ms": "60000"})], request_timeout=TIMEOUT
    ).values()
    assert f.result(TIMEOUT) is None
    bad = [
        ("retention.ms", "soon"),
        ("no.such.config", "1"),
        ("segment.bytes", "3"),
        ("cleanup.policy", "shred"),
    ]
    for name, value in bad:
        resource = ConfigResource(
            ResourceType.TOPIC,
            topic,
            incremental_configs=[
                ConfigEntry("max.message.bytes", "777", incremental_operation=AlterConfigOpType.SET),
                ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET),
            ],
        )
        (f,) = admin.incremental_alter_configs([resource]).values()
        assert confluent_code(f) == ErrorCode.INVALID_CONFIG, (name, value)
    # Nothing of a rejected request was applied, not even its valid part.
    configs = confluent_configs(admin, topic)
    assert configs["retention.ms"] == ("60000", DYNAMIC_TOPIC_CONFIG)
    assert configs["max.message.bytes"] == ("1048588", DEFAULT_CONFIG)

    result = kadmin.alter_configs(
        [KConfigResource(KType.TOPIC, topic, configs={"retention.ms": (AlterConfigOp.SET, "soon")})],
        incremental=True,
        raise_on_unknown=False,
    )
    assert "[Error 40] InvalidConfigurationError" in str(result["topic"][topic])
    # Unknown topic.
    (f,) = admin.incremental_alter_configs(
        [
            ConfigResource(
                ResourceType.TOPIC,
                "admin-no-such-topic",
                incremental_configs=[
                    ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)
                ],
            )
        ]
    ).values()
    assert confluent_code(f) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert confluent_configs(admin, topic)["retention.ms"] == ("60000", DYNAMIC_TOPIC_CONFIG)


def test_create_partitions_and_delete_errors(broker: BrokerProcess, admin: Any) -> None:
    from confluent_kafka.admin import NewPartitions, NewTopic

    topic = "admin-partitions-errors"
    (f,) = admin.create_topics([NewTopic(topic, 3, 1)], request_timeout=TIMEOUT).values()
    assert f.result(TIMEOUT) is None
    futures = admin.create_partitions([NewPartitions(topic, 3)], request_timeout=TIMEOUT)
    assert confluent_code(futures[topic]) == ErrorCode.INVALID_PARTITIONS
    futures = admin.create_partitions([NewPartitions(topic, 2)], request_timeout=TIMEOUT)
    assert confluent_code(futures[topic]) == ErrorCode.INVALID_PARTITIONS
    futures = admin.create_partitions([NewPartitions("admin-missing", 2)], request_timeout=TIMEOUT)
    assert confluent_code(futures["admin-missing"]) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert topic_partitions(admin, topic) == [0, 1, 2]
    futures = admin.delete_topics(["admin-missing"], request_timeout=TIMEOUT)
    assert confluent_code(futures["admin-missing"]) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # validate_only grows nothing
    (f,) = admin.create_partitions(
        [NewPartitions(topic, 6)], validate_only=True, request_timeout=TIMEOUT
    ).values()
    assert f.result(TIMEOUT) is None
    assert topic_partitions(admin, topic) == [0, 1, 2]


def test_raw_create_topics_validate_only_and_duplicates(broker: BrokerProcess) -> None:
    assert raw_create(
        broker.bootstrap,
        CreatableTopic("admin-raw-dry", 2, 1, [], [CreatableTopicConfig("retention.ms", "1000")]),
        validate_only=True,
    ) == [("admin-raw-dry", ErrorCode.NONE)]
    assert (
        list_offset(broker.bootstrap, "admin-raw-dry", 0, LATEST)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
    # The same name twice in one request: Kafka (ControllerApis.createTopics) creates neither and
    # answers INVALID_REQUEST "Duplicate topic name." for that name.
    results = raw_create(
        broker.bootstrap, CreatableTopic("admin-raw-twice", 1, 1), CreatableTopic("admin-raw-twice", 1, 1)
    )
    assert results
    assert {name for name, _ in results} == {"admin-raw-twice"}
    assert {code for _, code in results} == {ErrorCode.INVALID_REQUEST}
    assert (
        list_offset(broker.bootstrap, "admin-raw-twice", 0, LATEST)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )

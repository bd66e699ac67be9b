"""The versions a Kafka 4.x broker advertises, and what changed in each, with raw requests (our codecs)
against the real broker: Produce v11 (TRANSACTION_ABORTABLE) and v13 (topic ids), ListOffsets v8-v11
specs, Metadata v13, OffsetCommit v9 (GROUP_ID_NOT_FOUND), OffsetCommit/OffsetFetch v10 (topic ids),
DescribeGroups v6 (GROUP_ID_NOT_FOUND), ListTransactions v2 (id pattern). Fetch v13+ and fetch sessions:
test_fetch_versions.py."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.api_versions import ApiVersionsRequest
from exactly.protocol.messages.describe_groups import DescribeGroupsRequest
from exactly.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from exactly.protocol.messages.init_producer_id import InitProducerIdRequest
from exactly.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from exactly.protocol.messages.list_transactions import ListTransactionsRequest
from exactly.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from exactly.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from exactly.protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from exactly.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from exactly.records.batch import iter_batches
from exactly.records.builder import BatchBuilder
from exactly.testing.processes import BrokerProcess
from tests.interop.client import RawClient
from tests.interop.support import create_topic, running_broker

pytestmark = pytest.mark.interop

NOW = 1_700_000_000_000
DEADLINE = 60.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory.mktemp("kafka4") / "data") as proc:
        yield proc


@pytest.fixture
def client(broker: BrokerProcess) -> Iterator[RawClient]:
    raw = RawClient(broker.bootstrap)
    try:
        yield raw
    finally:
        raw.close()


def topic_id(client: RawClient, name: str) -> uuid.UUID:
    response = client.request(ApiKey.METADATA, 13, MetadataRequest([MetadataRequestTopic(name=name)], False))
    assert response.error_code == ErrorCode.NONE
    [topic] = response.topics
    assert (topic.error_code, topic.name) == (ErrorCode.NONE, name)
    found: uuid.UUID = topic.topic_id
    return found


def batch(*values: bytes, producer_id: int = -1, epoch: int = -1, sequence: int = -1) -> bytes:
    builder = BatchBuilder(
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        is_transactional=producer_id >= 0,
    )
    for value in values:
        builder.append(NOW, None, value)
    return bytes(builder.build())


def values_at(client: RawClient, tid: uuid.UUID, partition: int = 0) -> list[bytes]:
    request = FetchRequest(
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        topics=[FetchTopic(topic_id=tid, partitions=[FetchPartition(partition, -1, 0, -1, -1, 1 << 20)])],
    )
    response = client.request(ApiKey.FETCH, 17, request)
    data = response.responses[0].partitions[0]
    assert data.error_code == ErrorCode.NONE
    return [r.value for b in iter_batches(bytes(data.records or b"")) for r in b.records() if r.value]


def test_api_versions_look_like_kafka_4(client: RawClient) -> None:
    response = client.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("test", "0"))
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert {key: ranges[key] for key in (0, 1, 2, 3, 8, 9, 10, 11, 15, 22, 24, 25, 26, 27, 28, 60, 66)} == {
        ApiKey.PRODUCE: (0, 13),
        ApiKey.FETCH: (4, 17),
        ApiKey.LIST_OFFSETS: (1, 11),
        ApiKey.METADATA: (0, 13),
        ApiKey.OFFSET_COMMIT: (2, 10),
        ApiKey.OFFSET_FETCH: (1, 10),
        ApiKey.FIND_COORDINATOR: (0, 6),
        ApiKey.JOIN_GROUP: (0, 9),
        ApiKey.DESCRIBE_GROUPS: (0, 6),
        ApiKey.INIT_PRODUCER_ID: (0, 5),
        ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),
        ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
        ApiKey.END_TXN: (0, 5),
        ApiKey.WRITE_TXN_MARKERS: (1, 1),
        ApiKey.TXN_OFFSET_COMMIT: (0, 5),
        ApiKey.DESCRIBE_CLUSTER: (0, 2),
        ApiKey.LIST_TRANSACTIONS: (0, 2),
    }


def test_produce_v13_by_topic_id(broker: BrokerProcess, client: RawClient) -> None:
    create_topic(broker.bootstrap, "produce-ids")
    tid = topic_id(client, "produce-ids")
    unknown = uuid.uuid4()
    request = ProduceRequest(
        acks=-1,
        timeout_ms=10_000,
        topic_data=[
            TopicProduceData(topic_id=tid, partition_data=[PartitionProduceData(0, batch(b"one", b"two"))]),
            TopicProduceData(topic_id=unknown, partition_data=[PartitionProduceData(0, batch(b"lost"))]),
        ],
    )
    response = client.request(ApiKey.PRODUCE, 13, request)
    got = {
        (t.topic_id, p.index): (p.error_code, p.base_offset)
        for t in response.responses
        for p in t.partition_responses
    }
    assert got == {(tid, 0): (ErrorCode.NONE, 0), (unknown, 0): (ErrorCode.UNKNOWN_TOPIC_ID, -1)}
    assert values_at(client, tid) == [b"one", b"two"]


def _init_producer(client: RawClient, txn_id: str) -> tuple[int, int]:
    deadline = time.monotonic() + DEADLINE
    while True:
        response = client.request(ApiKey.INIT_PRODUCER_ID, 5, InitProducerIdRequest(txn_id, 60_000))
        if response.error_code == ErrorCode.NONE:
            return response.producer_id, response.producer_epoch
        assert response.error_code in (
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
            ErrorCode.CONCURRENT_TRANSACTIONS,
        )
        assert time.monotonic() < deadline, response
        time.sleep(0.1)


@pytest.mark.parametrize(
    ("version", "code"), [(10, ErrorCode.INVALID_TXN_STATE), (11, ErrorCode.TRANSACTION_ABORTABLE)]
)
def test_transactional_produce_to_a_partition_not_in_the_transaction(
    broker: BrokerProcess, client: RawClient, version: int, code: ErrorCode
) -> None:
    """KIP-890: Produce v11+ gets TRANSACTION_ABORTABLE where older versions get INVALID_TXN_STATE."""
    topic = f"not-added-{version}"
    create_topic(broker.bootstrap, topic)
    txn_id = f"not-added-{version}"
    producer_id, epoch = _init_producer(client, txn_id)
    request = ProduceRequest(
        transactional_id=txn_id,
        acks=-1,
        timeout_ms=10_000,
        topic_data=[
            TopicProduceData(
                topic,
                partition_data=[
                    PartitionProduceData(0, batch(b"x", producer_id=producer_id, epoch=epoch, sequence=0))
                ],
            )
        ],
    )
    response = client.request(ApiKey.PRODUCE, version, request)
    assert [p.error_code for t in response.responses for p in t.partition_responses] == [code]
    assert values_at(client, topic_id(client, topic)) == []


def _list_offset(client: RawClient, topic: str, timestamp: int, version: int) -> tuple[int, int, int, int]:
    request = ListOffsetsRequest(-1, 0, [ListOffsetsTopic(topic, [ListOffsetsPartition(0, -1, timestamp)])])
    p = client.request(ApiKey.LIST_OFFSETS, version, request).topics[0].partitions[0]
    return p.error_code, p.offset, p.timestamp, p.leader_epoch


def test_list_offsets_tiered_specs_without_tiered_storage(broker: BrokerProcess, client: RawClient) -> None:
    create_topic(broker.bootstrap, "specs")
    tid = topic_id(client, "specs")
    client.request(
        ApiKey.PRODUCE,
        13,
        ProduceRequest(
            acks=-1,
            timeout_ms=10_000,
            topic_data=[
                TopicProduceData(
                    topic_id=tid, partition_data=[PartitionProduceData(0, batch(b"a", b"b", b"c"))]
                )
            ],
        ),
    )
    # Earliest local (-4) is the log start offset; latest tiered (-5) and earliest pending upload (-6)
    # are "no offset" when nothing is tiered.
    assert _list_offset(client, "specs", -2, 11) == (ErrorCode.NONE, 0, -1, 0)
    assert _list_offset(client, "specs", -4, 11) == (ErrorCode.NONE, 0, -1, 0)
    assert _list_offset(client, "specs", -5, 11) == (ErrorCode.NONE, -1, -1, -1)
    assert _list_offset(client, "specs", -6, 11) == (ErrorCode.NONE, -1, -1, -1)
    assert _list_offset(client, "specs", -1, 10) == (ErrorCode.NONE, 3, -1, 0)
    # A spec older than the request's version: UNSUPPORTED_VERSION for that partition.
    assert _list_offset(client, "specs", -3, 6)[0] == ErrorCode.UNSUPPORTED_VERSION
    assert _list_offset(client, "specs", -4, 7)[0] == ErrorCode.UNSUPPORTED_VERSION
    assert _list_offset(client, "specs", -5, 8)[0] == ErrorCode.UNSUPPORTED_VERSION
    assert _list_offset(client, "specs", -6, 10)[0] == ErrorCode.UNSUPPORTED_VERSION
    assert _list_offset(client, "specs", -3, 7)[0] == ErrorCode.NONE


@pytest.mark.parametrize(
    ("version", "code"), [(8, ErrorCode.ILLEGAL_GENERATION), (9, ErrorCode.GROUP_ID_NOT_FOUND)]
)
def test_offset_commit_with_generation_to_a_missing_group(
    broker: BrokerProcess, client: RawClient, version: int, code: ErrorCode
) -> None:
    create_topic(broker.bootstrap, f"oc-{version}")
    request = OffsetCommitRequest(
        f"ghost-{version}",
        2,
        "member",
        None,
        -1,
        [OffsetCommitRequestTopic(f"oc-{version}", partitions=[OffsetCommitRequestPartition(0, 7)])],
    )
    response = client.request(ApiKey.OFFSET_COMMIT, version, request)
    assert [p.error_code for t in response.topics for p in t.partitions] == [code]


@pytest.mark.parametrize("version", [5, 6])
def test_describe_unknown_group(client: RawClient, version: int) -> None:
    response = client.request(ApiKey.DESCRIBE_GROUPS, version, DescribeGroupsRequest(["never-seen"]))
    [group] = response.groups
    assert (group.group_id, group.group_state) == ("never-seen", "Dead")
    if version >= 6:
        assert (group.error_code, group.error_message) == (
            ErrorCode.GROUP_ID_NOT_FOUND,
            "Group never-seen not found.",
        )
    else:
        assert group.error_code == ErrorCode.NONE


def test_list_transactions_by_id_pattern(client: RawClient) -> None:
    for txn_id in ("pattern-a1", "pattern-a2", "pattern-b1"):
        _init_producer(client, txn_id)

    def listed(pattern: str | None, version: int = 2) -> Any:
        return client.request(
            ApiKey.LIST_TRANSACTIONS, version, ListTransactionsRequest(transactional_id_pattern=pattern)
        )

    ids = {t.transactional_id for t in listed("pattern-a.").transaction_states}
    assert ids == {"pattern-a1", "pattern-a2"}
    assert {t.transactional_id for t in listed("a1").transaction_states} == set()  # the whole id must match
    everything = {t.transactional_id for t in listed(None).transaction_states}
    assert {"pattern-a1", "pattern-a2", "pattern-b1"} <= everything
    assert {t.transactional_id for t in listed("").transaction_states} == everything
    bad = listed("pattern-(")
    assert (bad.error_code, bad.transaction_states) == (ErrorCode.INVALID_REGULAR_EXPRESSION, [])


def test_kafka_python_infers_kafka_4_3_and_still_round_trips(broker: BrokerProcess) -> None:
    """kafka-python infers its newest known release from the ranges (DescribeLogDirs 5 is Kafka 4.3's, the
    rest 4.2's) and picks ListOffsets 11 / Metadata 13 / FindCoordinator 6; a produce-consume round trip
    with a group commit works."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    create_topic(broker.bootstrap, "kp-4")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    try:
        assert producer.config["api_version"] == (4, 3)
        for i in range(5):
            producer.send("kp-4", f"v{i}".encode())
        producer.flush(DEADLINE)
    finally:
        producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id="kp-4",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    try:
        tp = TopicPartition("kp-4", 0)
        consumer.assign([tp])
        assert consumer.end_offsets([tp]) == {tp: 5}
        got: list[bytes] = []
        deadline = time.monotonic() + DEADLINE
        while len(got) < 5 and time.monotonic() < deadline:
            for records in consumer.poll(500).values():
                got += [r.value for r in records]
        assert got == [f"v{i}".encode() for i in range(5)]
        consumer.commit()
        assert consumer.committed(tp) == 5
    finally:
        consumer.close()


def test_offset_commit_and_fetch_v10_by_topic_id(broker: BrokerProcess, client: RawClient) -> None:
    create_topic(broker.bootstrap, "oc-ids", partitions=2)
    create_topic(broker.bootstrap, "oc-names")
    tid = topic_id(client, "oc-ids")
    unknown = uuid.uuid4()
    commit = OffsetCommitRequest(
        "ids-group",
        -1,
        "",
        None,
        -1,
        [
            OffsetCommitRequestTopic(
                topic_id=tid,
                partitions=[OffsetCommitRequestPartition(0, 4), OffsetCommitRequestPartition(1, 9)],
            ),
            OffsetCommitRequestTopic(topic_id=unknown, partitions=[OffsetCommitRequestPartition(0, 1)]),
        ],
    )
    committed = client.request(ApiKey.OFFSET_COMMIT, 10, commit)
    assert {
        (t.topic_id, p.partition_index): p.error_code for t in committed.topics for p in t.partitions
    } == {
        (tid, 0): ErrorCode.NONE,
        (tid, 1): ErrorCode.NONE,
        (unknown, 0): ErrorCode.UNKNOWN_TOPIC_ID,
    }
    # A v8 commit by name to the same group: v10 lists it by id too.
    by_name = OffsetCommitRequest(
        "ids-group",
        -1,
        "",
        None,
        -1,
        [OffsetCommitRequestTopic("oc-names", partitions=[OffsetCommitRequestPartition(0, 2)])],
    )
    assert (
        client.request(ApiKey.OFFSET_COMMIT, 8, by_name).topics[0].partitions[0].error_code == ErrorCode.NONE
    )
    names_id = topic_id(client, "oc-names")

    def fetch(topics: list[OffsetFetchRequestTopics] | None) -> dict[tuple[uuid.UUID, int], tuple[int, int]]:
        request = OffsetFetchRequest(
            groups=[OffsetFetchRequestGroup("ids-group", topics=topics)], require_stable=True
        )
        [group] = client.request(ApiKey.OFFSET_FETCH, 10, request).groups
        assert group.error_code == ErrorCode.NONE
        return {
            (t.topic_id, p.partition_index): (p.committed_offset, p.error_code)
            for t in group.topics
            for p in t.partitions
        }

    asked = [
        OffsetFetchRequestTopics(topic_id=tid, partition_indexes=[0, 1]),
        OffsetFetchRequestTopics(topic_id=unknown, partition_indexes=[3]),
    ]
    assert fetch(asked) == {
        (tid, 0): (4, ErrorCode.NONE),
        (tid, 1): (9, ErrorCode.NONE),
        (unknown, 3): (-1, ErrorCode.UNKNOWN_TOPIC_ID),
    }
    assert fetch(None) == {(tid, 0): (4, 0), (tid, 1): (9, 0), (names_id, 0): (2, 0)}

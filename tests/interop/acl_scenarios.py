"""One raw request per row of exactly.security.rules.RULES, for the ACL matrix (test_acl_matrix.py).

A `Scenario` sends the API's request as its principal (`exactly.debug.principal.by.client.id`) against
the resources of its `Names` and returns the error code of the resource the row is about. `needs` lists
every (api, role) the request needs in order to pass (for the rows whose API needs more than one thing);
`alternatives` are rows that each suffice on their own (CREATE on the cluster or on the topic). `passes`
is the code answered with everything granted: NONE, or the protocol's own answer to a request that is
authorized but otherwise refused (no such member, no producer id yet), which shows the authorizer let it
through.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from exactly.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
from exactly.protocol.messages.create_acls import AclCreation, CreateAclsRequest
from exactly.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from exactly.protocol.messages.delete_acls import DeleteAclsFilter, DeleteAclsRequest
from exactly.protocol.messages.delete_topics import DeleteTopicsRequest
from exactly.protocol.messages.describe_acls import DescribeAclsRequest
from exactly.protocol.messages.describe_groups import DescribeGroupsRequest
from exactly.protocol.messages.describe_transactions import DescribeTransactionsRequest
from exactly.protocol.messages.end_txn import EndTxnRequest
from exactly.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from exactly.protocol.messages.find_coordinator import FindCoordinatorRequest
from exactly.protocol.messages.heartbeat import HeartbeatRequest
from exactly.protocol.messages.init_producer_id import InitProducerIdRequest
from exactly.protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from exactly.protocol.messages.leave_group import LeaveGroupRequest
from exactly.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from exactly.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from exactly.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic
from exactly.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from exactly.protocol.messages.sync_group import SyncGroupRequest
from exactly.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from exactly.protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from exactly.records.builder import BatchBuilder
from exactly.security.rules import RULES
from tests.interop.client import RawClient

Row = tuple[ApiKey, str]


@dataclass(frozen=True, slots=True)
class Names:
    """The resources of one row (each row has its own, so rows cannot see each other's ACLs)."""

    topic: str
    group: str
    txn: str

    def of(self, row: Row) -> str:
        kind = RULES[row[0]][row[1]].resource_type.name
        return {"TOPIC": self.topic, "GROUP": self.group, "TRANSACTIONAL_ID": self.txn}.get(
            kind, "kafka-cluster"
        )


Send = Callable[[RawClient, Names], int]


@dataclass(frozen=True, slots=True)
class Scenario:
    send: Send
    passes: ErrorCode = ErrorCode.NONE
    needs: tuple[Row, ...] = ()  # besides the row itself
    alternatives: tuple[Row, ...] = ()  # rows that also suffice alone
    fresh_topic: bool = False  # the row's topic must not exist beforehand (auto-creation, CreateTopics)
    extra: dict[str, str] = field(default_factory=dict)


def _batch() -> bytes:
    builder = BatchBuilder()
    builder.append(int(time.time() * 1000), None, b"acl-matrix", [])
    return builder.build()


def produce(c: RawClient, n: Names) -> int:
    request = ProduceRequest(
        None, -1, 5000, [TopicProduceData(n.topic, partition_data=[PartitionProduceData(0, _batch())])]
    )
    return int(c.request(ApiKey.PRODUCE, 9, request).responses[0].partition_responses[0].error_code)


def produce_txn_id(c: RawClient, n: Names) -> int:
    request = ProduceRequest(
        n.txn, -1, 5000, [TopicProduceData(n.topic, partition_data=[PartitionProduceData(0, _batch())])]
    )
    return int(c.request(ApiKey.PRODUCE, 9, request).responses[0].partition_responses[0].error_code)


def fetch(c: RawClient, n: Names) -> int:
    request = FetchRequest(
        topics=[FetchTopic(n.topic, partitions=[FetchPartition(0, fetch_offset=0, partition_max_bytes=1024)])]
    )
    return int(c.request(ApiKey.FETCH, 12, request).responses[0].partitions[0].error_code)


def metadata(c: RawClient, n: Names) -> int:
    request = MetadataRequest([MetadataRequestTopic(name=n.topic)], allow_auto_topic_creation=False)
    return int(c.request(ApiKey.METADATA, 12, request).topics[0].error_code)


def metadata_create(c: RawClient, n: Names) -> int:
    request = MetadataRequest([MetadataRequestTopic(name=n.topic)], allow_auto_topic_creation=True)
    return int(c.request(ApiKey.METADATA, 12, request).topics[0].error_code)


def offset_commit(c: RawClient, n: Names) -> int:
    topic = OffsetCommitRequestTopic(n.topic, partitions=[OffsetCommitRequestPartition(0, 0)])
    request = OffsetCommitRequest(n.group, -1, "", None, -1, [topic])
    return int(c.request(ApiKey.OFFSET_COMMIT, 8, request).topics[0].partitions[0].error_code)


def offset_fetch_group(c: RawClient, n: Names) -> int:
    request = OffsetFetchRequest(n.group, [OffsetFetchRequestTopic(n.topic, [0])])
    return int(c.request(ApiKey.OFFSET_FETCH, 7, request).error_code)


def offset_fetch_topic(c: RawClient, n: Names) -> int:
    request = OffsetFetchRequest(n.group, [OffsetFetchRequestTopic(n.topic, [0])])
    return int(c.request(ApiKey.OFFSET_FETCH, 7, request).topics[0].partitions[0].error_code)


def find_group(c: RawClient, n: Names) -> int:
    return int(c.request(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(n.group, 0)).error_code)


def find_txn(c: RawClient, n: Names) -> int:
    return int(c.request(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(n.txn, 1)).error_code)


def join(c: RawClient, n: Names) -> int:
    request = JoinGroupRequest(
        n.group, 10_000, 10_000, "", None, "consumer", [JoinGroupRequestProtocol("range", b"")]
    )
    return int(c.request(ApiKey.JOIN_GROUP, 5, request).error_code)


def heartbeat(c: RawClient, n: Names) -> int:
    return int(c.request(ApiKey.HEARTBEAT, 4, HeartbeatRequest(n.group, 1, "nobody")).error_code)


def sync(c: RawClient, n: Names) -> int:
    return int(
        c.request(
            ApiKey.SYNC_GROUP, 5, SyncGroupRequest(n.group, 1, "nobody", None, "consumer", "range")
        ).error_code
    )


def leave(c: RawClient, n: Names) -> int:
    return int(c.request(ApiKey.LEAVE_GROUP, 2, LeaveGroupRequest(n.group, "nobody")).error_code)


def describe_groups(c: RawClient, n: Names) -> int:
    return int(c.request(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest([n.group])).groups[0].error_code)


def create_topics(c: RawClient, n: Names) -> int:
    request = CreateTopicsRequest([CreatableTopic(n.topic, 1, 1)], 10_000, False)
    return int(c.request(ApiKey.CREATE_TOPICS, 7, request).topics[0].error_code)


def delete_topics(c: RawClient, n: Names) -> int:
    request = DeleteTopicsRequest(topic_names=[n.topic], timeout_ms=10_000)
    return int(c.request(ApiKey.DELETE_TOPICS, 5, request).responses[0].error_code)


def init_txn(c: RawClient, n: Names) -> int:
    return int(c.request(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(n.txn, 60_000, -1, -1)).error_code)


def init_idempotent(c: RawClient, n: Names) -> int:
    return int(c.request(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(None, 60_000, -1, -1)).error_code)


def add_partitions(c: RawClient, n: Names) -> int:
    request = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=n.txn,
        v3_and_below_producer_id=424242,
        v3_and_below_producer_epoch=0,
        v3_and_below_topics=[AddPartitionsToTxnTopic(n.topic, [0])],
    )
    response = c.request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, request)
    return int(response.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)


def add_offsets(c: RawClient, n: Names) -> int:
    request = AddOffsetsToTxnRequest(n.txn, 424242, 0, n.group)
    return int(c.request(ApiKey.ADD_OFFSETS_TO_TXN, 3, request).error_code)


def end_txn(c: RawClient, n: Names) -> int:
    return int(c.request(ApiKey.END_TXN, 3, EndTxnRequest(n.txn, 424242, 0, False)).error_code)


def write_markers(c: RawClient, n: Names) -> int:
    marker = WritableTxnMarker(424242, 0, False, [WritableTxnMarkerTopic(n.topic, [0])], 0)
    response = c.request(ApiKey.WRITE_TXN_MARKERS, 1, WriteTxnMarkersRequest([marker]))
    return int(response.markers[0].topics[0].partitions[0].error_code)


def txn_offset_commit(c: RawClient, n: Names) -> int:
    topic = TxnOffsetCommitRequestTopic(n.topic, [TxnOffsetCommitRequestPartition(0, 0)])
    request = TxnOffsetCommitRequest(n.txn, n.group, 424242, 0, -1, "", None, [topic])
    return int(c.request(ApiKey.TXN_OFFSET_COMMIT, 3, request).topics[0].partitions[0].error_code)


def describe_transactions(c: RawClient, n: Names) -> int:
    request = DescribeTransactionsRequest([n.txn])
    return int(c.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, request).transaction_states[0].error_code)


def create_acls(c: RawClient, n: Names) -> int:
    creation = AclCreation(2, n.topic, 3, "User:someone", "*", 3, 3)
    return int(c.request(ApiKey.CREATE_ACLS, 2, CreateAclsRequest([creation])).results[0].error_code)


def describe_acls(c: RawClient, n: Names) -> int:
    return int(
        c.request(ApiKey.DESCRIBE_ACLS, 2, DescribeAclsRequest(2, n.topic, 1, None, None, 1, 1)).error_code
    )


def delete_acls(c: RawClient, n: Names) -> int:
    request = DeleteAclsRequest([DeleteAclsFilter(2, n.topic, 3, "User:nobody", None, 1, 1)])
    return int(c.request(ApiKey.DELETE_ACLS, 2, request).filter_results[0].error_code)


_A, _E = ApiKey, ErrorCode
SCENARIOS: dict[Row, Scenario] = {
    (_A.PRODUCE, "topic"): Scenario(produce),
    (_A.PRODUCE, "transactional_id"): Scenario(produce_txn_id, needs=((_A.PRODUCE, "topic"),)),
    (_A.FETCH, "topic"): Scenario(fetch),
    (_A.METADATA, "topic"): Scenario(metadata),
    (_A.METADATA, "create_cluster"): Scenario(
        metadata_create,
        needs=((_A.METADATA, "topic"),),
        alternatives=((_A.METADATA, "create_topic"),),
        fresh_topic=True,
    ),
    (_A.METADATA, "create_topic"): Scenario(
        metadata_create,
        needs=((_A.METADATA, "topic"),),
        alternatives=((_A.METADATA, "create_cluster"),),
        fresh_topic=True,
    ),
    (_A.OFFSET_COMMIT, "group"): Scenario(offset_commit, needs=((_A.OFFSET_COMMIT, "topic"),)),
    (_A.OFFSET_COMMIT, "topic"): Scenario(offset_commit, needs=((_A.OFFSET_COMMIT, "group"),)),
    (_A.OFFSET_FETCH, "group"): Scenario(offset_fetch_group, needs=((_A.OFFSET_FETCH, "topic"),)),
    (_A.OFFSET_FETCH, "topic"): Scenario(offset_fetch_topic, needs=((_A.OFFSET_FETCH, "group"),)),
    (_A.FIND_COORDINATOR, "group"): Scenario(find_group),
    (_A.FIND_COORDINATOR, "transactional_id"): Scenario(find_txn),
    (_A.JOIN_GROUP, "group"): Scenario(join, passes=_E.MEMBER_ID_REQUIRED),
    (_A.HEARTBEAT, "group"): Scenario(heartbeat, passes=_E.UNKNOWN_MEMBER_ID),
    (_A.SYNC_GROUP, "group"): Scenario(sync, passes=_E.UNKNOWN_MEMBER_ID),
    (_A.LEAVE_GROUP, "group"): Scenario(leave, passes=_E.UNKNOWN_MEMBER_ID),
    (_A.DESCRIBE_GROUPS, "group"): Scenario(describe_groups),
    (_A.CREATE_TOPICS, "cluster"): Scenario(
        create_topics, alternatives=((_A.CREATE_TOPICS, "topic"),), fresh_topic=True
    ),
    (_A.CREATE_TOPICS, "topic"): Scenario(
        create_topics, alternatives=((_A.CREATE_TOPICS, "cluster"),), fresh_topic=True
    ),
    (_A.DELETE_TOPICS, "topic"): Scenario(delete_topics),
    (_A.INIT_PRODUCER_ID, "transactional_id"): Scenario(init_txn),
    (_A.INIT_PRODUCER_ID, "idempotent"): Scenario(
        init_idempotent, alternatives=((_A.INIT_PRODUCER_ID, "idempotent_topic"),)
    ),
    (_A.INIT_PRODUCER_ID, "idempotent_topic"): Scenario(
        init_idempotent, alternatives=((_A.INIT_PRODUCER_ID, "idempotent"),)
    ),
    (_A.ADD_PARTITIONS_TO_TXN, "transactional_id"): Scenario(
        add_partitions, passes=_E.INVALID_PRODUCER_ID_MAPPING, needs=((_A.ADD_PARTITIONS_TO_TXN, "topic"),)
    ),
    (_A.ADD_PARTITIONS_TO_TXN, "topic"): Scenario(
        add_partitions,
        passes=_E.INVALID_PRODUCER_ID_MAPPING,
        needs=((_A.ADD_PARTITIONS_TO_TXN, "transactional_id"),),
    ),
    (_A.ADD_OFFSETS_TO_TXN, "transactional_id"): Scenario(
        add_offsets, passes=_E.INVALID_PRODUCER_ID_MAPPING, needs=((_A.ADD_OFFSETS_TO_TXN, "group"),)
    ),
    (_A.ADD_OFFSETS_TO_TXN, "group"): Scenario(
        add_offsets,
        passes=_E.INVALID_PRODUCER_ID_MAPPING,
        needs=((_A.ADD_OFFSETS_TO_TXN, "transactional_id"),),
    ),
    (_A.END_TXN, "transactional_id"): Scenario(end_txn, passes=_E.INVALID_PRODUCER_ID_MAPPING),
    (_A.WRITE_TXN_MARKERS, "cluster"): Scenario(write_markers),
    (_A.TXN_OFFSET_COMMIT, "transactional_id"): Scenario(
        txn_offset_commit,
        passes=_E.INVALID_PRODUCER_ID_MAPPING,
        needs=((_A.TXN_OFFSET_COMMIT, "group"), (_A.TXN_OFFSET_COMMIT, "topic")),
    ),
    (_A.TXN_OFFSET_COMMIT, "group"): Scenario(
        txn_offset_commit,
        passes=_E.INVALID_PRODUCER_ID_MAPPING,
        needs=((_A.TXN_OFFSET_COMMIT, "transactional_id"), (_A.TXN_OFFSET_COMMIT, "topic")),
    ),
    (_A.TXN_OFFSET_COMMIT, "topic"): Scenario(
        txn_offset_commit,
        passes=_E.INVALID_PRODUCER_ID_MAPPING,
        needs=((_A.TXN_OFFSET_COMMIT, "transactional_id"), (_A.TXN_OFFSET_COMMIT, "group")),
    ),
    (_A.DESCRIBE_TRANSACTIONS, "transactional_id"): Scenario(
        describe_transactions, passes=_E.TRANSACTIONAL_ID_NOT_FOUND
    ),
    (_A.CREATE_ACLS, "cluster"): Scenario(create_acls),
    (_A.DESCRIBE_ACLS, "cluster"): Scenario(describe_acls),
    (_A.DELETE_ACLS, "cluster"): Scenario(delete_acls),
}

"""One raw request per row of exactly.security.rules.RULES, for the ACL matrix (test_acl_matrix.py).

A `Scenario` sends the API's request as its principal (a client authenticated as its SCRAM user) against
the resources of its `Names` and returns the error code of the resource the row is about. `needs` lists
every (api, role) the request needs in order to pass (for the rows whose API needs more than one thing);
`alternatives` are rows that each suffice on their own (CREATE on the cluster or on the topic). `passes`
is the code answered with everything granted: NONE, or the protocol's own answer to a request that is
authorized but otherwise refused (no such member, no producer id yet), which shows the authorizer let it
through.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages import add_share_acks_to_txn as txn_acks
from exactly.protocol.messages import delete_share_group_state as delete_state
from exactly.protocol.messages import initialize_share_group_state as init_state
from exactly.protocol.messages import read_share_group_state as read_state
from exactly.protocol.messages import read_share_group_state_summary as state_summary
from exactly.protocol.messages import write_share_group_state as write_state
from exactly.protocol.messages.abort_batch import AbortBatchRequest
from exactly.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from exactly.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from exactly.protocol.messages.alter_client_quotas import AlterClientQuotasRequest, EntryData, OpData
from exactly.protocol.messages.alter_client_quotas import EntityData as AlterEntity
from exactly.protocol.messages.alter_configs import AlterableConfig, AlterConfigsRequest, AlterConfigsResource
from exactly.protocol.messages.alter_partition_reassignments import AlterPartitionReassignmentsRequest
from exactly.protocol.messages.alter_replica_log_dirs import (
    AlterReplicaLogDir,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirTopic,
)
from exactly.protocol.messages.alter_share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
)
from exactly.protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    ScramCredentialUpsertion,
)
from exactly.protocol.messages.commit_batch import CommitBatchRequest
from exactly.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from exactly.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from exactly.protocol.messages.create_acls import AclCreation, CreateAclsRequest
from exactly.protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsTopic
from exactly.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from exactly.protocol.messages.delete_acls import DeleteAclsFilter, DeleteAclsRequest
from exactly.protocol.messages.delete_groups import DeleteGroupsRequest
from exactly.protocol.messages.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from exactly.protocol.messages.delete_share_group_offsets import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequestTopic,
)
from exactly.protocol.messages.delete_topics import DeleteTopicsRequest
from exactly.protocol.messages.describe_acls import DescribeAclsRequest
from exactly.protocol.messages.describe_client_quotas import DescribeClientQuotasRequest
from exactly.protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from exactly.protocol.messages.describe_groups import DescribeGroupsRequest
from exactly.protocol.messages.describe_log_dirs import DescribeLogDirsRequest
from exactly.protocol.messages.describe_producers import DescribeProducersRequest
from exactly.protocol.messages.describe_producers import TopicRequest as ProducersTopic
from exactly.protocol.messages.describe_quorum import DescribeQuorumRequest, PartitionData, TopicData
from exactly.protocol.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsRequestTopic,
)
from exactly.protocol.messages.describe_topic_partitions import DescribeTopicPartitionsRequest
from exactly.protocol.messages.describe_topic_partitions import TopicRequest as PartitionsTopic
from exactly.protocol.messages.describe_transactions import DescribeTransactionsRequest
from exactly.protocol.messages.describe_user_scram_credentials import DescribeUserScramCredentialsRequest
from exactly.protocol.messages.elect_leaders import ElectLeadersRequest, TopicPartitions
from exactly.protocol.messages.end_txn import EndTxnRequest
from exactly.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from exactly.protocol.messages.find_coordinator import FindCoordinatorRequest
from exactly.protocol.messages.heartbeat import HeartbeatRequest
from exactly.protocol.messages.incremental_alter_configs import AlterableConfig as IncrementalConfig
from exactly.protocol.messages.incremental_alter_configs import AlterConfigsResource as IncrementalResource
from exactly.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from exactly.protocol.messages.init_producer_id import InitProducerIdRequest
from exactly.protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from exactly.protocol.messages.leave_group import LeaveGroupRequest
from exactly.protocol.messages.list_config_resources import ListConfigResourcesRequest
from exactly.protocol.messages.list_groups import ListGroupsRequest
from exactly.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from exactly.protocol.messages.list_partition_reassignments import ListPartitionReassignmentsRequest
from exactly.protocol.messages.list_prepared_txns import ListPreparedTxnsRequest
from exactly.protocol.messages.list_transactions import ListTransactionsRequest
from exactly.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from exactly.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from exactly.protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from exactly.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic
from exactly.protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from exactly.protocol.messages.prepare_txn import PrepareTxnRequest
from exactly.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from exactly.protocol.messages.share_acknowledge import (
    AcknowledgementBatch,
    AcknowledgePartition,
    AcknowledgeTopic,
    ShareAcknowledgeRequest,
)
from exactly.protocol.messages.share_fetch import FetchPartition as ShareFetchPartition
from exactly.protocol.messages.share_fetch import FetchTopic as ShareFetchTopic
from exactly.protocol.messages.share_fetch import ShareFetchRequest
from exactly.protocol.messages.share_group_describe import ShareGroupDescribeRequest
from exactly.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
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
from exactly.records.builder import BatchBuilder, build_batch
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
    setup: Callable[[RawClient, Names], None] | None = None  # run by the super user beforehand
    listing: bool = False  # a listing: what may not be seen is left out (`passes` if listed, else the error)


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


def follower_fetch(c: RawClient, n: Names) -> int:
    """A fetch as broker 7's replica fetcher sends it (replica id 7): CLUSTER_ACTION, not TOPIC READ."""
    request = FetchRequest(
        replica_id=7,
        topics=[
            FetchTopic(n.topic, partitions=[FetchPartition(0, fetch_offset=0, partition_max_bytes=1024)])
        ],
    )
    return int(c.request(ApiKey.FETCH, 12, request).responses[0].partitions[0].error_code)


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


def verify_partitions(c: RawClient, n: Names) -> int:
    """AddPartitionsToTxn v4, VerifyOnly: what a partition leader asks a transaction coordinator."""
    txn = AddPartitionsToTxnTransaction(n.txn, 424242, 0, True, [AddPartitionsToTxnTopic(n.topic, [0])])
    response = c.request(ApiKey.ADD_PARTITIONS_TO_TXN, 4, AddPartitionsToTxnRequest([txn]))
    if response.error_code:
        return int(response.error_code)
    return int(
        response.results_by_transaction[0].topic_results[0].results_by_partition[0].partition_error_code
    )


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


def list_offsets(c: RawClient, n: Names) -> int:
    request = ListOffsetsRequest(-1, 0, [ListOffsetsTopic(n.topic, [ListOffsetsPartition(0, -1, -1)])])
    return int(c.request(ApiKey.LIST_OFFSETS, 7, request).topics[0].partitions[0].error_code)


def delete_groups(c: RawClient, n: Names) -> int:
    return int(c.request(ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest([n.group])).results[0].error_code)


def offset_delete(c: RawClient, n: Names) -> int:
    return int(c.request(ApiKey.OFFSET_DELETE, 0, OffsetDeleteRequest(n.group, [])).error_code)


def offset_delete_topic(c: RawClient, n: Names) -> int:
    topic = OffsetDeleteRequestTopic(n.topic, [OffsetDeleteRequestPartition(0)])
    response = c.request(ApiKey.OFFSET_DELETE, 0, OffsetDeleteRequest(n.group, [topic]))
    assert response.error_code == ErrorCode.NONE
    return int(response.topics[0].partitions[0].error_code)


def delete_records(c: RawClient, n: Names) -> int:
    request = DeleteRecordsRequest([DeleteRecordsTopic(n.topic, [DeleteRecordsPartition(0, 0)])], 5000)
    return int(c.request(ApiKey.DELETE_RECORDS, 2, request).topics[0].partitions[0].error_code)


def create_partitions(c: RawClient, n: Names) -> int:
    request = CreatePartitionsRequest([CreatePartitionsTopic(n.topic, 2, None)], 5000, True)
    return int(c.request(ApiKey.CREATE_PARTITIONS, 3, request).results[0].error_code)


def _describe_configs(kind: int) -> Send:
    def send(c: RawClient, n: Names) -> int:
        name = n.topic if kind == 2 else "0"
        request = DescribeConfigsRequest([DescribeConfigsResource(kind, name, None)], False, False)
        return int(c.request(ApiKey.DESCRIBE_CONFIGS, 4, request).results[0].error_code)

    return send


def _alter_configs(kind: int) -> Send:
    def send(c: RawClient, n: Names) -> int:
        name, config = (n.topic, "retention.ms") if kind == 2 else ("0", "log.cleaner.backoff.ms")
        resource = AlterConfigsResource(kind, name, [AlterableConfig(config, "60000")])
        return int(
            c.request(ApiKey.ALTER_CONFIGS, 2, AlterConfigsRequest([resource], True)).responses[0].error_code
        )

    return send


def _incremental_alter_configs(kind: int) -> Send:
    def send(c: RawClient, n: Names) -> int:
        name, config = (n.topic, "retention.ms") if kind == 2 else ("0", "log.cleaner.backoff.ms")
        resource = IncrementalResource(kind, name, [IncrementalConfig(config, 0, "60000")])
        request = IncrementalAlterConfigsRequest([resource], True)
        return int(c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, request).responses[0].error_code)

    return send


def describe_log_dirs(c: RawClient, n: Names) -> int:
    return int(c.request(ApiKey.DESCRIBE_LOG_DIRS, 4, DescribeLogDirsRequest(None)).error_code)


def alter_replica_log_dirs(c: RawClient, n: Names) -> int:
    """To a dir that is not the broker's: LOG_DIR_NOT_FOUND once allowed (nothing moves)."""
    request = AlterReplicaLogDirsRequest(
        [AlterReplicaLogDir("/no/such/log/dir", [AlterReplicaLogDirTopic(n.topic, [0])])]
    )
    response = c.request(ApiKey.ALTER_REPLICA_LOG_DIRS, 2, request)
    return int(response.results[0].partitions[0].error_code)


def describe_quorum(c: RawClient, n: Names) -> int:
    request = DescribeQuorumRequest([TopicData("__cluster_metadata", [PartitionData(0)])])
    return int(c.request(ApiKey.DESCRIBE_QUORUM, 2, request).error_code)


def list_config_resources(c: RawClient, n: Names) -> int:
    return int(c.request(ApiKey.LIST_CONFIG_RESOURCES, 1, ListConfigResourcesRequest([2])).error_code)


def alter_client_quotas(c: RawClient, n: Names) -> int:
    entry = EntryData([AlterEntity("client-id", n.group)], [OpData("producer_byte_rate", 1e6, False)])
    request = AlterClientQuotasRequest([entry], True)
    return int(c.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, request).entries[0].error_code)


def describe_client_quotas(c: RawClient, n: Names) -> int:
    return int(c.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, DescribeClientQuotasRequest([], False)).error_code)


def describe_scram(c: RawClient, n: Names) -> int:
    request = DescribeUserScramCredentialsRequest(None)
    return int(c.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, request).error_code)


def alter_scram(c: RawClient, n: Names) -> int:
    upsert = ScramCredentialUpsertion(f"user-{n.topic}", 1, 4096, b"salt", bytes(32))
    request = AlterUserScramCredentialsRequest([], [upsert])
    return int(c.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, request).results[0].error_code)


def elect_leaders(c: RawClient, n: Names) -> int:
    request = ElectLeadersRequest(0, [TopicPartitions(n.topic, [0])], 5000)
    return int(c.request(ApiKey.ELECT_LEADERS, 2, request).error_code)


def alter_reassignments(c: RawClient, n: Names) -> int:
    return int(
        c.request(
            ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, AlterPartitionReassignmentsRequest(5000)
        ).error_code
    )


def list_reassignments(c: RawClient, n: Names) -> int:
    request = ListPartitionReassignmentsRequest(5000, None)
    return int(c.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, request).error_code)


def offset_for_leader_epoch(c: RawClient, n: Names) -> int:
    request = OffsetForLeaderEpochRequest(
        -1, [OffsetForLeaderTopic(n.topic, [OffsetForLeaderPartition(0, -1, 0)])]
    )
    return int(c.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, request).topics[0].partitions[0].error_code)


def describe_producers(c: RawClient, n: Names) -> int:
    request = DescribeProducersRequest([ProducersTopic(n.topic, [0])])
    return int(c.request(ApiKey.DESCRIBE_PRODUCERS, 0, request).topics[0].partitions[0].error_code)


def describe_topic_partitions(c: RawClient, n: Names) -> int:
    request = DescribeTopicPartitionsRequest([PartitionsTopic(n.topic)], 100, None)
    return int(c.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, request).topics[0].error_code)


def _listed(row: Row, present: bool) -> int:
    """A filtered listing's answer as a code: NONE if the row's resource is listed, else the row's error."""
    return int(ErrorCode.NONE if present else RULES[row[0]][row[1]].error)


def _make_group(admin: RawClient, n: Names) -> None:
    assert offset_commit(admin, n) == ErrorCode.NONE


def _list_groups(row: Row) -> Send:
    def send(c: RawClient, n: Names) -> int:
        groups = c.request(ApiKey.LIST_GROUPS, 4, ListGroupsRequest([])).groups
        return _listed(row, any(g.group_id == n.group for g in groups))

    return send


def _make_txn(admin: RawClient, n: Names) -> None:
    assert init_txn(admin, n) == ErrorCode.NONE


def list_transactions(c: RawClient, n: Names) -> int:
    states = c.request(ApiKey.LIST_TRANSACTIONS, 0, ListTransactionsRequest([], [])).transaction_states
    return _listed(
        (ApiKey.LIST_TRANSACTIONS, "transactional_id"), any(t.transactional_id == n.txn for t in states)
    )


def _ongoing(admin: RawClient, n: Names) -> None:
    """A transaction of `n.txn` with one record in partition 0 of `n.topic`."""
    init = admin.request(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(n.txn, 60_000, -1, -1))
    assert init.error_code == ErrorCode.NONE
    pid, epoch = init.producer_id, init.producer_epoch
    request = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=n.txn,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[AddPartitionsToTxnTopic(n.topic, [0])],
    )
    added = admin.request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, request)
    assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
    batch = build_batch(
        [(None, b"prepared")], producer_id=pid, producer_epoch=epoch, base_sequence=0, is_transactional=True
    )
    produce_request = ProduceRequest(
        n.txn, -1, 5000, [TopicProduceData(n.topic, partition_data=[PartitionProduceData(0, batch)])]
    )
    produced = admin.request(ApiKey.PRODUCE, 9, produce_request)
    assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE


def _query(n: Names) -> str:
    return f"q-{n.txn}"


def prepare(c: RawClient, n: Names) -> int:
    return int(c.request(ApiKey.PREPARE_TXN, 0, PrepareTxnRequest(n.txn, _query(n), 1, 0)).error_code)


def _prepared(admin: RawClient, n: Names) -> None:
    _ongoing(admin, n)
    assert prepare(admin, n) == ErrorCode.NONE


def commit_batch(c: RawClient, n: Names) -> int:
    return int(c.request(ApiKey.COMMIT_BATCH, 0, CommitBatchRequest(_query(n), 1, [n.txn])).error_code)


def abort_batch(c: RawClient, n: Names) -> int:
    return int(c.request(ApiKey.ABORT_BATCH, 0, AbortBatchRequest(_query(n), 1)).error_code)


def list_prepared(c: RawClient, n: Names) -> int:
    listed = c.request(ApiKey.LIST_PREPARED_TXNS, 0, ListPreparedTxnsRequest(_query(n))).transactions
    return _listed(
        (ApiKey.LIST_PREPARED_TXNS, "transactional_id"), any(t.transactional_id == n.txn for t in listed)
    )


def consumer_group_heartbeat(c: RawClient, n: Names) -> int:
    request = ConsumerGroupHeartbeatRequest(
        n.group,
        "acl-member",
        0,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=[n.topic],
        topic_partitions=[],
    )
    return int(c.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, request).error_code)


def consumer_group_describe(c: RawClient, n: Names) -> int:
    request = ConsumerGroupDescribeRequest([n.group])
    return int(c.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, request).groups[0].error_code)


_TOPIC_IDS: dict[str, uuid.UUID] = {}


def remember_topic_id(c: RawClient, n: Names) -> None:
    """Setup (as the super user): the row's topic id, which the share APIs name topics by."""
    request = MetadataRequest([MetadataRequestTopic(name=n.topic)], allow_auto_topic_creation=False)
    _TOPIC_IDS[n.topic] = c.request(ApiKey.METADATA, 12, request).topics[0].topic_id


def share_group_heartbeat(c: RawClient, n: Names) -> int:
    request = ShareGroupHeartbeatRequest(n.group, "member-1", 0, None, [n.topic])
    return int(c.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, request).error_code)


def share_group_describe(c: RawClient, n: Names) -> int:
    request = ShareGroupDescribeRequest([n.group])
    return int(c.request(ApiKey.SHARE_GROUP_DESCRIBE, 1, request).groups[0].error_code)


def share_fetch(c: RawClient, n: Names) -> int:
    topic = ShareFetchTopic(_TOPIC_IDS[n.topic], [ShareFetchPartition(0)])
    request = ShareFetchRequest(n.group, "member-1", 0, 0, 1, 1 << 20, 10, 10, [topic])
    response = c.request(ApiKey.SHARE_FETCH, 1, request)
    if response.error_code:
        return int(response.error_code)
    return int(response.responses[0].partitions[0].error_code)


def share_acknowledge_no_session(c: RawClient, n: Names) -> int:
    request = ShareAcknowledgeRequest(n.group, "member-1", 1, [])
    return int(c.request(ApiKey.SHARE_ACKNOWLEDGE, 1, request).error_code)


def share_acknowledge(c: RawClient, n: Names) -> int:
    opened = c.request(ApiKey.SHARE_FETCH, 1, ShareFetchRequest(n.group, "member-1", 0, 0, 1, 1 << 20, 0, 0))
    if opened.error_code:
        return int(opened.error_code)
    batch = AcknowledgementBatch(0, 0, [1])
    topic = AcknowledgeTopic(_TOPIC_IDS[n.topic], [AcknowledgePartition(0, [batch])])
    response = c.request(
        ApiKey.SHARE_ACKNOWLEDGE, 1, ShareAcknowledgeRequest(n.group, "member-1", 1, [topic])
    )
    if response.error_code:
        return int(response.error_code)
    return int(response.responses[0].partitions[0].error_code)


def add_share_acks(c: RawClient, n: Names) -> int:
    """AddShareAcksToTxn (exactly's extension) of an unknown producer: allowed through, the transaction
    coordinator refuses it (INVALID_PRODUCER_ID_MAPPING, the partition's code)."""
    batch = txn_acks.AcknowledgementBatch(0, 0, [1])
    topic = txn_acks.AcknowledgeTopic(_TOPIC_IDS[n.topic], [txn_acks.AcknowledgePartition(0, [batch])])
    request = txn_acks.AddShareAcksToTxnRequest(n.txn, 424242, 0, n.group, "member-1", [topic])
    response = c.request(ApiKey.ADD_SHARE_ACKS_TO_TXN, 0, request)
    if response.error_code:
        return int(response.error_code)
    return int(response.responses[0].partitions[0].error_code)


def find_share(c: RawClient, n: Names) -> int:
    """FindCoordinator v6, key type SHARE (brokers' persisters): `group:topicId:partition`."""
    request = FindCoordinatorRequest(key_type=2, coordinator_keys=[f"{n.group}:AAAAAAAAAAAAAAAAAAAAAA:0"])
    return int(c.request(ApiKey.FIND_COORDINATOR, 6, request).coordinators[0].error_code)


_STATE_TOPIC_ID = uuid.UUID(int=0x5EA7)  # the share coordinator RPCs do not look topics up


def _state_code(response: Any) -> int:
    return int(response.results[0].partitions[0].error_code)


def initialize_share_state(c: RawClient, n: Names) -> int:
    data = init_state.InitializeStateData(_STATE_TOPIC_ID, [init_state.PartitionData(0, 0, 0)])
    request = init_state.InitializeShareGroupStateRequest(n.group, [data])
    return _state_code(c.request(ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, request))


def read_share_state(c: RawClient, n: Names) -> int:
    data = read_state.ReadStateData(_STATE_TOPIC_ID, [read_state.PartitionData(0, 0)])
    request = read_state.ReadShareGroupStateRequest(n.group, [data])
    return _state_code(c.request(ApiKey.READ_SHARE_GROUP_STATE, 0, request))


def write_share_state(c: RawClient, n: Names) -> int:
    """A write of a state never initialised: INVALID_REQUEST when allowed."""
    data = write_state.WriteStateData(_STATE_TOPIC_ID, [write_state.PartitionData(0, 0, 0, 0, [])])
    request = write_state.WriteShareGroupStateRequest(n.group, [data])
    return _state_code(c.request(ApiKey.WRITE_SHARE_GROUP_STATE, 0, request))


def delete_share_state(c: RawClient, n: Names) -> int:
    data = delete_state.DeleteStateData(_STATE_TOPIC_ID, [delete_state.PartitionData(0)])
    request = delete_state.DeleteShareGroupStateRequest(n.group, [data])
    return _state_code(c.request(ApiKey.DELETE_SHARE_GROUP_STATE, 0, request))


def share_state_summary(c: RawClient, n: Names) -> int:
    data = state_summary.ReadStateSummaryData(_STATE_TOPIC_ID, [state_summary.PartitionData(0, 0)])
    request = state_summary.ReadShareGroupStateSummaryRequest(n.group, [data])
    return _state_code(c.request(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 0, request))


def _make_share_group(admin: RawClient, n: Names) -> None:
    """Setup: an empty share group (a member joins and leaves), so its offsets may be changed."""
    assert share_group_heartbeat(admin, n) == ErrorCode.NONE
    leave = ShareGroupHeartbeatRequest(n.group, "member-1", -1, None, None)
    assert admin.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, leave).error_code == ErrorCode.NONE


def describe_share_group_offsets(c: RawClient, n: Names) -> int:
    asked = DescribeShareGroupOffsetsRequestGroup(
        n.group, [DescribeShareGroupOffsetsRequestTopic(n.topic, [0])]
    )
    group = c.request(
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, DescribeShareGroupOffsetsRequest([asked])
    ).groups[0]
    if group.error_code:
        return int(group.error_code)
    return int(group.topics[0].partitions[0].error_code)


def alter_share_group_offsets(c: RawClient, n: Names) -> int:
    topic = AlterShareGroupOffsetsRequestTopic(n.topic, [AlterShareGroupOffsetsRequestPartition(0, 0)])
    response = c.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, AlterShareGroupOffsetsRequest(n.group, [topic]))
    if response.error_code:
        return int(response.error_code)
    return int(response.responses[0].partitions[0].error_code)


def delete_share_group_offsets(c: RawClient, n: Names) -> int:
    topic = DeleteShareGroupOffsetsRequestTopic(n.topic)
    response = c.request(
        ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, DeleteShareGroupOffsetsRequest(n.group, [topic])
    )
    if response.error_code:
        return int(response.error_code)
    return int(response.responses[0].error_code)


_A, _E = ApiKey, ErrorCode
SCENARIOS: dict[Row, Scenario] = {
    (_A.DESCRIBE_SHARE_GROUP_OFFSETS, "group"): Scenario(
        describe_share_group_offsets, needs=((_A.DESCRIBE_SHARE_GROUP_OFFSETS, "topic"),)
    ),
    (_A.DESCRIBE_SHARE_GROUP_OFFSETS, "topic"): Scenario(
        describe_share_group_offsets, needs=((_A.DESCRIBE_SHARE_GROUP_OFFSETS, "group"),)
    ),
    # an unknown group is refused after the group's ACL, for the whole request
    (_A.ALTER_SHARE_GROUP_OFFSETS, "group"): Scenario(
        alter_share_group_offsets, passes=_E.GROUP_ID_NOT_FOUND
    ),
    (_A.ALTER_SHARE_GROUP_OFFSETS, "topic"): Scenario(
        alter_share_group_offsets, needs=((_A.ALTER_SHARE_GROUP_OFFSETS, "group"),), setup=_make_share_group
    ),
    (_A.DELETE_SHARE_GROUP_OFFSETS, "group"): Scenario(
        delete_share_group_offsets, passes=_E.GROUP_ID_NOT_FOUND
    ),
    # granted, the group has no state for the topic: Kafka's "no offset information to delete"
    (_A.DELETE_SHARE_GROUP_OFFSETS, "topic"): Scenario(
        delete_share_group_offsets,
        passes=_E.UNKNOWN_TOPIC_OR_PARTITION,
        needs=((_A.DELETE_SHARE_GROUP_OFFSETS, "group"),),
        setup=_make_share_group,
    ),
    (_A.SHARE_GROUP_HEARTBEAT, "group"): Scenario(
        share_group_heartbeat, needs=((_A.SHARE_GROUP_HEARTBEAT, "topic"),)
    ),
    (_A.SHARE_GROUP_HEARTBEAT, "topic"): Scenario(
        share_group_heartbeat, needs=((_A.SHARE_GROUP_HEARTBEAT, "group"),)
    ),
    (_A.SHARE_GROUP_DESCRIBE, "group"): Scenario(share_group_describe, passes=_E.GROUP_ID_NOT_FOUND),
    (_A.SHARE_FETCH, "group"): Scenario(
        share_fetch, needs=((_A.SHARE_FETCH, "topic"),), setup=remember_topic_id
    ),
    (_A.SHARE_FETCH, "topic"): Scenario(
        share_fetch, needs=((_A.SHARE_FETCH, "group"),), setup=remember_topic_id
    ),
    # READ on the group covers ShareFetch (opening the session) and ShareAcknowledge alike
    (_A.SHARE_ACKNOWLEDGE, "group"): Scenario(
        share_acknowledge_no_session, passes=_E.SHARE_SESSION_NOT_FOUND
    ),
    (_A.SHARE_ACKNOWLEDGE, "topic"): Scenario(
        share_acknowledge,
        passes=_E.INVALID_RECORD_STATE,
        needs=((_A.SHARE_ACKNOWLEDGE, "group"),),
        setup=remember_topic_id,
    ),
    (_A.CONSUMER_GROUP_HEARTBEAT, "group"): Scenario(
        consumer_group_heartbeat, needs=((_A.CONSUMER_GROUP_HEARTBEAT, "topic"),)
    ),
    (_A.CONSUMER_GROUP_HEARTBEAT, "topic"): Scenario(
        consumer_group_heartbeat, needs=((_A.CONSUMER_GROUP_HEARTBEAT, "group"),)
    ),
    (_A.CONSUMER_GROUP_DESCRIBE, "group"): Scenario(consumer_group_describe, passes=_E.GROUP_ID_NOT_FOUND),
    (_A.PRODUCE, "topic"): Scenario(produce),
    (_A.PRODUCE, "transactional_id"): Scenario(produce_txn_id, needs=((_A.PRODUCE, "topic"),)),
    (_A.FETCH, "topic"): Scenario(fetch),
    (_A.FETCH, "follower"): Scenario(follower_fetch),
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
    (_A.FIND_COORDINATOR, "share"): Scenario(find_share),
    (_A.INITIALIZE_SHARE_GROUP_STATE, "cluster"): Scenario(initialize_share_state),
    (_A.READ_SHARE_GROUP_STATE, "cluster"): Scenario(read_share_state),
    (_A.WRITE_SHARE_GROUP_STATE, "cluster"): Scenario(write_share_state, passes=_E.INVALID_REQUEST),
    (_A.DELETE_SHARE_GROUP_STATE, "cluster"): Scenario(delete_share_state),
    (_A.READ_SHARE_GROUP_STATE_SUMMARY, "cluster"): Scenario(share_state_summary),
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
    (_A.ADD_SHARE_ACKS_TO_TXN, "transactional_id"): Scenario(
        add_share_acks,
        passes=_E.INVALID_PRODUCER_ID_MAPPING,
        needs=((_A.ADD_SHARE_ACKS_TO_TXN, "group"), (_A.ADD_SHARE_ACKS_TO_TXN, "topic")),
        setup=remember_topic_id,
    ),
    (_A.ADD_SHARE_ACKS_TO_TXN, "group"): Scenario(
        add_share_acks,
        passes=_E.INVALID_PRODUCER_ID_MAPPING,
        needs=((_A.ADD_SHARE_ACKS_TO_TXN, "transactional_id"), (_A.ADD_SHARE_ACKS_TO_TXN, "topic")),
        setup=remember_topic_id,
    ),
    (_A.ADD_SHARE_ACKS_TO_TXN, "topic"): Scenario(
        add_share_acks,
        passes=_E.INVALID_PRODUCER_ID_MAPPING,
        needs=((_A.ADD_SHARE_ACKS_TO_TXN, "transactional_id"), (_A.ADD_SHARE_ACKS_TO_TXN, "group")),
        setup=remember_topic_id,
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
    (_A.ADD_PARTITIONS_TO_TXN, "cluster"): Scenario(verify_partitions, passes=_E.INVALID_PRODUCER_ID_MAPPING),
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
    (_A.LIST_OFFSETS, "topic"): Scenario(list_offsets),
    (_A.LIST_GROUPS, "cluster"): Scenario(
        _list_groups((_A.LIST_GROUPS, "cluster")), setup=_make_group, listing=True
    ),
    (_A.LIST_GROUPS, "group"): Scenario(
        _list_groups((_A.LIST_GROUPS, "group")), setup=_make_group, listing=True
    ),
    (_A.DELETE_GROUPS, "group"): Scenario(delete_groups, passes=_E.GROUP_ID_NOT_FOUND),
    (_A.OFFSET_DELETE, "group"): Scenario(offset_delete, passes=_E.GROUP_ID_NOT_FOUND),
    (_A.OFFSET_DELETE, "topic"): Scenario(
        offset_delete_topic, needs=((_A.OFFSET_DELETE, "group"),), setup=_make_group
    ),
    (_A.DELETE_RECORDS, "topic"): Scenario(delete_records),
    (_A.CREATE_PARTITIONS, "topic"): Scenario(create_partitions),
    (_A.DESCRIBE_CONFIGS, "topic"): Scenario(_describe_configs(2)),
    (_A.DESCRIBE_CONFIGS, "broker"): Scenario(_describe_configs(4)),
    (_A.ALTER_CONFIGS, "topic"): Scenario(_alter_configs(2)),
    (_A.ALTER_CONFIGS, "broker"): Scenario(_alter_configs(4)),
    (_A.INCREMENTAL_ALTER_CONFIGS, "topic"): Scenario(_incremental_alter_configs(2)),
    (_A.INCREMENTAL_ALTER_CONFIGS, "broker"): Scenario(_incremental_alter_configs(4)),
    (_A.DESCRIBE_LOG_DIRS, "cluster"): Scenario(describe_log_dirs),
    (_A.ALTER_REPLICA_LOG_DIRS, "cluster"): Scenario(
        alter_replica_log_dirs, passes=ErrorCode.LOG_DIR_NOT_FOUND
    ),
    (_A.DESCRIBE_QUORUM, "cluster"): Scenario(describe_quorum),
    (_A.LIST_CONFIG_RESOURCES, "cluster"): Scenario(list_config_resources),
    (_A.ALTER_CLIENT_QUOTAS, "cluster"): Scenario(alter_client_quotas),
    (_A.DESCRIBE_CLIENT_QUOTAS, "cluster"): Scenario(describe_client_quotas),
    (_A.DESCRIBE_USER_SCRAM_CREDENTIALS, "cluster"): Scenario(describe_scram),
    (_A.ALTER_USER_SCRAM_CREDENTIALS, "cluster"): Scenario(alter_scram),
    (_A.ELECT_LEADERS, "cluster"): Scenario(elect_leaders),
    (_A.ALTER_PARTITION_REASSIGNMENTS, "cluster"): Scenario(alter_reassignments),
    (_A.LIST_PARTITION_REASSIGNMENTS, "cluster"): Scenario(list_reassignments),
    (_A.OFFSET_FOR_LEADER_EPOCH, "topic"): Scenario(offset_for_leader_epoch),
    (_A.DESCRIBE_PRODUCERS, "topic"): Scenario(describe_producers),
    (_A.LIST_TRANSACTIONS, "transactional_id"): Scenario(list_transactions, setup=_make_txn, listing=True),
    (_A.DESCRIBE_TOPIC_PARTITIONS, "topic"): Scenario(describe_topic_partitions),
    (_A.PREPARE_TXN, "transactional_id"): Scenario(prepare, setup=_ongoing),
    (_A.COMMIT_BATCH, "transactional_id"): Scenario(commit_batch, setup=_prepared),
    (_A.ABORT_BATCH, "transactional_id"): Scenario(abort_batch, setup=_prepared),
    (_A.LIST_PREPARED_TXNS, "transactional_id"): Scenario(list_prepared, setup=_prepared, listing=True),
}

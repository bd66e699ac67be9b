"""What each API needs from the authorizer: the one table (Kafka's KafkaApis / AuthHelper rules).

`RULES[api][role]` is a `Need`: an operation on a resource type, the error code a refused request or
resource gets, and which resource of the request is checked (`role`). Handlers ask
`exactly.broker.guard.allowed(ctx, api, role, name)`; the ACL matrix test is generated from this table,
so adding an API here adds its rows there.

Rules of more than one Need (Kafka's):
- Produce: TOPIC WRITE per topic; transactional also TRANSACTIONAL_ID WRITE (the whole request refused).
  Idempotent producers need IDEMPOTENT_WRITE on the cluster or WRITE on any topic (InitProducerId).
- Fetch: a consumer needs TOPIC READ per topic; a follower (replica id >= 0) needs CLUSTER_ACTION on the
  cluster instead, and without it every partition is TOPIC_AUTHORIZATION_FAILED (Kafka's
  handleFetchRequest). Brokers' principals are usually in `super.users`.
- TxnOffsetCommit: TRANSACTIONAL_ID WRITE, GROUP READ, then TOPIC READ per partition.
- OffsetCommit / OffsetFetch: GROUP READ, then TOPIC READ (OffsetCommit) / DESCRIBE (OffsetFetch) per topic.
- Describe / Alter / DeleteShareGroupOffsets: GROUP DESCRIBE / READ / DELETE, then TOPIC DESCRIBE / READ /
  READ per topic.
- Metadata: topics not DESCRIBE-able are answered TOPIC_AUTHORIZATION_FAILED when asked by name and
  left out of "all topics"; auto-creation needs CREATE on the cluster or the topic.
- CreateTopics: CREATE on the cluster or on the topic.
- ListTransactions / DescribeTransactions / ListGroups: entries the principal may not DESCRIBE are left
  out (ListGroups: unless it may DESCRIBE the cluster) or refused per entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.security.operations import AclOperation, ResourceType


@dataclass(frozen=True, slots=True)
class Need:
    resource_type: ResourceType
    operation: AclOperation
    error: ErrorCode
    filtered: bool = False  # the resource is silently left out of a listing rather than refused


_T, _G, _C, _X = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
)
_O = AclOperation
_E = ErrorCode
TOPIC_FAIL = _E.TOPIC_AUTHORIZATION_FAILED
GROUP_FAIL = _E.GROUP_AUTHORIZATION_FAILED
TXN_FAIL = _E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
CLUSTER_FAIL = _E.CLUSTER_AUTHORIZATION_FAILED


def _n(rt: ResourceType, op: AclOperation, error: ErrorCode, filtered: bool = False) -> Need:
    return Need(rt, op, error, filtered)


_A = ApiKey
RULES: Mapping[ApiKey, Mapping[str, Need]] = MappingProxyType(
    {
        _A.PRODUCE: {"topic": _n(_T, _O.WRITE, TOPIC_FAIL), "transactional_id": _n(_X, _O.WRITE, TXN_FAIL)},
        _A.FETCH: {"topic": _n(_T, _O.READ, TOPIC_FAIL), "follower": _n(_C, _O.CLUSTER_ACTION, TOPIC_FAIL)},
        _A.LIST_OFFSETS: {"topic": _n(_T, _O.DESCRIBE, TOPIC_FAIL)},
        _A.METADATA: {
            "topic": _n(_T, _O.DESCRIBE, TOPIC_FAIL, filtered=True),
            "create_cluster": _n(_C, _O.CREATE, TOPIC_FAIL),
            "create_topic": _n(_T, _O.CREATE, TOPIC_FAIL),
        },
        _A.OFFSET_COMMIT: {"group": _n(_G, _O.READ, GROUP_FAIL), "topic": _n(_T, _O.READ, TOPIC_FAIL)},
        _A.OFFSET_FETCH: {"group": _n(_G, _O.DESCRIBE, GROUP_FAIL), "topic": _n(_T, _O.DESCRIBE, TOPIC_FAIL)},
        _A.FIND_COORDINATOR: {
            "group": _n(_G, _O.DESCRIBE, GROUP_FAIL),
            "transactional_id": _n(_X, _O.DESCRIBE, TXN_FAIL),
            "share": _n(_C, _O.CLUSTER_ACTION, CLUSTER_FAIL),  # key type SHARE: brokers' persisters
        },
        _A.JOIN_GROUP: {"group": _n(_G, _O.READ, GROUP_FAIL)},
        _A.HEARTBEAT: {"group": _n(_G, _O.READ, GROUP_FAIL)},
        _A.LEAVE_GROUP: {"group": _n(_G, _O.READ, GROUP_FAIL)},
        _A.SYNC_GROUP: {"group": _n(_G, _O.READ, GROUP_FAIL)},
        _A.DESCRIBE_GROUPS: {"group": _n(_G, _O.DESCRIBE, GROUP_FAIL)},
        _A.LIST_GROUPS: {
            "cluster": _n(_C, _O.DESCRIBE, CLUSTER_FAIL),
            "group": _n(_G, _O.DESCRIBE, GROUP_FAIL, filtered=True),
        },
        _A.DELETE_GROUPS: {"group": _n(_G, _O.DELETE, GROUP_FAIL)},
        _A.CONSUMER_GROUP_HEARTBEAT: {
            "group": _n(_G, _O.READ, GROUP_FAIL),
            "topic": _n(_T, _O.DESCRIBE, TOPIC_FAIL),
        },
        _A.CONSUMER_GROUP_DESCRIBE: {"group": _n(_G, _O.DESCRIBE, GROUP_FAIL)},
        _A.SHARE_GROUP_HEARTBEAT: {
            "group": _n(_G, _O.READ, GROUP_FAIL),
            "topic": _n(_T, _O.DESCRIBE, TOPIC_FAIL),
        },
        _A.SHARE_GROUP_DESCRIBE: {"group": _n(_G, _O.DESCRIBE, GROUP_FAIL)},
        _A.SHARE_FETCH: {"group": _n(_G, _O.READ, GROUP_FAIL), "topic": _n(_T, _O.READ, TOPIC_FAIL)},
        _A.SHARE_ACKNOWLEDGE: {"group": _n(_G, _O.READ, GROUP_FAIL), "topic": _n(_T, _O.READ, TOPIC_FAIL)},
        _A.OFFSET_DELETE: {"group": _n(_G, _O.DELETE, GROUP_FAIL), "topic": _n(_T, _O.READ, TOPIC_FAIL)},
        _A.DESCRIBE_SHARE_GROUP_OFFSETS: {
            "group": _n(_G, _O.DESCRIBE, GROUP_FAIL),
            "topic": _n(_T, _O.DESCRIBE, TOPIC_FAIL),
        },
        _A.ALTER_SHARE_GROUP_OFFSETS: {
            "group": _n(_G, _O.READ, GROUP_FAIL),
            "topic": _n(_T, _O.READ, TOPIC_FAIL),
        },
        _A.DELETE_SHARE_GROUP_OFFSETS: {
            "group": _n(_G, _O.DELETE, GROUP_FAIL),
            "topic": _n(_T, _O.READ, TOPIC_FAIL),
        },
        _A.CREATE_TOPICS: {"cluster": _n(_C, _O.CREATE, TOPIC_FAIL), "topic": _n(_T, _O.CREATE, TOPIC_FAIL)},
        _A.DELETE_TOPICS: {"topic": _n(_T, _O.DELETE, TOPIC_FAIL)},
        _A.DELETE_RECORDS: {"topic": _n(_T, _O.DELETE, TOPIC_FAIL)},
        _A.CREATE_PARTITIONS: {"topic": _n(_T, _O.ALTER, TOPIC_FAIL)},
        _A.INIT_PRODUCER_ID: {
            "transactional_id": _n(_X, _O.WRITE, TXN_FAIL),
            "idempotent": _n(_C, _O.IDEMPOTENT_WRITE, CLUSTER_FAIL),
            "idempotent_topic": _n(_T, _O.WRITE, CLUSTER_FAIL),
        },
        _A.ADD_PARTITIONS_TO_TXN: {
            "transactional_id": _n(_X, _O.WRITE, TXN_FAIL),
            "topic": _n(_T, _O.WRITE, TOPIC_FAIL),
            "cluster": _n(_C, _O.CLUSTER_ACTION, CLUSTER_FAIL),  # v4+: brokers' VerifyOnly batches
        },
        _A.ADD_OFFSETS_TO_TXN: {
            "transactional_id": _n(_X, _O.WRITE, TXN_FAIL),
            "group": _n(_G, _O.READ, GROUP_FAIL),
        },
        _A.END_TXN: {"transactional_id": _n(_X, _O.WRITE, TXN_FAIL)},
        _A.WRITE_TXN_MARKERS: {"cluster": _n(_C, _O.CLUSTER_ACTION, CLUSTER_FAIL)},
        # the share coordinator RPCs (KIP-932): brokers only
        _A.INITIALIZE_SHARE_GROUP_STATE: {"cluster": _n(_C, _O.CLUSTER_ACTION, CLUSTER_FAIL)},
        _A.READ_SHARE_GROUP_STATE: {"cluster": _n(_C, _O.CLUSTER_ACTION, CLUSTER_FAIL)},
        _A.WRITE_SHARE_GROUP_STATE: {"cluster": _n(_C, _O.CLUSTER_ACTION, CLUSTER_FAIL)},
        _A.DELETE_SHARE_GROUP_STATE: {"cluster": _n(_C, _O.CLUSTER_ACTION, CLUSTER_FAIL)},
        _A.READ_SHARE_GROUP_STATE_SUMMARY: {"cluster": _n(_C, _O.CLUSTER_ACTION, CLUSTER_FAIL)},
        _A.TXN_OFFSET_COMMIT: {
            "transactional_id": _n(_X, _O.WRITE, TXN_FAIL),
            "group": _n(_G, _O.READ, GROUP_FAIL),
            "topic": _n(_T, _O.READ, TOPIC_FAIL),
        },
        _A.DESCRIBE_CONFIGS: {
            "topic": _n(_T, _O.DESCRIBE_CONFIGS, TOPIC_FAIL),
            "broker": _n(_C, _O.DESCRIBE_CONFIGS, CLUSTER_FAIL),
        },
        _A.ALTER_CONFIGS: {
            "topic": _n(_T, _O.ALTER_CONFIGS, TOPIC_FAIL),
            "broker": _n(_C, _O.ALTER_CONFIGS, CLUSTER_FAIL),
        },
        _A.INCREMENTAL_ALTER_CONFIGS: {
            "topic": _n(_T, _O.ALTER_CONFIGS, TOPIC_FAIL),
            "broker": _n(_C, _O.ALTER_CONFIGS, CLUSTER_FAIL),
        },
        _A.DESCRIBE_LOG_DIRS: {"cluster": _n(_C, _O.DESCRIBE, CLUSTER_FAIL)},
        _A.ALTER_REPLICA_LOG_DIRS: {"cluster": _n(_C, _O.ALTER, CLUSTER_FAIL)},
        _A.DESCRIBE_QUORUM: {"cluster": _n(_C, _O.DESCRIBE, CLUSTER_FAIL)},
        _A.LIST_CONFIG_RESOURCES: {"cluster": _n(_C, _O.DESCRIBE_CONFIGS, CLUSTER_FAIL)},
        _A.CREATE_ACLS: {"cluster": _n(_C, _O.ALTER, CLUSTER_FAIL)},
        _A.DELETE_ACLS: {"cluster": _n(_C, _O.ALTER, CLUSTER_FAIL)},
        _A.DESCRIBE_ACLS: {"cluster": _n(_C, _O.DESCRIBE, CLUSTER_FAIL)},
        _A.DESCRIBE_USER_SCRAM_CREDENTIALS: {"cluster": _n(_C, _O.DESCRIBE, CLUSTER_FAIL)},
        _A.ALTER_USER_SCRAM_CREDENTIALS: {"cluster": _n(_C, _O.ALTER, CLUSTER_FAIL)},
        _A.ALTER_CLIENT_QUOTAS: {"cluster": _n(_C, _O.ALTER_CONFIGS, CLUSTER_FAIL)},
        _A.DESCRIBE_CLIENT_QUOTAS: {"cluster": _n(_C, _O.DESCRIBE_CONFIGS, CLUSTER_FAIL)},
        _A.ELECT_LEADERS: {"cluster": _n(_C, _O.ALTER, CLUSTER_FAIL)},
        _A.ALTER_PARTITION_REASSIGNMENTS: {"cluster": _n(_C, _O.ALTER, CLUSTER_FAIL)},
        _A.LIST_PARTITION_REASSIGNMENTS: {"cluster": _n(_C, _O.DESCRIBE, CLUSTER_FAIL)},
        _A.OFFSET_FOR_LEADER_EPOCH: {"topic": _n(_T, _O.DESCRIBE, TOPIC_FAIL)},
        _A.DESCRIBE_PRODUCERS: {"topic": _n(_T, _O.READ, TOPIC_FAIL)},
        _A.DESCRIBE_TRANSACTIONS: {"transactional_id": _n(_X, _O.DESCRIBE, TXN_FAIL)},
        _A.LIST_TRANSACTIONS: {"transactional_id": _n(_X, _O.DESCRIBE, TXN_FAIL, filtered=True)},
        _A.DESCRIBE_TOPIC_PARTITIONS: {"topic": _n(_T, _O.DESCRIBE, TOPIC_FAIL, filtered=True)},
        # exactly's two-phase commit extension (docs/two-phase-commit.md)
        _A.PREPARE_TXN: {"transactional_id": _n(_X, _O.WRITE, TXN_FAIL)},
        _A.COMMIT_BATCH: {"transactional_id": _n(_X, _O.WRITE, TXN_FAIL)},
        _A.ABORT_BATCH: {"transactional_id": _n(_X, _O.WRITE, TXN_FAIL)},
        _A.LIST_PREPARED_TXNS: {"transactional_id": _n(_X, _O.DESCRIBE, TXN_FAIL, filtered=True)},
        # exactly's transactional share acks (docs/share-transactional-acks.md): as AddOffsetsToTxn, and
        # TOPIC READ as ShareAcknowledge
        _A.ADD_SHARE_ACKS_TO_TXN: {
            "transactional_id": _n(_X, _O.WRITE, TXN_FAIL),
            "group": _n(_G, _O.READ, GROUP_FAIL),
            "topic": _n(_T, _O.READ, TOPIC_FAIL),
        },
    }
)


def need(api: ApiKey, role: str) -> Need:
    return RULES[api][role]


__all__ = ["RULES", "Need", "need"]

"""DescribeQuorum (key 55): the metadata quorum, as Kafka 4's `kafka-metadata-quorum.sh` and admin
clients (`describeMetadataQuorum`) ask for it, answered for what exactly has.

Only `__cluster_metadata` partition 0 is described (anything else: UNKNOWN_TOPIC_OR_PARTITION for every
partition, as Kafka's `KafkaRaftClient`). One broker alone is the only voter and the leader, epoch 1 (a
quorum's first election); its metadata offset is the number of records of `__cluster_metadata.log`. In a
replicated cluster the controller is the leader and only voter, its epoch the controller epoch
(`/controller_epoch`), and every other live broker an observer; the metadata offset is the answering
broker's view of the cluster (`MetadataCache.version`), the log end offset of replicas it cannot see is
-1 (Kafka's "unknown"). The leader's fetch and caught-up times are now, as Kafka reports its leader's.
v2 adds each voter's endpoint (the listener the request came in on). Needs DESCRIBE on the cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.cluster import znodes
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.describe_quorum import (
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    Listener,
    Node,
    ReplicaState,
    ResponsePartitionData,
    ResponseTopicData,
)

METADATA_TOPIC = "__cluster_metadata"
SINGLE_BROKER_EPOCH = 1
UNKNOWN = -1
ZK_READ_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class QuorumView:
    """What the answering broker knows of the quorum: the leader (the only voter), its epoch, the metadata
    offset, the observers, and the log end offset of each replica it knows (the others: unknown)."""

    leader: int
    epoch: int
    high_watermark: int
    observers: tuple[int, ...]
    end_offsets: dict[int, int]


def partition_state(view: QuorumView, now_ms: int) -> ResponsePartitionData:
    """Partition 0 of `__cluster_metadata` as the quorum's leader would describe it."""

    def replica(node: int) -> ReplicaState:
        if node == view.leader:
            return ReplicaState(
                node,
                log_end_offset=view.high_watermark,
                last_fetch_timestamp=now_ms,
                last_caught_up_timestamp=now_ms,
            )
        return ReplicaState(node, log_end_offset=view.end_offsets.get(node, UNKNOWN))

    return ResponsePartitionData(
        partition_index=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        leader_id=view.leader,
        leader_epoch=view.epoch,
        high_watermark=view.high_watermark,
        current_voters=[replica(view.leader)],
        observers=[replica(node) for node in view.observers],
    )


def only_metadata_partition(request: DescribeQuorumRequest) -> bool:
    """Kafka's `hasValidTopicPartition`: exactly one topic, __cluster_metadata, with only partition 0."""
    return (
        len(request.topics) == 1
        and request.topics[0].topic_name == METADATA_TOPIC
        and [p.partition_index for p in request.topics[0].partitions] == [0]
    )


@handler(ApiKey.DESCRIBE_QUORUM)
async def handle(ctx: RequestContext, request: DescribeQuorumRequest) -> DescribeQuorumResponse:
    if not authz.allowed(ctx, ApiKey.DESCRIBE_QUORUM, "cluster"):
        return DescribeQuorumResponse(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    if not only_metadata_partition(request):
        return DescribeQuorumResponse(
            ErrorCode.NONE,
            None,
            [
                ResponseTopicData(
                    topic.topic_name,
                    [
                        ResponsePartitionData(
                            p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, UNKNOWN, UNKNOWN
                        )
                        for p in topic.partitions
                    ],
                )
                for topic in request.topics
            ],
        )
    view, endpoint = await _view(ctx)
    host, port = endpoint
    listener = (ctx.listener or ctx.broker.config.listeners[0]).name
    return DescribeQuorumResponse(
        ErrorCode.NONE,
        None,
        [ResponseTopicData(METADATA_TOPIC, [partition_state(view, int(time.time() * 1000))])],
        [Node(view.leader, [Listener(listener, host, port)])] if port >= 0 else [],
    )


async def _view(ctx: RequestContext) -> tuple[QuorumView, tuple[str, int]]:
    """The quorum as this broker sees it, and the leader's endpoint on the request's listener."""
    broker = ctx.broker
    node = broker.config.node_id
    cluster = broker.cluster
    if cluster is None:
        offset = broker.metadata.end_offset
        return QuorumView(node, SINGLE_BROKER_EPOCH, offset, (), {node: offset}), ctx.advertised
    cache = cluster.cache
    listener = (ctx.listener or broker.config.listeners[0]).name
    leader = cache.controller_id
    epoch = UNKNOWN
    with contextlib.suppress(Exception):  # ZooKeeper unreachable: the epoch is unknown
        found = await asyncio.wait_for(cluster.zk.get(znodes.CONTROLLER_EPOCH), ZK_READ_TIMEOUT_S)
        if found is not None:
            epoch = znodes.decode_controller_epoch(found[0])
    observers = tuple(b for b, *_ in cache.live_brokers(listener) if b != leader)
    endpoint = cache.endpoint(leader, listener) or ("", UNKNOWN)
    return QuorumView(leader, epoch, cache.version, observers, {node: cache.version}), endpoint

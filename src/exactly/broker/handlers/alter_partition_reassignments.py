"""AlterPartitionReassignments (key 45). In a cluster the controller starts, replaces or cancels each
partition's reassignment in its topic znode (exactly.cluster.reassignment: the new replicas catch up and
join the ISR, then the old ones are removed); a broker that is not the controller answers NOT_CONTROLLER,
as Kafka's ZooKeeper-mode brokers do (clients send it to the controller Metadata names).

On one broker the only valid replica set is [this node].

Per partition, with the checks and messages of Kafka's controller
(ReplicationControlManager.alterPartitionReassignment and validateManualPartitionAssignment):

- unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION;
- replicas null (cancel): NO_REASSIGNMENT_IN_PROGRESS, since nothing is ever being reassigned;
- an empty list, a broker other than this one, or this one twice: INVALID_REPLICA_ASSIGNMENT;
- [this node]: NONE, a no-op (the partition already lives there, so nothing is stored).

allow_replication_factor_change (v1, KIP-860) is echoed; with one valid target of one replica the
replication factor can never change.
"""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode, KafkaError
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)


def check_reassignment(
    partitions: int | None, topic: str, partition: int, replicas: list[int] | None, node: int
) -> None:
    """Raise the KafkaError Kafka's controller gives for reassigning `topic`-`partition` (which has
    `partitions` partitions, None if the topic does not exist) to `replicas` on a cluster of `node`."""
    if partitions is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {topic}.")
    if not 0 <= partition < partitions:
        raise KafkaError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {topic}:{partition}."
        )
    if replicas is None:
        raise KafkaError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress.")
    if not replicas:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.",
        )
    previous: int | None = None
    for broker_id in sorted(replicas):
        if broker_id != node:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes broker {broker_id}, "
                "but no such broker is registered.",
            )
        if broker_id == previous:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes the broker {broker_id} more than once.",
            )
        previous = broker_id


@handler(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
async def handle(
    ctx: RequestContext, request: AlterPartitionReassignmentsRequest
) -> AlterPartitionReassignmentsResponse:
    broker = ctx.broker
    if not authz.allowed(ctx, ApiKey.ALTER_PARTITION_REASSIGNMENTS, "cluster"):
        return AlterPartitionReassignmentsResponse(
            allow_replication_factor_change=request.allow_replication_factor_change,
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            error_message=None,
            responses=[],
        )
    if broker.cluster is not None:
        return await _in_cluster(ctx, request)
    node = broker.config.node_id
    responses = []
    for topic in request.topics:
        info = broker.metadata.topics.get(topic.name)
        count = info.partitions if info is not None else None
        partitions = []
        for p in topic.partitions:
            try:
                check_reassignment(count, topic.name, p.partition_index, p.replicas, node)
            except KafkaError as e:
                partitions.append(ReassignablePartitionResponse(p.partition_index, e.code, e.message))
                continue
            partitions.append(ReassignablePartitionResponse(p.partition_index, ErrorCode.NONE, None))
        responses.append(ReassignableTopicResponse(topic.name, partitions))
    return AlterPartitionReassignmentsResponse(
        allow_replication_factor_change=request.allow_replication_factor_change,
        error_code=ErrorCode.NONE,
        error_message=None,
        responses=responses,
    )


async def _in_cluster(
    ctx: RequestContext, request: AlterPartitionReassignmentsRequest
) -> AlterPartitionReassignmentsResponse:
    cluster = ctx.broker.cluster
    assert cluster is not None
    if not cluster.controller.active:
        return AlterPartitionReassignmentsResponse(
            allow_replication_factor_change=request.allow_replication_factor_change,
            error_code=ErrorCode.NOT_CONTROLLER,
            error_message="this broker is not the controller",
            responses=[],
        )
    changes = [(t.name, p.partition_index, p.replicas) for t in request.topics for p in t.partitions]
    outcome = await cluster.controller.alter_reassignments(changes)
    return AlterPartitionReassignmentsResponse(
        allow_replication_factor_change=request.allow_replication_factor_change,
        error_code=ErrorCode.NONE,
        error_message=None,
        responses=[
            ReassignableTopicResponse(
                t.name,
                [
                    ReassignablePartitionResponse(p.partition_index, *outcome[(t.name, p.partition_index)])
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ],
    )

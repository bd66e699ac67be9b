"""ListPartitionReassignments (key 46): on one broker no reassignment is ever in progress; in a cluster,
the partitions whose topic znode names replicas being added or removed (any broker answers from its view
of ZooKeeper).

Kafka's controller lists only partitions with an ongoing reassignment and silently skips unknown
topics and partitions; one broker alone always answers an empty list with no error.
"""

from __future__ import annotations

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.cluster.reassignment import reassigning
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
)


@handler(ApiKey.LIST_PARTITION_REASSIGNMENTS)
async def handle(
    ctx: RequestContext, request: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    if not authz.allowed(ctx, ApiKey.LIST_PARTITION_REASSIGNMENTS, "cluster"):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return ListPartitionReassignmentsResponse(error_code=code, error_message=None, topics=[])
    cluster = ctx.broker.cluster
    topics: list[OngoingTopicReassignment] = []
    if cluster is not None:
        wanted = None
        if request.topics is not None:
            wanted = {t.name: set(t.partition_indexes) for t in request.topics}
        for topic, partition, assignment in reassigning(cluster.cache.assignments):
            if wanted is not None and partition not in wanted.get(topic, ()):
                continue
            if not topics or topics[-1].name != topic:
                topics.append(OngoingTopicReassignment(topic, []))
            topics[-1].partitions.append(
                OngoingPartitionReassignment(
                    partition,
                    list(assignment.partitions[partition]),
                    list(assignment.adding.get(partition, ())),
                    list(assignment.removing.get(partition, ())),
                )
            )
    return ListPartitionReassignmentsResponse(error_code=ErrorCode.NONE, error_message=None, topics=topics)

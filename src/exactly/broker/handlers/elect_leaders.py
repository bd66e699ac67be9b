"""ElectLeaders (key 43): on one broker every partition already has its preferred leader.

As Kafka's controller (ReplicationControlManager.electLeaders): each named partition gets
ELECTION_NOT_NEEDED (its only replica leads, for PREFERRED and UNCLEAN elections alike), or
UNKNOWN_TOPIC_OR_PARTITION with Kafka's message. `topic_partitions` null means every partition of every
topic, and then partitions that need no election are left out: each topic is listed with no results. An
election type other than 0 (PREFERRED) or 1 (UNCLEAN) fails the whole request with INVALID_REQUEST, at
the top level and on every named partition (ElectLeadersRequest.getErrorResponse).
"""

from __future__ import annotations

from enum import IntEnum

from exactly.broker import guard as authz
from exactly.broker.context import RequestContext
from exactly.broker.dispatch import handler
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.elect_leaders import (
    ElectLeadersRequest,
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
)


class ElectionType(IntEnum):
    PREFERRED = 0
    UNCLEAN = 1


_ELECTION_TYPES = frozenset(t.value for t in ElectionType)


@handler(ApiKey.ELECT_LEADERS)
async def handle(ctx: RequestContext, request: ElectLeadersRequest) -> ElectLeadersResponse:
    topics = ctx.broker.metadata.topics
    if not authz.allowed(ctx, ApiKey.ELECT_LEADERS, "cluster"):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return ElectLeadersResponse(
            error_code=code,
            replica_election_results=[
                ReplicaElectionResult(t.topic, [PartitionResult(p, code, None) for p in t.partitions])
                for t in request.topic_partitions or []
            ],
        )
    if request.election_type not in _ELECTION_TYPES:
        message = f"Unknown election type {request.election_type}"
        return ElectLeadersResponse(
            error_code=ErrorCode.INVALID_REQUEST,
            replica_election_results=[
                ReplicaElectionResult(
                    t.topic, [PartitionResult(p, ErrorCode.INVALID_REQUEST, message) for p in t.partitions]
                )
                for t in request.topic_partitions or []
            ],
        )
    if request.topic_partitions is None:
        # Every partition has its preferred leader, and those are not reported.
        return ElectLeadersResponse(
            error_code=ErrorCode.NONE,
            replica_election_results=[ReplicaElectionResult(name, []) for name in sorted(topics)],
        )
    results = []
    for wanted in request.topic_partitions:
        info = topics.get(wanted.topic)
        partitions = []
        for p in wanted.partitions:
            if info is None:
                partitions.append(
                    PartitionResult(
                        p, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {wanted.topic}"
                    )
                )
            elif not 0 <= p < info.partitions:
                partitions.append(
                    PartitionResult(
                        p, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {wanted.topic}-{p}"
                    )
                )
            else:
                partitions.append(PartitionResult(p, ErrorCode.ELECTION_NOT_NEEDED, None))
        results.append(ReplicaElectionResult(wanted.topic, partitions))
    return ElectLeadersResponse(error_code=ErrorCode.NONE, replica_election_results=results)

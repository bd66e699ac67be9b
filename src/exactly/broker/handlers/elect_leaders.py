"""ElectLeaders (key 43). In a cluster the controller runs the election (PREFERRED: the first assigned
replica leads if it is live and in the ISR; UNCLEAN: a partition without a live leader takes any live
replica) and answers per partition NONE, ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE or
ELIGIBLE_LEADERS_NOT_AVAILABLE; another broker answers NOT_CONTROLLER (clients send it to the controller).

On one broker every partition already has its preferred leader.

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
    if ctx.broker.cluster is not None:
        return await _in_cluster(ctx, request)
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


async def _in_cluster(ctx: RequestContext, request: ElectLeadersRequest) -> ElectLeadersResponse:
    cluster = ctx.broker.cluster
    assert cluster is not None
    if not cluster.controller.active:
        code = ErrorCode.NOT_CONTROLLER
        return ElectLeadersResponse(
            error_code=code,
            replica_election_results=[
                ReplicaElectionResult(t.topic, [PartitionResult(p, code, None) for p in t.partitions])
                for t in request.topic_partitions or []
            ],
        )
    every = request.topic_partitions is None
    if request.topic_partitions is None:
        wanted = [(t, p) for t, a in sorted(cluster.cache.assignments.items()) for p in sorted(a.partitions)]
    else:
        wanted = [(t.topic, p) for t in request.topic_partitions for p in t.partitions]
    outcome = await cluster.controller.elect_leaders(
        wanted, unclean=request.election_type == ElectionType.UNCLEAN
    )
    by_topic: dict[str, list[PartitionResult]] = {}
    for (topic, partition), (code, message) in outcome.items():
        results = by_topic.setdefault(topic, [])
        if every and code == ErrorCode.ELECTION_NOT_NEEDED:
            continue  # "all partitions": the ones that need no election are not reported, as in Kafka
        results.append(PartitionResult(partition, code, message))
    return ElectLeadersResponse(
        error_code=ErrorCode.NONE,
        replica_election_results=[ReplicaElectionResult(t, r) for t, r in by_topic.items()],
    )

"""Leader hints (KIP-951) and the replica questions Produce and Fetch share in a cluster.

A Produce (v10+) answering NOT_LEADER_OR_FOLLOWER, or a Fetch (v16+) answering NOT_LEADER_OR_FOLLOWER or
FENCED_LEADER_EPOCH, tells the client who leads the partition now (`current_leader`: leader id and
epoch) and where that leader is (the response's `node_endpoints`, for the listener the request came in
on), so the client can go there without a Metadata round trip. As Kafka's `KafkaApis.getCurrentLeader`:
this broker's own replica of the partition first, else the metadata cache; an unknown leader is
(-1, -1) and adds no endpoint, nor does a leader with no endpoint on the listener.

`missing_partition_error` is Kafka's `ReplicaManager.getPartitionOrError` for a partition this broker has
no replica of: NOT_LEADER_OR_FOLLOWER when the cluster has it (the client's metadata is stale), else
UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from exactly.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from exactly.broker.context import RequestContext

__all__ = [
    "LeaderHint",
    "current_leader",
    "leader_endpoint",
    "missing_partition_error",
    "rack_on_listener",
]

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class LeaderHint:
    """A partition's leader as this broker knows it, and that leader's endpoint on a listener."""

    leader_id: int
    leader_epoch: int
    endpoint: tuple[int, str, int, str | None] | None  # (node id, host, port, rack); None: not known


def _listener(ctx: RequestContext) -> str:
    return (ctx.listener or ctx.broker.config.listeners[0]).name


def current_leader(ctx: RequestContext, topic: str, index: int) -> LeaderHint:
    """The partition's current leader and its endpoint for the request's listener."""
    broker = ctx.broker
    leader_id, leader_epoch = NO_LEADER, -1
    try:
        partition = broker.replicas.partition(topic, index)
    except KafkaError:  # an offline log: fall back to the metadata cache, as Kafka
        partition = None
    if partition is not None and (partition.is_leader or partition.leader_id != NO_LEADER):
        leader_id, leader_epoch = partition.leader_id, partition.leader_epoch
    elif broker.cluster is not None:
        view = broker.cluster.cache.partition(topic, index)
        if view is not None and index in broker.cluster.cache.assignments[topic].partitions:
            leader_id, leader_epoch = view.leader, view.leader_epoch
    return LeaderHint(leader_id, leader_epoch, leader_endpoint(ctx, leader_id))


def leader_endpoint(ctx: RequestContext, broker_id: int) -> tuple[int, str, int, str | None] | None:
    """(id, host, port, rack) of a live broker on the request's listener, or None."""
    cluster = ctx.broker.cluster
    if broker_id < 0 or cluster is None:
        return None
    registration = cluster.cache.brokers.get(broker_id)
    if registration is None:
        return None
    endpoint = registration.endpoint(_listener(ctx))
    if endpoint is None:
        return None
    return broker_id, endpoint.host, endpoint.port, registration.rack


def missing_partition_error(ctx: RequestContext, topic: str, index: int) -> ErrorCode:
    """The error for a partition this broker has no replica of."""
    cluster = ctx.broker.cluster
    if cluster is not None:
        assignment = cluster.cache.assignments.get(topic)
        if assignment is not None and index in assignment.partitions:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def rack_on_listener(ctx: RequestContext, broker_id: int) -> str | None:
    """The rack of a live broker with an endpoint on the request's listener (None: no rack, or none)."""
    found = leader_endpoint(ctx, broker_id)
    return found[3] if found is not None else None

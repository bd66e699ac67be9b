"""The preferred read replica (KIP-392, fetching from the closest replica): which replica the leader tells
a consumer to fetch from instead of itself.

A broker with `replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector` answers
a consumer's Fetch (v11+, which carries the client's `rack_id`) for a partition it leads with
`preferred_read_replica` and no records when a better replica exists; the consumer then fetches from
that replica, which serves it up to its own high watermark. Kafka's rules
(`ReplicaManager.findPreferredReadReplica`, `RackAwareReplicaSelector`, `ReplicaView.comparator`):

- only the leader chooses, and only for consumers (a follower's own replication fetch never);
- the candidates are the leader and the followers in the (committed) ISR whose log, as far as the
  leader knows from their fetches, covers the fetch offset: log start <= fetch offset <= log end;
- a client without a rack, or with no candidate in its rack, stays on the leader; so does a client in
  the leader's rack;
- otherwise the most caught-up candidate in the client's rack: the largest log end offset, then the
  shortest time since it last caught up, then the largest broker id;
- a replica without an endpoint on the client's listener (not a live broker) is never chosen.

Pure: the fetch handler gives it the partition, the brokers' racks and the time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from exactly.replication.partition import UNKNOWN_OFFSET, Partition

__all__ = [
    "RACK_AWARE_REPLICA_SELECTOR",
    "REPLICA_SELECTOR_CLASSES",
    "ReplicaView",
    "preferred_read_replica",
    "select_rack_aware",
]

RACK_AWARE_REPLICA_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
REPLICA_SELECTOR_CLASSES = frozenset({RACK_AWARE_REPLICA_SELECTOR})


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """One candidate replica as the leader sees it (Kafka's `ReplicaView`)."""

    broker_id: int
    rack: str | None  # None: no rack, or no endpoint on the client's listener
    log_end_offset: int
    time_since_caught_up_ms: int


def _rank(replica: ReplicaView) -> tuple[int, int, int]:
    return (replica.log_end_offset, -replica.time_since_caught_up_ms, replica.broker_id)


def select_rack_aware(
    client_rack: str | None, leader: ReplicaView, replicas: Iterable[ReplicaView]
) -> ReplicaView:
    """Kafka's `RackAwareReplicaSelector.select`: the leader, unless the client's rack holds other
    candidates and not the leader; then the most caught-up of those."""
    if not client_rack:
        return leader
    if leader.rack == client_rack:
        return leader
    same_rack = [r for r in replicas if r.rack == client_rack]
    if not same_rack:
        return leader
    return max(same_rack, key=_rank)


def preferred_read_replica(
    partition: Partition,
    client_rack: str | None,
    fetch_offset: int,
    now_ms: int,
    rack_of: Callable[[int], str | None],
) -> int | None:
    """The replica a consumer fetching `partition` at `fetch_offset` should read from, or None for this
    leader itself (also when this replica does not lead). `rack_of(broker_id)`: the rack of a broker with
    an endpoint on the client's listener (None: no rack, or no such endpoint)."""
    if not partition.is_leader or not client_rack:
        return None
    leader = ReplicaView(partition.local_id, rack_of(partition.local_id), partition.log_end_offset, 0)
    candidates = [
        ReplicaView(f.broker_id, rack_of(f.broker_id), f.log_end_offset, now_ms - f.last_caught_up_ms)
        for f in partition.followers.values()
        if f.broker_id in partition.isr
        and f.log_end_offset != UNKNOWN_OFFSET
        and f.log_end_offset >= fetch_offset
        and f.log_start_offset <= fetch_offset
    ]
    selected = select_rack_aware(client_rack, leader, [leader, *candidates])
    if selected.broker_id == leader.broker_id or selected.rack is None:
        return None
    return selected.broker_id

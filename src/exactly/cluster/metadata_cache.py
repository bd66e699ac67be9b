"""A broker's view of the cluster (Kafka's `MetadataCache` in ZooKeeper mode), as the ZooKeeper shell
reads it: the live brokers and their endpoints, the controller, each topic's replica assignment and each
partition's state (leader, leader epoch, ISR; its partition epoch is the state znode's version).

Pure: the shell (exactly.broker.cluster_member) puts what its watches deliver here, and the handlers
read from it (Metadata, DescribeCluster, FindCoordinator). `version` grows with every change, so an
encoded answer can be cached until the view changes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from exactly.cluster.znodes import BrokerRegistration, PartitionState, TopicAssignment

__all__ = ["MetadataCache", "PartitionView"]

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class PartitionView:
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...]
    partition_epoch: int = 0


class MetadataCache:
    def __init__(self) -> None:
        self.brokers: dict[int, BrokerRegistration] = {}
        self.broker_epochs: dict[int, int] = {}  # broker id -> its registration's czxid (KIP-380)
        self.controller_id = NO_LEADER
        self.assignments: dict[str, TopicAssignment] = {}
        self.states: dict[tuple[str, int], tuple[PartitionState, int]] = {}  # -> (state, znode version)
        self.shutting_down: set[int] = set()
        self.version = 0

    def changed(self) -> None:
        self.version += 1

    def is_live(self, broker_id: int) -> bool:
        """Registered and not being drained (a controlled shutdown): may lead or join an ISR."""
        return broker_id in self.brokers and broker_id not in self.shutting_down

    def endpoint(self, broker_id: int, listener: str) -> tuple[str, int] | None:
        registration = self.brokers.get(broker_id)
        if registration is None:
            return None
        endpoint = registration.endpoint(listener)
        if endpoint is None:
            return None
        return endpoint.host, endpoint.port

    def live_brokers(self, listener: str) -> Iterator[tuple[int, str, int, str | None]]:
        """(id, host, port, rack) of every registered broker with an endpoint on `listener`, by id."""
        for broker_id in sorted(self.brokers):
            registration = self.brokers[broker_id]
            endpoint = registration.endpoint(listener)
            if endpoint is not None:
                yield broker_id, endpoint.host, endpoint.port, registration.rack

    def partition(self, topic: str, index: int) -> PartitionView | None:
        assignment = self.assignments.get(topic)
        if assignment is None:
            return None
        replicas = tuple(assignment.partitions.get(index, ()))
        found = self.states.get((topic, index))
        if found is None:
            return PartitionView(NO_LEADER, -1, replicas, (), tuple(replicas))
        state, version = found
        offline = tuple(b for b in replicas if b not in self.brokers)
        return PartitionView(state.leader, state.leader_epoch, replicas, tuple(state.isr), offline, version)

    def leader_of(self, topic: str, index: int) -> int:
        found = self.states.get((topic, index))
        return found[0].leader if found is not None else NO_LEADER

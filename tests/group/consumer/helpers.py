"""A driver for KIP-848 consumer groups on the group coordinator: the broker's topics as a dict,
ConsumerGroupHeartbeat requests, and the classic harness's log (append, replay at once, rebuild)."""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass, field
from typing import Any

from exactly.errors import ErrorCode
from exactly.group import ClientInfo, GroupConfig, GroupCoordinator
from exactly.protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    TopicPartitions,
)
from tests.group.helpers import Harness

Owned = dict[str, set[int]]  # topic name -> partitions


@dataclass(frozen=True)
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: int


def topic_id(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_DNS, name)


@dataclass
class ConsumerHarness(Harness):
    config: GroupConfig = field(
        default_factory=lambda: GroupConfig(
            consumer_session_timeout_ms=45_000, consumer_heartbeat_interval_ms=5000
        )
    )
    topics: dict[str, Topic] = field(default_factory=dict)

    def __post_init__(self) -> None:
        counter = itertools.count(1)
        self.coordinator = self._coordinator(counter)

    def _coordinator(self, counter: Any = None) -> GroupCoordinator:
        counter = counter or itertools.count(1000)
        return GroupCoordinator(
            self.config,
            self.clock,
            member_id_suffix=lambda: f"m{next(counter)}",
            topics=lambda: self.topics,
            consumer_member_id=lambda: f"generated-{next(counter)}",
        )

    def create_topic(self, name: str, partitions: int) -> uuid.UUID:
        self.topics[name] = Topic(name, topic_id(name), partitions)
        return topic_id(name)

    def hb(
        self,
        group: str,
        member_id: str,
        epoch: int,
        *,
        topics: list[str] | None = None,
        regex: str | None = None,
        owned: Owned | None = None,
        instance_id: str | None = None,
        rebalance_ms: int = -1,
        assignor: str | None = None,
        version: int = 1,
    ) -> ConsumerGroupHeartbeatResponse:
        if epoch == 0:
            rebalance_ms = 300_000 if rebalance_ms == -1 else rebalance_ms
            owned = {} if owned is None else owned
            if topics is None and regex is None:
                topics = []
        request = ConsumerGroupHeartbeatRequest(
            group,
            member_id,
            epoch,
            instance_id,
            None,
            rebalance_ms,
            topics,
            regex,
            assignor,
            None
            if owned is None
            else [TopicPartitions(topic_id(t), sorted(ps)) for t, ps in sorted(owned.items())],
        )
        response = self.apply(
            self.coordinator.consumer_group_heartbeat(ClientInfo("client", "/127.0.0.1", version), request)
        )
        assert isinstance(response, ConsumerGroupHeartbeatResponse)
        return response

    def names(self) -> dict[uuid.UUID, str]:
        return {t.topic_id: t.name for t in self.topics.values()}

    def assignment(self, response: ConsumerGroupHeartbeatResponse) -> Owned | None:
        if response.assignment is None:
            return None
        names = self.names()
        return {names[tp.topic_id]: set(tp.partitions) for tp in response.assignment.topic_partitions}

    def rebuilt(self) -> GroupCoordinator:
        fresh = self._coordinator()
        for offset, producer_id, record in self.log:
            fresh.replay(offset, producer_id, record)
        return fresh


def ok(response: ConsumerGroupHeartbeatResponse) -> ConsumerGroupHeartbeatResponse:
    assert response.error_code == ErrorCode.NONE, response
    return response

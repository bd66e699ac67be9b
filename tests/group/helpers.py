"""A test driver for the group coordinator: applies results the way the broker does (append to a log,
replay at once), records completions, and rebuilds a fresh coordinator from the log."""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass, field
from typing import Any

from exactly.clock import ManualClock
from exactly.errors import ErrorCode
from exactly.group import ClientInfo, GroupConfig, GroupCoordinator, Parked, Result
from exactly.group.records import CoordinatorRecord, decode_record, encode_record
from exactly.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from exactly.protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol, JoinGroupResponse
from exactly.protocol.messages.leave_group import LeaveGroupResponse, MemberIdentity
from exactly.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
)
from exactly.protocol.messages.sync_group import (
    SyncGroupRequest,
    SyncGroupRequestAssignment,
    SyncGroupResponse,
)

Protocols = list[tuple[str, bytes]]


def subscription(*topics: str, version: int = 0) -> bytes:
    """A ConsumerProtocolSubscription (v0 layout: version, topics, null user data)."""
    out = struct.pack(">hi", version, len(topics))
    for t in topics:
        raw = t.encode()
        out += struct.pack(">h", len(raw)) + raw
    return out + struct.pack(">i", -1)


def consumer_protocols(*topics: str, names: tuple[str, ...] = ("range",)) -> Protocols:
    return [(name, subscription(*topics)) for name in names]


@dataclass
class Harness:
    config: GroupConfig = field(default_factory=lambda: GroupConfig(initial_rebalance_delay_ms=0))
    clock: ManualClock = field(default_factory=ManualClock)
    log: list[tuple[int, int, CoordinatorRecord]] = field(default_factory=list)
    responses: dict[int, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        counter = itertools.count(1)
        self.coordinator = GroupCoordinator(
            self.config, self.clock, member_id_suffix=lambda: f"m{next(counter)}"
        )

    # --- driving -----------------------------------------------------------------------------------------

    def apply(self, result: Result[Any]) -> Any:
        for record in result.records:
            offset = len(self.log)
            # through the real codec, as the broker would store it
            key, value = encode_record(record)
            self.log.append((offset, result.producer_id, decode_record(key, value)))
            self.coordinator.replay(offset, result.producer_id, record)
        for waiter, response in result.completions:
            assert waiter not in self.responses, f"waiter {waiter} completed twice"
            self.responses[waiter] = response
        return result.response

    def resolve(self, response: Any) -> Any:
        """A response, or the completion of a parked request (None while it is still parked)."""
        if isinstance(response, Parked):
            return self.responses.get(response.waiter)
        return response

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        for result in self.coordinator.tick():
            self.apply(result)

    def expire(self) -> None:
        for result in self.coordinator.expire_offsets():
            self.apply(result)

    # --- requests ----------------------------------------------------------------------------------------

    def join(
        self,
        group: str,
        member_id: str = "",
        *,
        protocols: Protocols | None = None,
        instance_id: str | None = None,
        session_ms: int = 10_000,
        rebalance_ms: int = 20_000,
        version: int = 5,
        client_id: str = "client",
        protocol_type: str = "consumer",
    ) -> JoinGroupResponse | Parked:
        request = JoinGroupRequest(
            group,
            session_ms,
            rebalance_ms,
            member_id,
            instance_id,
            protocol_type,
            [JoinGroupRequestProtocol(n, m) for n, m in (protocols or consumer_protocols("t"))],
        )
        response: JoinGroupResponse | Parked = self.apply(
            self.coordinator.join_group(ClientInfo(client_id, "/127.0.0.1", version), request)
        )
        return response

    def join_new(self, group: str, **kwargs: Any) -> tuple[str, Parked]:
        """The KIP-394 handshake: MEMBER_ID_REQUIRED, then the real JoinGroup (parked)."""
        first = self.join(group, **kwargs)
        assert isinstance(first, JoinGroupResponse)
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED, first
        parked = self.join(group, first.member_id, **kwargs)
        assert isinstance(parked, Parked), parked
        return first.member_id, parked

    def sync(
        self,
        group: str,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        instance_id: str | None = None,
    ) -> SyncGroupResponse | Parked:
        request = SyncGroupRequest(
            group,
            generation,
            member_id,
            instance_id,
            "consumer",
            None,
            [SyncGroupRequestAssignment(m, a) for m, a in (assignments or {}).items()],
        )
        response: SyncGroupResponse | Parked = self.apply(
            self.coordinator.sync_group(ClientInfo("client", "/127.0.0.1", 3), request)
        )
        return response

    def heartbeat(
        self, group: str, member_id: str, generation: int, instance_id: str | None = None
    ) -> ErrorCode:
        response = self.apply(
            self.coordinator.heartbeat(
                ClientInfo(), HeartbeatRequest(group, generation, member_id, instance_id)
            )
        )
        assert isinstance(response, HeartbeatResponse)
        return ErrorCode(response.error_code)

    def leave(self, group: str, *members: tuple[str, str | None]) -> LeaveGroupResponse:
        response = self.apply(
            self.coordinator.leave_group(ClientInfo(), group, [MemberIdentity(m, i) for m, i in members])
        )
        assert isinstance(response, LeaveGroupResponse)
        return response

    def commit(
        self,
        group: str,
        offsets: dict[tuple[str, int], int],
        *,
        member_id: str = "",
        generation: int = -1,
        instance_id: str | None = None,
        metadata: str = "",
        retention_ms: int = -1,
    ) -> dict[tuple[str, int], ErrorCode]:
        topics: dict[str, list[OffsetCommitRequestPartition]] = {}
        for (topic, partition), offset in offsets.items():
            topics.setdefault(topic, []).append(
                OffsetCommitRequestPartition(partition, offset, -1, -1, metadata)
            )
        request = OffsetCommitRequest(
            group,
            generation,
            member_id,
            instance_id,
            retention_ms,
            [OffsetCommitRequestTopic(t, partitions=ps) for t, ps in topics.items()],
        )
        response = self.apply(self.coordinator.commit_offsets(ClientInfo(), request))
        assert isinstance(response, OffsetCommitResponse)
        return {
            (t.name, p.partition_index): ErrorCode(p.error_code)
            for t in response.topics
            for p in t.partitions
        }

    def committed(self, group: str, topic: str, partition: int) -> int:
        result = self.coordinator.fetch_offsets(group, [(topic, [partition])])
        return result.topics[0].partitions[0].committed_offset

    # --- replay ------------------------------------------------------------------------------------------

    def rebuilt(self) -> GroupCoordinator:
        """A fresh coordinator that replayed the whole log (what a restart would load)."""
        fresh = GroupCoordinator(self.config, self.clock)
        for offset, producer_id, record in self.log:
            fresh.replay(offset, producer_id, record)
        return fresh


def stable_group(h: Harness, group: str, count: int, **kwargs: Any) -> tuple[list[str], int, str]:
    """`count` members join together and sync; returns (member ids, generation, leader id)."""
    joined = [h.join_new(group, **kwargs) for _ in range(count)]
    h.advance(0)
    responses = [h.resolve(p) for _, p in joined]
    assert all(r is not None and r.error_code == 0 for r in responses), responses
    generation = responses[0].generation_id
    assert {r.generation_id for r in responses} == {generation}
    leader = responses[0].leader
    ids = [m for m, _ in joined]
    assignments = {m: f"{m}@{generation}".encode() for m in ids}
    syncs = [h.sync(group, m, generation, assignments if m == leader else None) for m in ids if m != leader]
    syncs.append(h.sync(group, leader, generation, assignments))
    for s in syncs:
        resolved = h.resolve(s)
        assert resolved is not None, s
        assert resolved.error_code == 0, resolved
    return ids, generation, leader

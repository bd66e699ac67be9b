"""One member of a classic group (Kafka's `ClassicGroupMember`): what it joined with, what it was
assigned, and its parked JoinGroup/SyncGroup requests. Its session deadline lives in the coordinator's
timers (`deadlines.HeartbeatDeadline`), not here."""

from __future__ import annotations

from dataclasses import dataclass

from exactly.group.records import MemberMetadata

__all__ = ["Member", "Protocols"]

Protocols = list[tuple[str, bytes]]


@dataclass(slots=True, eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols  # (name, metadata) in the member's order of preference
    assignment: bytes = b""
    join_waiter: int | None = None  # a parked JoinGroup (the shell's waiter id)
    sync_waiter: int | None = None  # a parked SyncGroup
    is_new: bool = False  # joined in this rebalance and has not had its JoinGroup answered yet

    @property
    def awaiting_join(self) -> bool:
        return self.join_waiter is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_waiter is not None

    def metadata(self, protocol: str | None) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    def matches(self, protocols: Protocols) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        """Whether a session deadline that passed should spare the member (Kafka's rule)."""
        if self.is_new:
            return False
        return self.awaiting_join or self.awaiting_sync

    def to_record(self, protocol: str | None, assignment: bytes) -> MemberMetadata:
        return MemberMetadata(
            self.member_id,
            self.group_instance_id,
            self.client_id,
            self.client_host,
            self.rebalance_timeout_ms,
            self.session_timeout_ms,
            self.metadata(protocol),
            assignment,
        )

"""The coordinator's deadlines, as typed timer keys (Kafka's timer keys, which are strings there).

Each is a frozen value naming what it is the deadline of; scheduling the same key again moves its
deadline (`timers.Timers`). `GroupCoordinator._on_deadline` matches on the type to act when one
passes. A later group type (KIP-848 consumer groups, KIP-932 share groups) adds its own classes to
`Deadline`.

* `HeartbeatDeadline(group, member)` — a classic member's session: it ends unless a heartbeat (or an
  offset commit) moves it. The same key also bounds a new member's first JoinGroup (Kafka's new-member
  join timeout) and the life of a member id handed out with MEMBER_ID_REQUIRED (KIP-394).
* `RebalanceDeadline(group)` — the join phase of a classic rebalance ends (the rebalance timeout, or
  group.initial.rebalance.delay.ms for a group that was Empty): the next generation forms with the
  members that rejoined.
* `SyncDeadline(group)` — members that got their JoinGroup response must send SyncGroup by then, or
  they are removed and the group rebalances again.
* `ConsumerSessionDeadline(group, member)` — a KIP-848 member's session
  (group.consumer.session.timeout.ms from its last heartbeat): it is fenced when it passes.
* `ConsumerRebalanceDeadline(group, member)` — a KIP-848 member that must revoke partitions
  (UNREVOKED_PARTITIONS) has its rebalance timeout to do so, or it is fenced.
* `ShareSessionDeadline(group, member)` — a KIP-932 share group member's session
  (group.share.session.timeout.ms from its last heartbeat): it is removed when it passes.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ConsumerRebalanceDeadline",
    "ConsumerSessionDeadline",
    "Deadline",
    "HeartbeatDeadline",
    "RebalanceDeadline",
    "ShareSessionDeadline",
    "SyncDeadline",
]


@dataclass(frozen=True, slots=True)
class HeartbeatDeadline:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class RebalanceDeadline:
    group_id: str


@dataclass(frozen=True, slots=True)
class SyncDeadline:
    group_id: str


@dataclass(frozen=True, slots=True)
class ConsumerSessionDeadline:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerRebalanceDeadline:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareSessionDeadline:
    group_id: str
    member_id: str


Deadline = (
    HeartbeatDeadline
    | RebalanceDeadline
    | SyncDeadline
    | ConsumerSessionDeadline
    | ConsumerRebalanceDeadline
    | ShareSessionDeadline
)

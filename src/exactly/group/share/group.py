"""A share group (KIP-932): members that consume topics together, each record going to one of them.

Unlike a consumer group, a partition may be assigned to several members at once: records are handed
out one acquisition at a time by the share partitions (`partition.py`), so there is no revocation and
no reconciliation. A member moves straight to its target assignment, and its epoch to the group's.

The group's state, as Kafka's `ShareGroup`: EMPTY (no members) or STABLE. The group epoch counts
changes of membership or subscriptions; each change recomputes the assignment (`simple_assign`).

Membership is held in memory by the group coordinator: exactly does not write Kafka's share-group
records (types 10-15 of `__consumer_offsets`). After a coordinator restart or move, members get
UNKNOWN_MEMBER_ID on their next heartbeat and join again (the group's delivery state lives in the share
partitions and `__share_group_state`, which is what must survive).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

__all__ = ["SHARE_PROTOCOL_TYPE", "ShareGroup", "ShareGroupState", "ShareMember", "simple_assign"]

SHARE_PROTOCOL_TYPE = "share"


class ShareGroupState(Enum):
    EMPTY = "Empty"
    STABLE = "Stable"


@dataclass(slots=True)
class ShareMember:
    member_id: str
    client_id: str
    client_host: str
    rack_id: str | None
    subscribed_topics: tuple[str, ...]
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assignment: dict[uuid.UUID, tuple[int, ...]] = field(default_factory=dict)
    sent_assignment_epoch: int = -1  # the epoch whose assignment the member was last sent


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    assigned_topics: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)  # what was assigned

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    @property
    def is_empty(self) -> bool:
        return not self.members

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topics}


def simple_assign(
    subscriptions: Mapping[str, Sequence[str]], topics: Mapping[str, tuple[uuid.UUID, int]]
) -> dict[str, dict[uuid.UUID, tuple[int, ...]]]:
    """Kafka's `simple` share assignor, balanced per topic: with no more subscribers than partitions each
    partition goes to one subscriber (round robin over the members in id order); with more subscribers
    than partitions, partitions are shared and each subscriber gets one. `topics`: name -> (id,
    partition count) of the topics that exist. Every subscriber of a topic with partitions gets some."""
    out: dict[str, dict[uuid.UUID, tuple[int, ...]]] = {member: {} for member in subscriptions}
    for name, (topic_id, partitions) in sorted(topics.items()):
        subscribers = sorted(m for m, wanted in subscriptions.items() if name in wanted)
        if not subscribers or partitions <= 0:
            continue
        per_member: dict[str, list[int]] = {m: [] for m in subscribers}
        if len(subscribers) <= partitions:
            for p in range(partitions):
                per_member[subscribers[p % len(subscribers)]].append(p)
        else:
            for i, member in enumerate(subscribers):
                per_member[member].append(i % partitions)
        for member, assigned in per_member.items():
            out[member][topic_id] = tuple(assigned)
    return out

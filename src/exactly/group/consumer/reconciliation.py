"""How a KIP-848 member moves from its current assignment to its target (Kafka's
`CurrentAssignmentBuilder`): incremental, revoke before assign, never one partition in two hands.

A member's *current assignment* is what it may use now: `assigned` at `member_epoch`, plus
`pending_revocation` (partitions it still holds but must give up). The coordinator computes the next
one on every heartbeat from the group's *target assignment* (what the assignor wants, at the target
epoch), the partitions the member reports owning, and who else still holds each partition.

Transitions (``state`` is stored as int8 in record type 8; Kafka's `MemberState`)::

    from                   condition                                          to (epoch)
    ---------------------  -------------------------------------------------  ---------------------------
    any but UNKNOWN        member_epoch < target epoch, or subscription       next assignment (below)
                           changed, or UNRELEASED/UNREVOKED to re-check
    next assignment:       kept = assigned ∩ target; revoke = assigned - kept;
                           add = target - kept, minus partitions held by another member
                           revoke non-empty and the member still owns some      UNREVOKED_PARTITIONS (same
                           of it (or did not say what it owns)                  epoch; gets `kept` only)
                           otherwise, something still held elsewhere            UNRELEASED_PARTITIONS (target)
                           otherwise                                            STABLE (target)
    UNREVOKED_PARTITIONS   still owns some of `pending_revocation`              unchanged
    UNKNOWN                (a downgrade artefact) owns nothing                  next assignment; else fenced

A partition "held by another member" is one in another member's `assigned` or `pending_revocation`
(`Holder`); one the same member is revoking is not. A member that moves to a new epoch remembers the
old one as `previous_member_epoch` (a heartbeat whose response was lost comes back with it).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum

__all__ = ["CurrentAssignment", "Holder", "MemberState", "next_assignment", "owns_any"]

Partitions = Mapping[uuid.UUID, frozenset[int]]
# (topic id, partition) -> the member holding it, or None
Holder = Callable[[uuid.UUID, int], "str | None"]


class MemberState(IntEnum):
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(frozen=True, slots=True)
class CurrentAssignment:
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)


def owns_any(owned: Partitions | None, partitions: Partitions) -> bool:
    """Whether the member still owns one of `partitions`; None (not reported) counts as yes."""
    if owned is None:
        return True
    return any(owned.get(t, frozenset()) & ps for t, ps in partitions.items())


def next_assignment(
    member_id: str,
    current: CurrentAssignment,
    target_epoch: int,
    target: Partitions,
    subscribed: frozenset[uuid.UUID],
    owned: Partitions | None,
    holder: Holder,
    *,
    subscription_changed: bool = False,
) -> CurrentAssignment:
    """The member's next current assignment (Kafka's `CurrentAssignmentBuilder.build`)."""
    match current.state:
        case MemberState.UNREVOKED_PARTITIONS:
            if owns_any(owned, current.pending_revocation):
                return current
        case MemberState.STABLE:
            if current.member_epoch == target_epoch and not subscription_changed:
                return current
        case MemberState.UNRELEASED_PARTITIONS | MemberState.UNKNOWN:
            pass
    return _compute(member_id, current, target_epoch, target, subscribed, owned, holder)


def _compute(
    member_id: str,
    current: CurrentAssignment,
    target_epoch: int,
    target: Partitions,
    subscribed: frozenset[uuid.UUID],
    owned: Partitions | None,
    holder: Holder,
) -> CurrentAssignment:
    kept: dict[uuid.UUID, frozenset[int]] = {}
    revoke: dict[uuid.UUID, frozenset[int]] = {}
    added: dict[uuid.UUID, frozenset[int]] = {}
    unreleased = False
    for t in set(target) | set(current.assigned):
        wanted = target.get(t, frozenset()) if t in subscribed else frozenset()
        have = current.assigned.get(t, frozenset())
        keep = have & wanted
        if keep:
            kept[t] = keep
        if have - keep:
            revoke[t] = have - keep
        free = set()
        for p in wanted - keep:
            other = holder(t, p)
            if other is not None and other != member_id:
                unreleased = True
            else:
                free.add(p)
        if free:
            added[t] = frozenset(free)
    epoch = current.member_epoch
    if revoke and owns_any(owned, revoke):
        return CurrentAssignment(epoch, epoch, MemberState.UNREVOKED_PARTITIONS, kept, revoke)
    assigned = dict(kept)
    for t, ps in added.items():
        assigned[t] = assigned.get(t, frozenset()) | ps
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return CurrentAssignment(target_epoch, epoch, state, assigned, {})

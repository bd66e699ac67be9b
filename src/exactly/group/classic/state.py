"""The classic consumer group state machine: its states, what moves a group between them, and why.

Rule 1: every state change of a classic group is a row of `TRANSITIONS`; a (state, event) pair that is
not in the table is a bug and raises `IllegalTransition`. `ClassicGroup.transition` is the only caller.

Rule 2: the events in `STORED_EVENTS` come only from replaying a `__consumer_offsets` record
(`ClassicGroupManager.replay`), never from a request. Requests can only *produce* those records.

Theory of operation
-------------------

A classic group (JoinGroup/SyncGroup/Heartbeat/LeaveGroup, KIP-62/345/394) forms *generations*. In each
generation every member joins, the coordinator picks a leader and a protocol (assignor) all members
support, the leader computes an assignment on the client side, sends it in its SyncGroup, and every
member receives its share. Between generations the group *rebalances*:

    Empty --join--> PreparingRebalance --all joined / timeout--> CompletingRebalance --leader's
    SyncGroup, stored--> Stable --join / leave / session expiry--> PreparingRebalance ...

Two kinds of state live in a group, and the invariant of ARCHITECTURE.md ("a coordinator changes its
state only by applying records it appended") is kept for the first kind:

* **Stored state** — the group's existence, its last *stored generation* (generation id, protocol type
  and name, leader, members with their subscriptions and assignments, and whether it is Empty or
  Stable) and its committed offsets. It changes only in `replay`, from a `GroupMetadata` or
  `OffsetCommit` record that was appended first; loading the partition at start-up is the same replay.
  Responses that reveal it (an assignment, a committed offset) are sent only after the record is
  durable.
* **The rendezvous** — PreparingRebalance and CompletingRebalance, who has (re)joined, pending member
  ids (MEMBER_ID_REQUIRED), parked JoinGroup/SyncGroup requests, the generation being formed, and the
  session and rebalance deadlines. Like Kafka (whose coordinator does not replay classic group records
  at all) this lives in memory only: after a restart the group comes back as its last stored
  generation, and clients that were mid-rebalance simply rejoin (a generation that was handed out in
  JoinGroup responses but never stored never had an assignment or an accepted commit, so reusing its
  number after a crash is harmless; while the process runs, generations only grow).

The records cannot express the rendezvous states, so replaying a log may move a group directly between
Empty and Stable (the rebalance in between was never logged): those rows are marked "(replay)" below.

States (`action:` how each answers requests; `transition:` what moves it)
-------------------------------------------------------------------------

EMPTY — no members; the group lingers for its committed offsets (also the state of a "simple" group that
    only commits offsets).
    action: JoinGroup from a new member is accepted; SyncGroup, Heartbeat -> UNKNOWN_MEMBER_ID;
            OffsetCommit only with generation -1 (admin / manual assignment); OffsetFetch allowed;
            DeleteGroups and OffsetDelete allowed.
    transition: a member joins -> PREPARING_REBALANCE; deleted or expired -> DEAD;
                (replay) a generation with members -> STABLE.

PREPARING_REBALANCE — waiting for every known member to (re)join, up to the rebalance timeout (for a
    group that was Empty: group.initial.rebalance.delay.ms, extended while members keep arriving).
    action: JoinGroup is parked; Heartbeat -> REBALANCE_IN_PROGRESS; SyncGroup -> REBALANCE_IN_PROGRESS;
            OffsetCommit from the previous generation allowed; LeaveGroup removes the member.
    transition: all joined (or the timeout) with members left -> COMPLETING_REBALANCE;
                all gone -> the empty generation is stored -> EMPTY.

COMPLETING_REBALANCE — JoinGroup responses sent (the leader got the members); waiting for the leader's
    SyncGroup with the assignment.
    action: Heartbeat -> NONE; OffsetCommit -> REBALANCE_IN_PROGRESS; followers' SyncGroup is parked;
            JoinGroup with unchanged metadata gets the current generation again.
    transition: the leader's assignment is stored -> STABLE; a member joins with new metadata, leaves,
                fails its session or misses the sync deadline -> PREPARING_REBALANCE.

STABLE — every member has (or can fetch with SyncGroup) its assignment.
    action: Heartbeat -> NONE; SyncGroup returns the member's assignment; OffsetCommit from the current
            generation; JoinGroup from a follower with unchanged metadata returns the current generation.
    transition: a member fails, leaves, the leader rejoins, a follower rejoins with new metadata ->
                PREPARING_REBALANCE; a static member rejoins under a new member id without changing
                the protocol -> the renamed member is stored -> STABLE (no rebalance, KIP-345);
                (replay) an empty generation -> EMPTY.

DEAD — the group was deleted (tombstone); the object is dropped from the coordinator.
    action: none (a later request finds no group).
    transition: none.
"""

from __future__ import annotations

from enum import Enum

from exactly.errors import ExactlyError

__all__ = [
    "STORED_EVENTS",
    "TRANSITIONS",
    "ClassicGroupState",
    "GroupEvent",
    "IllegalTransition",
    "next_state",
]


class ClassicGroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


class GroupEvent(Enum):
    MEMBER_JOINED = "a member joined, or rejoined in a way that needs a new generation"
    MEMBER_REMOVED = "a member left, failed its session or missed the sync deadline"
    JOIN_COMPLETED = "every member joined (or the rebalance timeout passed): JoinGroup responses go out"
    GENERATION_STORED = "replayed a GroupMetadata record with members"
    EMPTY_STORED = "replayed a GroupMetadata record without members"
    DELETED = "replayed a GroupMetadata tombstone"


STORED_EVENTS = frozenset({GroupEvent.GENERATION_STORED, GroupEvent.EMPTY_STORED, GroupEvent.DELETED})

_S = ClassicGroupState
_E = GroupEvent

TRANSITIONS: dict[tuple[ClassicGroupState, GroupEvent], ClassicGroupState] = {
    (_S.EMPTY, _E.MEMBER_JOINED): _S.PREPARING_REBALANCE,
    (_S.PREPARING_REBALANCE, _E.MEMBER_JOINED): _S.PREPARING_REBALANCE,
    (_S.COMPLETING_REBALANCE, _E.MEMBER_JOINED): _S.PREPARING_REBALANCE,
    (_S.STABLE, _E.MEMBER_JOINED): _S.PREPARING_REBALANCE,
    (_S.PREPARING_REBALANCE, _E.MEMBER_REMOVED): _S.PREPARING_REBALANCE,
    (_S.COMPLETING_REBALANCE, _E.MEMBER_REMOVED): _S.PREPARING_REBALANCE,
    (_S.STABLE, _E.MEMBER_REMOVED): _S.PREPARING_REBALANCE,
    (_S.PREPARING_REBALANCE, _E.JOIN_COMPLETED): _S.COMPLETING_REBALANCE,
    (_S.COMPLETING_REBALANCE, _E.GENERATION_STORED): _S.STABLE,
    (_S.STABLE, _E.GENERATION_STORED): _S.STABLE,  # a static member renamed (KIP-345); or replay
    (_S.EMPTY, _E.GENERATION_STORED): _S.STABLE,  # (replay)
    (_S.PREPARING_REBALANCE, _E.EMPTY_STORED): _S.EMPTY,
    (_S.EMPTY, _E.EMPTY_STORED): _S.EMPTY,  # (replay)
    (_S.STABLE, _E.EMPTY_STORED): _S.EMPTY,  # (replay)
    (_S.EMPTY, _E.DELETED): _S.DEAD,
    (_S.STABLE, _E.DELETED): _S.DEAD,  # (replay: a log cut short by compaction or DeleteRecords)
}


class IllegalTransition(ExactlyError):
    """A (state, event) pair that `TRANSITIONS` does not allow: a coordinator bug, never a client's."""


def next_state(state: ClassicGroupState, event: GroupEvent) -> ClassicGroupState:
    try:
        return TRANSITIONS[(state, event)]
    except KeyError:
        raise IllegalTransition(
            f"a classic group cannot handle {event.name} in state {state.value}"
        ) from None

"""A Hypothesis state machine over the group coordinator (ManualClock, records applied like the broker).

Four clients (two of them static members) join, sync, heartbeat, leave, commit offsets and go silent
while time passes; a simple group commits with generation -1; the coordinator is restarted by replaying
its log. Invariants:

* a group's generation never goes down while the process runs, and stored generations never go down;
* in a Stable group every member's assignment is the one its leader computed for it in this generation
  (so it covers current members only, each exactly once);
* replaying the log into a fresh coordinator gives the live committed offsets and, for every Stable or
  Empty group, the live stored generation;
* every parked JoinGroup/SyncGroup is answered exactly once, and none is left parked once every
  session and rebalance timeout has passed.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from exactly.errors import ErrorCode
from exactly.group import ClassicGroupState, GroupConfig, GroupCoordinator, Parked
from exactly.group.records import GroupMetadataKey, GroupMetadataValue
from exactly.protocol.messages.join_group import JoinGroupResponse
from exactly.protocol.messages.sync_group import SyncGroupResponse
from tests.group.helpers import Harness

GROUP = "g"
SIMPLE = "simple"
SLOTS = ["a", "b", "s1", "s2"]  # s1 and s2 are static members (group.instance.id = the slot)
PARTITIONS = [("t", 0), ("t", 1), ("u", 0)]
S = ClassicGroupState


@dataclass
class Client:
    member_id: str = ""
    generation: int = -1
    leader: str = ""
    members: list[str] | None = None  # the leader's view of the generation
    join: Parked | None = None
    sync: Parked | None = None
    assignment: bytes = b""

    def reset(self) -> None:
        self.member_id = ""
        self.generation = -1
        self.members = None


class GroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = Harness(
            GroupConfig(
                initial_rebalance_delay_ms=0,
                new_member_join_timeout_ms=30_000,
                offsets_retention_ms=60_000,
            )
        )
        self.clients = {slot: Client() for slot in SLOTS}
        self.owner: dict[str, str] = {}  # member id -> slot
        self.live_generation: dict[str, int] = {}
        self.suffix = itertools.count(1000)

    # --- helpers -----------------------------------------------------------------------------------------

    @property
    def coordinator(self) -> GroupCoordinator:
        return self.h.coordinator

    def instance(self, slot: str) -> str | None:
        return slot if slot.startswith("s") else None

    def collect(self) -> None:
        """Take the answers of parked requests, as the clients would."""
        for slot, client in self.clients.items():
            if client.join is not None and (response := self.h.resolve(client.join)) is not None:
                client.join = None
                self.on_join(slot, client, response)
            if client.sync is not None and (response := self.h.resolve(client.sync)) is not None:
                client.sync = None
                self.on_sync(client, response)

    def on_join(self, slot: str, client: Client, response: JoinGroupResponse) -> None:
        if response.error_code == ErrorCode.MEMBER_ID_REQUIRED:
            client.member_id = response.member_id
        elif response.error_code == ErrorCode.NONE:
            client.member_id = response.member_id
            client.generation = response.generation_id
            client.leader = response.leader
            client.members = [m.member_id for m in response.members] or None
            self.owner[response.member_id] = slot
        elif response.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
            client.reset()

    def on_sync(self, client: Client, response: SyncGroupResponse) -> None:
        if response.error_code == ErrorCode.NONE:
            client.assignment = response.assignment
        elif response.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
            client.reset()

    # --- rules -------------------------------------------------------------------------------------------

    @rule(slot=st.sampled_from(SLOTS), session=st.sampled_from([6000, 10_000]))
    def join(self, slot: str, session: int) -> None:
        self.collect()
        client = self.clients[slot]
        if client.join is not None:
            return  # a client has one JoinGroup in flight
        response = self.h.join(
            GROUP,
            client.member_id,
            instance_id=self.instance(slot),
            session_ms=session,
            rebalance_ms=10_000,
            client_id=slot,
        )
        if isinstance(response, Parked):
            client.join = response
        else:
            self.on_join(slot, client, response)
        self.collect()

    @rule(slot=st.sampled_from(SLOTS))
    def sync(self, slot: str) -> None:
        self.collect()
        client = self.clients[slot]
        if not client.member_id or client.generation < 0 or client.sync is not None:
            return
        assignments = None
        if client.member_id == client.leader and client.members:
            assignments = {
                m: f"{self.owner.get(m, '?')}@{client.generation}".encode() for m in client.members
            }
        response = self.h.sync(
            GROUP, client.member_id, client.generation, assignments, instance_id=self.instance(slot)
        )
        if isinstance(response, Parked):
            client.sync = response
        else:
            self.on_sync(client, response)
        self.collect()

    @rule(slot=st.sampled_from(SLOTS))
    def heartbeat(self, slot: str) -> None:
        self.collect()
        client = self.clients[slot]
        if not client.member_id or client.generation < 0:
            return
        code = self.h.heartbeat(GROUP, client.member_id, client.generation, self.instance(slot))
        if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
            client.reset()
        self.collect()

    @rule(slot=st.sampled_from(SLOTS))
    def leave(self, slot: str) -> None:
        self.collect()
        client = self.clients[slot]
        if not client.member_id:
            return
        self.h.leave(GROUP, (client.member_id, self.instance(slot)))
        client.reset()
        self.collect()

    @rule(slot=st.sampled_from(SLOTS), tp=st.sampled_from(PARTITIONS), offset=st.integers(0, 1000))
    def commit(self, slot: str, tp: tuple[str, int], offset: int) -> None:
        self.collect()
        client = self.clients[slot]
        codes = self.h.commit(
            GROUP,
            {tp: offset},
            member_id=client.member_id,
            generation=client.generation,
            instance_id=self.instance(slot) if client.member_id else None,
        )
        if codes[tp] == ErrorCode.NONE:
            assert self.h.committed(GROUP, *tp) == offset
        self.collect()

    @rule(tp=st.sampled_from(PARTITIONS), offset=st.integers(0, 1000))
    def commit_simple(self, tp: tuple[str, int], offset: int) -> None:
        self.collect()
        assert self.h.commit(SIMPLE, {tp: offset}) == {tp: ErrorCode.NONE}
        assert self.h.committed(SIMPLE, *tp) == offset

    @rule()
    def everyone_cooperates(self) -> None:
        """Every client does what a well-behaved consumer does next (gets groups to Stable often)."""
        self.collect()
        for slot, client in self.clients.items():
            if client.join is None and client.sync is None and client.generation < 0:
                self.join(slot, 10_000)
                self.join(slot, 10_000)
            elif client.member_id and client.generation >= 0 and client.join is None:
                code = self.h.heartbeat(GROUP, client.member_id, client.generation, self.instance(slot))
                if code == ErrorCode.REBALANCE_IN_PROGRESS:
                    self.join(slot, 10_000)
        self.h.advance(0)
        self.collect()
        leaders = [s for s, c in self.clients.items() if c.member_id and c.member_id == c.leader]
        for slot in [s for s in SLOTS if s not in leaders] + leaders:
            self.sync(slot)

    @rule(ms=st.sampled_from([0, 1, 500, 3000, 6001, 10_001, 30_001]))
    def advance(self, ms: int) -> None:
        self.h.advance(ms)
        self.collect()

    @rule()
    def expire_offsets(self) -> None:
        self.h.expire()
        self.collect()

    @rule()
    def delete_simple_group(self) -> None:
        self.h.apply(self.coordinator.delete_group(SIMPLE))
        assert SIMPLE not in self.coordinator.groups or self.coordinator.groups[SIMPLE].state is not S.EMPTY

    @precondition(lambda self: bool(self.h.log))
    @rule()
    def restart(self) -> None:
        """The broker restarts: a fresh coordinator replays the log; in-flight requests are lost."""
        fresh = GroupCoordinator(
            self.h.config, self.h.clock, member_id_suffix=lambda: f"r{next(self.suffix)}"
        )
        for offset, producer_id, record in self.h.log:
            fresh.replay(offset, producer_id, record)
        self.h.coordinator = fresh
        self.h.responses.clear()  # waiter ids belong to the old process
        for client in self.clients.values():
            client.join = None
            client.sync = None
        self.live_generation = {g: group.generation for g, group in fresh.groups.items()}

    # --- invariants --------------------------------------------------------------------------------------

    @invariant()
    def records_are_applied(self) -> None:
        assert self.coordinator._unapplied == 0

    @invariant()
    def generations_only_grow(self) -> None:
        for group_id, group in self.coordinator.groups.items():
            assert group.generation >= self.live_generation.get(group_id, 0)
            self.live_generation[group_id] = group.generation
        for group_id in list(self.live_generation):
            if group_id not in self.coordinator.groups:
                del self.live_generation[group_id]  # deleted: a new group starts again
        stored: dict[str, int] = {}
        for _, _, record in self.h.log:
            if isinstance(record.key, GroupMetadataKey):
                if record.value is None:
                    stored.pop(record.key.group, None)
                else:
                    assert isinstance(record.value, GroupMetadataValue)
                    assert record.value.generation >= stored.get(record.key.group, 0)
                    stored[record.key.group] = record.value.generation

    @invariant()
    def stable_assignments_belong_to_current_members(self) -> None:
        group = self.coordinator.groups.get(GROUP)
        if group is None or group.state is not S.STABLE:
            return
        assert group.leader_id in group.members
        named = []
        for member in group.members.values():
            slot = self.owner.get(member.member_id)
            assert member.assignment == f"{slot}@{group.generation}".encode(), (member, group.generation)
            named.append(slot)
        assert len(named) == len(set(named))

    @invariant()
    def replaying_the_log_gives_the_stored_state(self) -> None:
        fresh = GroupCoordinator(self.h.config, self.h.clock)
        for offset, producer_id, record in self.h.log:
            fresh.replay(offset, producer_id, record)
        assert fresh.offsets.snapshot() == self.coordinator.offsets.snapshot()
        assert set(fresh.groups) <= set(self.coordinator.groups)
        for group_id, live in self.coordinator.groups.items():
            if live.state not in (S.STABLE, S.EMPTY):
                continue
            replayed = fresh.groups.get(group_id)
            if replayed is None:
                assert live.generation == 0  # never stored anything
                assert not self.coordinator.offsets.has_offsets(group_id)
            else:
                assert replayed.stored_view() == live.stored_view()

    def teardown(self) -> None:
        # liveness: once every timeout has passed, nothing is left parked
        self.h.advance(100_000)
        self.h.advance(100_000)
        for client in self.clients.values():
            for parked in (client.join, client.sync):
                assert parked is None or self.h.resolve(parked) is not None, parked


GroupMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=60, deadline=None)
TestGroupMachine = GroupMachine.TestCase


def test_machine_smoke() -> None:
    """A fixed run through the machine's rules (readable when the property test fails)."""
    machine: Any = GroupMachine()
    for slot in SLOTS:
        machine.join(slot, 10_000)
        machine.join(slot, 10_000)
    machine.advance(0)
    for slot in SLOTS:
        machine.sync(slot)
    leader_slot = next(s for s, c in machine.clients.items() if c.member_id and c.member_id == c.leader)
    machine.sync(leader_slot)
    machine.collect()
    assert machine.coordinator.groups[GROUP].state is S.STABLE
    machine.commit("a", ("t", 0), 5)
    machine.restart()
    machine.replaying_the_log_gives_the_stored_state()
    machine.stable_assignments_belong_to_current_members()
    machine.teardown()

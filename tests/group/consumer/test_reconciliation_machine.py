"""The reconciliation invariant as a Hypothesis state machine: members join, heartbeat (reporting what
they were last told they own), change subscriptions, leave, die (their session ends), and topics grow.

At every step no partition is held by two members, neither in the coordinator's view (assigned or
pending revocation) nor in the clients' (what each was last told it may use); and once every live
member has heartbeated enough times in a row, every subscribed partition is assigned and the group is
Stable. The log replays into the same group.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from exactly.errors import ErrorCode
from exactly.group import GroupConfig
from tests.group.consumer.helpers import ConsumerHarness

SESSION_MS = 10_000
TOPICS = ("t1", "t2")


@dataclass
class Client:
    member_id: str
    topics: list[str]
    epoch: int = 0
    owned: dict[str, set[int]] = field(default_factory=dict)


class Reconciliation(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = ConsumerHarness(config=GroupConfig(consumer_session_timeout_ms=SESSION_MS))
        self.h.create_topic("t1", 3)
        self.h.create_topic("t2", 2)
        self.clients: dict[str, Client] = {}
        self.next_id = 0

    def heartbeat(self, client: Client) -> None:
        if client.epoch == 0:
            response = self.h.hb("g", client.member_id, 0, topics=client.topics)
        else:
            response = self.h.hb("g", client.member_id, client.epoch, owned=client.owned)
        if response.error_code in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
            client.owned = {}
            client.epoch = 0  # the client rejoins, having lost its partitions
            return
        assert response.error_code == ErrorCode.NONE, response
        client.epoch = response.member_epoch
        assigned = self.h.assignment(response)
        if assigned is not None:
            client.owned = {t: set(ps) for t, ps in assigned.items() if ps}

    @rule(topics=st.sets(st.sampled_from(TOPICS), min_size=1))
    def join(self, topics: set[str]) -> None:
        self.next_id += 1
        client = Client(f"m{self.next_id}", sorted(topics))
        self.clients[client.member_id] = client
        self.heartbeat(client)

    @precondition(lambda self: self.clients)
    @rule(data=st.data())
    def heartbeat_one(self, data: st.DataObject) -> None:
        self.heartbeat(self.clients[data.draw(st.sampled_from(sorted(self.clients)))])

    @precondition(lambda self: self.clients)
    @rule(data=st.data(), topics=st.sets(st.sampled_from(TOPICS), min_size=1))
    def resubscribe(self, data: st.DataObject, topics: set[str]) -> None:
        client = self.clients[data.draw(st.sampled_from(sorted(self.clients)))]
        if client.epoch <= 0:
            return
        client.topics = sorted(topics)
        response = self.h.hb("g", client.member_id, client.epoch, topics=client.topics, owned=client.owned)
        if response.error_code:
            client.owned, client.epoch = {}, 0
            return
        client.epoch = response.member_epoch
        assigned = self.h.assignment(response)
        if assigned is not None:
            client.owned = {t: set(ps) for t, ps in assigned.items() if ps}

    @precondition(lambda self: self.clients)
    @rule(data=st.data())
    def leave(self, data: st.DataObject) -> None:
        client = self.clients.pop(data.draw(st.sampled_from(sorted(self.clients))))
        if client.epoch > 0:
            assert self.h.hb("g", client.member_id, -1).error_code == ErrorCode.NONE

    @precondition(lambda self: self.clients)
    @rule(data=st.data())
    def die(self, data: st.DataObject) -> None:
        """One member stops; the others keep heartbeating while its session runs out."""
        dead = self.clients.pop(data.draw(st.sampled_from(sorted(self.clients))))
        for _ in range(3):
            self.h.advance(SESSION_MS // 2 + 1)
            for client in list(self.clients.values()):
                self.heartbeat(client)
        assert dead.member_id not in self.h.coordinator.consumer_groups.get("g", _Empty()).members

    @rule(topic=st.sampled_from(TOPICS))
    def grow(self, topic: str) -> None:
        self.h.create_topic(topic, min(self.h.topics[topic].partitions + 1, 6))

    @invariant()
    def no_partition_in_two_hands(self) -> None:
        seen: dict[tuple[str, int], str] = {}
        for client in self.clients.values():
            for t, ps in client.owned.items():
                for p in ps:
                    assert (t, p) not in seen, f"{t}-{p} owned by {seen[(t, p)]} and {client.member_id}"
                    seen[(t, p)] = client.member_id
        group = self.h.coordinator.consumer_groups.get("g")
        if group is not None:
            held: dict[object, str] = {}
            for m in group.members.values():
                for parts in (m.current.assigned, m.current.pending_revocation):
                    for t, ps in parts.items():
                        for p in ps:
                            assert (t, p) not in held or held[(t, p)] == m.member_id
                            held[(t, p)] = m.member_id

    def teardown(self) -> None:
        # Everyone heartbeats until nothing moves: then every subscribed partition is assigned.
        for _ in range(4 * (len(self.clients) + 2)):
            for client in list(self.clients.values()):
                self.heartbeat(client)
        if self.clients:
            subscribed = {t for c in self.clients.values() for t in c.topics}
            owned = {(t, p) for c in self.clients.values() for t, ps in c.owned.items() for p in ps}
            wanted = {(t, p) for t in subscribed for p in range(self.h.topics[t].partitions)}
            assert owned == wanted, (owned, wanted)
            [described] = self.h.coordinator.consumer_group_describe(["g"])
            assert described.group_state == "Stable", described
            rebuilt = self.h.rebuilt().consumer_groups["g"]
            original = self.h.coordinator.consumer_groups["g"]
            assert rebuilt.members == original.members
            assert (rebuilt.group_epoch, rebuilt.assignment_epoch) == (
                original.group_epoch,
                original.assignment_epoch,
            )


class _Empty:
    members: dict[str, object] = {}


Reconciliation.TestCase.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)
TestReconciliation = Reconciliation.TestCase

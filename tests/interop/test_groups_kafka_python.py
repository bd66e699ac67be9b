"""kafka-python 3.0.12 strands a group leader whose rejoin outlives one `poll()` (issue 10 item 7).

The flake: three kafka-python members, range assignor; under CPU load one member (the leader of the
first generation, whose client did not know the new topic's partitions yet and so assigned nothing)
ends with no partitions while the other two own their shares, and its share is owned by nobody. The
broker's DEBUG trace showed it answering as Kafka does (and as tests/group/test_coordinator.py
`test_leader_rejoining_last_after_new_members_gets_every_member_its_share` pins): the leader's
SyncGroup response carried its share, which the client received and never applied.

The cause is in the client: a leader that rejoins because its topic metadata changed has
`rejoin_needed` False; computing the new assignment makes its metadata snapshots equal again, so when
`poll(timeout_ms)` gives up between the JoinGroup and SyncGroup responses, `need_rejoin()` is False
from then on and nothing ever completes the round it left in flight (no assignment callback, no
heartbeats). `poll(timeout_ms=1)` makes that window certain, which is what these tests use. The
group members of the interop tests apply the Java client's `rejoinNeededOrPending()` rule
(`group_member._resume_pending_join`); the first test fails once kafka-python fixes the bug, which
is when that workaround can go.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exactly.testing.processes import BrokerProcess
from tests.interop.group_member import _resume_pending_join
from tests.interop.groups_support import describe_group
from tests.interop.support import create_topic, running_broker

pytestmark = pytest.mark.interop

PARTITIONS = 3
STRANDED_FOR_S = 3.0  # how long the stranded leader is watched after the broker settled


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data: Path = tmp_path_factory.mktemp("kafka-python-rejoin") / "data"
    # the topic must not exist (auto-created) when the consumer first joins: it creates it later
    settings = ("group.initial.rebalance.delay.ms=0", "auto.create.topics.enable=false")
    with running_broker(data, *settings) as proc:
        yield proc


class _Leader:
    """A kafka-python consumer, alone in its group, subscribed to a topic that does not exist yet."""

    def __init__(self, bootstrap: str, group: str, topic: str, *, workaround: bool) -> None:
        from kafka import ConsumerRebalanceListener, KafkaConsumer

        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            session_timeout_ms=10_000,
            heartbeat_interval_ms=500,
            metadata_max_age_ms=500,
        )
        if workaround:
            _resume_pending_join(self.consumer)
        self.events: list[tuple[str, list[int]]] = []
        events = self.events

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: Any) -> None:
                events.append(("revoked", sorted(tp.partition for tp in revoked)))

            def on_partitions_assigned(self, assigned: Any) -> None:
                events.append(("assigned", sorted(tp.partition for tp in assigned)))

        self.consumer.subscribe([topic], listener=Listener())

    def poll_until(self, condition: Any, timeout: float, what: str) -> None:
        """poll(timeout_ms=1) back to back, as an application's loop does, until `condition()`: every
        JoinGroup/SyncGroup round outlives a poll."""
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for: {what}\nevents {self.events}")
            self.consumer.poll(timeout_ms=1)

    def assigned(self) -> list[int] | None:
        assigned = [p for kind, p in self.events if kind == "assigned"]
        return assigned[-1] if assigned else None


def _start(broker: BrokerProcess, name: str, *, workaround: bool) -> tuple[_Leader, str, str]:
    topic, group = f"late-{name}", f"late-group-{name}"
    leader = _Leader(broker.bootstrap, group, topic, workaround=workaround)
    # generation 1: the leader knows no partitions of the topic and assigns itself nothing
    leader.poll_until(lambda: leader.assigned() == [], 60, "a first, empty assignment")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    return leader, topic, group


def _stored_share(broker: BrokerProcess, group: str) -> tuple[str, int, list[int]]:
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

    described = describe_group(broker.bootstrap, group)
    if described.group_state != "Stable":  # no assignment to show during a rebalance
        return described.group_state, len(described.members), []
    assert len(described.members) == 1, described
    assignment = ConsumerProtocolAssignment.decode(bytes(described.members[0].member_assignment))
    partitions = sorted(tp.partition for tp in assignment.partitions())
    return described.group_state, len(described.members), partitions


@pytest.mark.slow
def test_kafka_python_strands_a_leader_whose_metadata_rejoin_outlives_a_poll(broker: BrokerProcess) -> None:
    leader, _, group = _start(broker, "bare", workaround=False)
    try:
        # the metadata change makes it rejoin: the broker forms generation 2 and stores its share ...
        leader.poll_until(
            lambda: _stored_share(broker, group) == ("Stable", 1, list(range(PARTITIONS))),
            60,
            "the broker stores the leader's new assignment",
        )
        # ... which the client never applies: it revoked (for the rejoin) and stays without partitions
        deadline = time.monotonic() + STRANDED_FOR_S
        while time.monotonic() < deadline:
            leader.consumer.poll(timeout_ms=1)
            assert leader.assigned() == [], (
                f"kafka-python applied its assignment ({leader.events}): the bug is fixed, drop "
                "group_member._resume_pending_join"
            )
        assert leader.events == [("revoked", []), ("assigned", []), ("revoked", [])]
        assert leader.consumer._coordinator._join_task is not None  # the round nobody completes
        assert leader.consumer._coordinator._join_task.is_done
    finally:
        leader.consumer.close()


def test_kafka_python_with_the_workaround_applies_its_new_assignment(broker: BrokerProcess) -> None:
    leader, _, group = _start(broker, "resumed", workaround=True)
    try:
        leader.poll_until(
            lambda: leader.assigned() == list(range(PARTITIONS)), 60, "the leader owns every partition"
        )
        assert _stored_share(broker, group) == ("Stable", 1, list(range(PARTITIONS)))
    finally:
        leader.consumer.close()

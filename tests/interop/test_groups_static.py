"""Static membership (KIP-345, `group.instance.id`): a member that crashes and restarts within its
session timeout gets its partitions back without a rebalance — the other members see no change, the
group keeps its generation — and the old incarnation's member id is fenced."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from exactly.testing.processes import BrokerProcess
from tests.interop.groups_support import Member, covers, describe_group, produce, wait_until
from tests.interop.support import create_topic, running_broker

pytestmark = pytest.mark.interop

PARTITIONS = 6
# Long enough that a killed member's replacement (a new Python process importing its client library)
# comes back within half of it even on a loaded machine.
SESSION_MS = 60_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data: Path = tmp_path_factory.mktemp("static") / "data"
    with running_broker(data, "group.initial.rebalance.delay.ms=0") as proc:
        yield proc


@pytest.mark.slow
@pytest.mark.parametrize("client", ["confluent", "kafka-python", "aiokafka"])
def test_static_member_restart_keeps_partitions_without_rebalance(
    broker: BrokerProcess, tmp_path: Path, client: str
) -> None:
    topic, group = f"static-{client}", f"static-group-{client}"
    create_topic(broker.bootstrap, topic, PARTITIONS)

    def start(i: int, suffix: str = "") -> Member:
        return Member(
            client,
            broker.bootstrap,
            group,
            topic,
            f"{client}-{i}{suffix}",
            tmp_path,
            instance_id=f"instance-{i}",
            session_ms=SESSION_MS,
        )

    members = [start(i) for i in range(3)]

    def describe() -> str:
        return "\n".join(m.describe() for m in members) + "\n" + broker.log()[-3000:]

    try:
        wait_until(
            lambda: covers(members, PARTITIONS),
            60,
            "three static members share the partitions",
            describe=describe,
        )

        def settled() -> bool:  # no follow-up rebalance left: Stable with all three members
            described = describe_group(broker.bootstrap, group)
            return described.group_state == "Stable" and len(described.members) == 3

        wait_until(
            lambda: settled() and covers(members, PARTITIONS), 60, "a settled group", describe=describe
        )
        before = describe_group(broker.bootstrap, group)
        assert before.group_state == "Stable"
        old_ids = {m.group_instance_id: m.member_id for m in before.members}
        changes = [m.assignment_changes() for m in members]
        old_assignment = members[1].assignment

        members[1].kill()
        members[1] = start(1, "-restarted")
        took = wait_until(
            lambda: members[1].assignment == old_assignment,
            SESSION_MS / 1000 / 2,
            "the restarted member gets its partitions back",
            describe=describe,
        )
        assert took < SESSION_MS / 1000 / 2
        after = describe_group(broker.bootstrap, group)
        assert after.group_state == "Stable"
        new_ids = {m.group_instance_id: m.member_id for m in after.members}
        assert new_ids["instance-1"] != old_ids["instance-1"]  # a new member id for the new incarnation
        assert {k: v for k, v in new_ids.items() if k != "instance-1"} == {
            k: v for k, v in old_ids.items() if k != "instance-1"
        }
        assert [members[0].assignment_changes(), members[2].assignment_changes()] == [
            changes[0],
            changes[2],
        ], "the other members saw a rebalance"
        # and the group works: every new record is consumed by its partition's owner
        values = [f"{client}-static-{i}" for i in range(60)]
        produce(broker.bootstrap, topic, values, PARTITIONS)
        wait_until(
            lambda: set(values) <= {v for m in members for v in m.values},
            60,
            "records consumed",
            describe=describe,
        )
        assert members[1].values
        assert all(v in values for v in members[1].values)
    finally:
        for m in members:
            m.terminate()

"""KIP-848 consumer groups with a real client: librdkafka (confluent-kafka 2.16) consumers with
`group.protocol=consumer`, the broker assigning with its `uniform` assignor.

Three members join, a fourth joins, one is killed (no leave: its session of
group.consumer.session.timeout.ms ends it), the broker restarts under the survivors: every record is
consumed exactly once, the committed offsets reach the end of every partition, and the group (its
epoch, its members) and its offsets survive the restart. Members commit each record synchronously
before reporting it (tests/interop/group_member.py), so "reported" means "committed".
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    DescribedGroup,
)
from tests.interop.client import RawClient
from tests.interop.groups_support import Member, committed_offsets, covers, produce, wait_until
from tests.interop.support import create_topic, list_offset, running_broker

pytestmark = pytest.mark.interop

PARTITIONS = 6
GROUP = "kip848"
TOPIC = "orders"
# Short timeouts (min/max lowered so that they are allowed): a killed member is gone in 3 s.
SETTINGS = (
    "group.consumer.min.session.timeout.ms=1000",
    "group.consumer.session.timeout.ms=3000",
    "group.consumer.min.heartbeat.interval.ms=200",
    "group.consumer.heartbeat.interval.ms=500",
)


def describe(bootstrap: str) -> DescribedGroup:
    client = RawClient(bootstrap)
    try:
        response = client.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, ConsumerGroupDescribeRequest([GROUP]))
    finally:
        client.close()
    group: DescribedGroup = response.groups[0]
    return group


def test_consumer_protocol_members_join_die_and_survive_a_restart(tmp_path: Path) -> None:
    members: list[Member] = []
    produced: list[str] = []

    def batch(bootstrap: str, name: str, count: int = 60) -> None:
        values = [f"{name}-{i}" for i in range(count)]
        produce(bootstrap, TOPIC, values, PARTITIONS)
        produced.extend(values)

    def consumed() -> list[str]:
        return [v for m in members for v in m.values]

    def everything_consumed() -> bool:
        return Counter(consumed()) >= Counter(produced)

    def balanced(sizes: list[int]) -> bool:
        return covers(members, PARTITIONS) and sorted(len(m.assignment or []) for m in members) == sizes

    def report() -> str:
        missing = sorted((Counter(produced) - Counter(consumed())).elements())
        failed = [e for m in members for e in m.snapshot() if e["event"] == "commit-failed"]
        summary = f"missing {missing[:20]} ({len(missing)}); failed commits {failed[:5]}"
        return "\n".join([summary, *(m.describe() for m in members)])

    with running_broker(tmp_path / "data", *SETTINGS) as broker:
        bootstrap = broker.bootstrap
        create_topic(bootstrap, TOPIC, PARTITIONS)
        batch(bootstrap, "first")
        for i in range(3):
            members.append(
                Member("confluent", bootstrap, GROUP, TOPIC, f"m{i}", tmp_path, protocol="consumer")
            )
        try:
            # the uniform assignor balances; reconciliation gets there through intermediate states
            wait_until(lambda: balanced([2, 2, 2]), 30, "3 members share 6 partitions", describe=report)
            wait_until(everything_consumed, 30, "the first batch consumed", describe=report)

            members.append(Member("confluent", bootstrap, GROUP, TOPIC, "m3", tmp_path, protocol="consumer"))
            wait_until(lambda: balanced([1, 1, 2, 2]), 30, "4 members share 6 partitions", describe=report)
            batch(bootstrap, "second")
            wait_until(everything_consumed, 30, "the second batch consumed", describe=report)

            victim = members[1]
            victim.kill()  # no leave: the session timeout removes it
            survivors = [m for m in members if m is not victim]
            wait_until(
                lambda: covers(survivors, PARTITIONS),
                30,
                "3 survivors take the partitions over",
                describe=report,
            )
            batch(bootstrap, "third")
            wait_until(everything_consumed, 30, "the third batch consumed", describe=report)

            wait_until(lambda: describe(bootstrap).group_state == "Stable", 15, "the group Stable")
            before = describe(bootstrap)
            assert before.error_code == 0, before
            assert len(before.members) == 3
            assert before.assignor_name == "uniform"

            broker.restart()  # a clean stop: the group is loaded back from __consumer_offsets
            after = describe(bootstrap)
            assert after.error_code == 0, after
            # loaded back as it was: the same epochs and members (their sessions restart at the load)
            assert (after.group_epoch, after.assignment_epoch) == (
                before.group_epoch,
                before.assignment_epoch,
            )
            assert {m.member_id for m in after.members} == {m.member_id for m in before.members}
            batch(bootstrap, "fourth")
            wait_until(
                everything_consumed, 40, "the fourth batch consumed after the restart", describe=report
            )

            counts = Counter(consumed())
            assert sorted(counts) == sorted(produced)
            assert set(counts.values()) == {1}, [v for v, n in counts.items() if n > 1]
            ends = {p: list_offset(bootstrap, TOPIC, p, -1)[1] for p in range(PARTITIONS)}
            wait_until(
                lambda: committed_offsets(bootstrap, GROUP, TOPIC, PARTITIONS) == ends,
                10,
                "committed offsets at the end of every partition",
            )
        finally:
            for m in members:
                m.kill()

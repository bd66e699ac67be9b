"""Consumer groups with the real clients in subscribe mode, each member in its own process.

For confluent-kafka (cooperative-sticky), kafka-python (range) and aiokafka (roundrobin): three members
share a 6-partition topic and every record is consumed exactly once while each one's offset is
committed; a member killed with SIGKILL has its partitions reassigned once its session (10 s) times out,
without anything consumed twice; a member that closes cleanly (LeaveGroup) has its partitions
reassigned at once; committed offsets always end at the high watermark.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from pathlib import Path

import pytest

from exactly.testing.processes import BrokerProcess
from tests.interop.groups_support import Member, committed_offsets, covers, produce, wait_until
from tests.interop.support import create_topic, running_broker

pytestmark = pytest.mark.interop

PARTITIONS = 6
SESSION_MS = 10_000  # a loaded 2-core machine can starve a client's heartbeat thread for seconds


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data: Path = tmp_path_factory.mktemp("groups") / "data"
    with running_broker(data, "group.initial.rebalance.delay.ms=0") as proc:
        yield proc


def _describe(members: list[Member], broker: BrokerProcess) -> str:
    return "\n".join(m.describe() for m in members) + "\nbroker:\n" + broker.log()[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("client", "strategy"),
    [("confluent", "cooperative-sticky"), ("kafka-python", "range"), ("aiokafka", "roundrobin")],
)
def test_members_share_partitions_and_take_over_after_crash_and_leave(
    broker: BrokerProcess, tmp_path: Path, client: str, strategy: str
) -> None:
    topic = f"orders-{client}"
    group = f"group-{client}"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    members = [
        Member(
            client,
            broker.bootstrap,
            group,
            topic,
            f"{client}-{i}",
            tmp_path,
            strategy=strategy,
            session_ms=SESSION_MS,
        )
        for i in range(3)
    ]

    def describe() -> str:
        return _describe(members, broker)

    try:
        wait_until(
            lambda: covers(members, PARTITIONS), 60, "three members share the partitions", describe=describe
        )
        produced: list[str] = []

        def produce_batch(count: int) -> None:
            values = [f"{client}-{len(produced) + i}" for i in range(count)]
            produce(broker.bootstrap, topic, values, PARTITIONS)
            produced.extend(values)

        def consumed() -> list[str]:
            return [v for m in members for v in m.values]

        def everything_consumed() -> bool:
            return set(consumed()) >= set(produced)

        # 1. three members share the partitions
        produce_batch(300)
        wait_until(everything_consumed, 60, "every record consumed", describe=describe)
        for m in members:  # each record came from a partition its consumer owned
            assert {p for p, _, _ in m.records()} <= set(m.assignment or []), m.describe()

        # 2. a member is killed: its partitions move once its session times out
        victim, survivors = members[0], members[1:]
        victim.kill()
        took = wait_until(lambda: covers(survivors, PARTITIONS), 45, "survivors take over", describe=describe)
        assert took > SESSION_MS / 1000 * 0.6, f"reassigned after {took:.1f}s: before the session timed out?"
        produce_batch(120)
        wait_until(everything_consumed, 60, "records after the crash consumed", describe=describe)

        # 3. a member leaves cleanly: the last one takes everything at once
        leaver, last = survivors
        leaver.terminate()
        assert leaver.snapshot()[-1]["event"] == "closed", leaver.describe()
        took = wait_until(lambda: covers([last], PARTITIONS), 30, "last member takes over", describe=describe)
        assert took < SESSION_MS / 1000, f"a clean leave took {took:.1f}s to rebalance"
        produce_batch(60)
        wait_until(everything_consumed, 60, "records after the leave consumed", describe=describe)

        counts = collections.Counter(consumed())
        assert not [v for v, n in counts.items() if n > 1], "consumed twice"
        assert set(counts) == set(produced)
        per_partition = len(produced) // PARTITIONS
        wait_until(
            lambda: (
                committed_offsets(broker.bootstrap, group, topic, PARTITIONS)
                == dict.fromkeys(range(PARTITIONS), per_partition)
            ),
            10,
            "committed offsets reach the end of every partition",
        )
    finally:
        for m in members:
            m.terminate()


@pytest.mark.slow
def test_one_group_of_three_different_clients(broker: BrokerProcess, tmp_path: Path) -> None:
    """confluent-kafka, kafka-python and aiokafka in one group with the range assignor."""
    topic, group = "mixed", "mixed-group"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    members = [
        Member(c, broker.bootstrap, group, topic, f"mixed-{c}", tmp_path, strategy="range")
        for c in ("confluent", "kafka-python", "aiokafka")
    ]
    try:
        wait_until(
            lambda: covers(members, PARTITIONS),
            60,
            "three clients share the partitions",
            describe=lambda: _describe(members, broker),
        )
        values = [f"mixed-{i}" for i in range(120)]
        produce(broker.bootstrap, topic, values, PARTITIONS)
        wait_until(
            lambda: sorted(v for m in members for v in m.values) == sorted(values),
            60,
            "all consumed",
            describe=lambda: _describe(members, broker),
        )
    finally:
        for m in members:
            m.terminate()

"""KIP-932 share groups with a real client: librdkafka's share consumer (confluent-kafka 2.16
`ShareConsumer`) against the broker with `group.share.enable=true`.

* Two share consumers on one partition get every record exactly once between them (implicit acks).
* A consumer that closes without acknowledging (explicit mode) has its records redelivered, with their
  delivery count raised; REJECTed records never come back; records RELEASEd until the delivery limit
  (2 here) are archived.
* The acknowledged state survives a broker restart: a new consumer gets only what was never accepted.
* `share.isolation.level=read_committed`: records of aborted transactions are never delivered; records
  held by a member that goes silent come back when their acquisition lock (2 s here) expires.
"""

from __future__ import annotations

import contextlib
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer

from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.share_group_describe import ShareGroupDescribeRequest
from tests.interop.client import RawClient
from tests.interop.groups_support import produce, wait_until
from tests.interop.support import create_topic, running_broker

pytestmark = pytest.mark.interop

SETTINGS = (
    "group.share.enable=true",
    "share.auto.offset.reset=earliest",
    "group.share.record.lock.duration.ms=2000",
    "group.share.delivery.count.limit=2",
)


def consumer(bootstrap: str, group: str, explicit: bool = False) -> Any:
    settings = {"bootstrap.servers": bootstrap, "group.id": group, "log_level": 3}
    if explicit:
        settings["share.acknowledgement.mode"] = "explicit"
    c = ShareConsumer(settings)
    c.subscribe(["t"] if group != "txn" else ["tx"])
    return c


def poll(c: Any, timeout: float = 0.5) -> list[Any]:
    return [m for m in c.poll(timeout) if m.error() is None]


def drain(consumers: list[Any], wanted: int, seconds: float = 20.0) -> list[tuple[int, str]]:
    """Poll the consumers in turn until `wanted` records came (implicit mode: each poll accepts the last)."""
    got: list[tuple[int, str]] = []

    def more() -> bool:
        for c in consumers:
            got.extend((i, m.value().decode()) for m in poll(c, 0.2) for i in [consumers.index(c)])
        return len(got) >= wanted

    wait_until(more, seconds, f"{wanted} records", describe=lambda: str(got))
    return got


def describe(bootstrap: str, group: str) -> Any:
    client = RawClient(bootstrap)
    try:
        return client.request(ApiKey.SHARE_GROUP_DESCRIBE, 1, ShareGroupDescribeRequest([group])).groups[0]
    finally:
        client.close()


@pytest.fixture
def closing() -> Iterator[list[Any]]:
    opened: list[Any] = []
    yield opened
    for c in opened:
        with contextlib.suppress(Exception):  # already closed by the test
            c.close()


def test_share_consumers_split_records_redeliver_reject_and_survive_a_restart(
    tmp_path: Path, closing: list[Any]
) -> None:
    with running_broker(tmp_path, *SETTINGS) as broker:
        bootstrap = broker.bootstrap
        create_topic(bootstrap, "t", 1)
        produce(bootstrap, "t", [f"a{i}" for i in range(40)], 1)

        # two members on the one partition: every record once between them
        pair = [consumer(bootstrap, "split"), consumer(bootstrap, "split")]
        closing.extend(pair)
        got = drain(pair, 40)
        counts = Counter(v for _, v in got)
        assert sorted(counts) == sorted(f"a{i}" for i in range(40))
        assert set(counts.values()) == {1}
        group = describe(bootstrap, "split")
        assert group.group_state == "Stable"
        assert len(group.members) == 2
        assert all(m.assignment.topic_partitions[0].partitions == [0] for m in group.members)

        # explicit acks: reject a0-a4, accept a5-a19, leave a20.. unacknowledged and close
        first = consumer(bootstrap, "acks", explicit=True)
        seen: list[Any] = []
        wait_until(lambda: bool(seen.extend(poll(first)) or seen), 10, "a first delivery")
        for m in seen:
            n = int(m.value().decode()[1:])
            if n < 5:
                first.acknowledge(m, AcknowledgeType.REJECT)
            elif n < 20:
                first.acknowledge(m, AcknowledgeType.ACCEPT)
        first.commit_sync()
        unacked = {m.value().decode() for m in seen if int(m.value().decode()[1:]) >= 20}
        first.close()

        # a second member: the unacknowledged ones again (delivery count 2), never a rejected or
        # accepted one; it releases them all, which is their last delivery (limit 2): archived
        second = consumer(bootstrap, "acks", explicit=True)
        closing.append(second)
        again: list[Any] = []
        expected = unacked | {f"a{i}" for i in range(40)} - {m.value().decode() for m in seen}

        def redelivered() -> bool:
            batch = poll(second)
            for m in batch:
                second.acknowledge(m, AcknowledgeType.RELEASE)
            again.extend(batch)
            if batch:
                second.commit_sync()
            return {m.value().decode() for m in again} >= expected

        wait_until(redelivered, 20, "the unacknowledged records again", describe=lambda: str(len(again)))
        values = [m.value().decode() for m in again]
        assert not {v for v in values if int(v[1:]) < 20}, "rejected and accepted records never come back"
        assert all(m.delivery_count() == 2 for m in again if m.value().decode() in unacked)
        assert len(values) == len(set(values))
        assert poll(second, 1.0) == [], "records released at the delivery limit are archived"

        # a third group accepts a0-a9 only, then the broker restarts
        third = consumer(bootstrap, "restart", explicit=True)
        taken: list[Any] = []
        wait_until(lambda: bool(taken.extend(poll(third)) or taken), 10, "records")
        for m in taken:
            kind = AcknowledgeType.ACCEPT if int(m.value().decode()[1:]) < 10 else AcknowledgeType.RELEASE
            third.acknowledge(m, kind)
        third.commit_sync()
        third.close()
        broker.stop()
        broker.start()
        bootstrap = broker.bootstrap
        fourth = consumer(bootstrap, "restart")
        closing.append(fourth)
        after = drain([fourth], 30)
        assert sorted(v for _, v in after) == sorted(f"a{i}" for i in range(10, 40))


def test_read_committed_share_group_never_sees_aborted_records(tmp_path: Path, closing: list[Any]) -> None:
    with running_broker(tmp_path, *SETTINGS, "share.isolation.level=read_committed") as broker:
        bootstrap = broker.bootstrap
        create_topic(bootstrap, "tx", 1)
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{uuid.uuid4()}"})
        producer.init_transactions(10)
        for round_ in range(4):
            producer.begin_transaction()
            for i in range(5):
                producer.produce(
                    "tx", f"{'keep' if round_ % 2 == 0 else 'drop'}-{round_}-{i}".encode(), partition=0
                )
            if round_ % 2 == 0:
                producer.commit_transaction(10)
            else:
                producer.abort_transaction(10)
        committed = sorted(f"keep-{r}-{i}" for r in (0, 2) for i in range(5))
        # a member acquires everything and goes silent (no acknowledgement, no close): its locks expire
        silent = consumer(bootstrap, "txn", explicit=True)
        closing.append(silent)
        held: list[Any] = []
        wait_until(lambda: bool(held.extend(poll(silent))) or len(held) >= 10, 10, "the first delivery")
        assert sorted(m.value().decode() for m in held) == committed
        c = consumer(bootstrap, "txn")
        closing.append(c)
        got: list[Any] = []
        wait_until(lambda: bool(got.extend(poll(c))) or len(got) >= 10, 15, "redelivery after the lock")
        assert sorted(m.value().decode() for m in got) == committed
        assert {m.delivery_count() for m in got} == {2}
        assert poll(c, 1.0) == []

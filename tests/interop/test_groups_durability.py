"""Committed offsets and groups survive `kill -9` of the broker: an acknowledged OffsetCommit is on disk,
the coordinator rebuilds every group from `__consumer_offsets` at start, and consumers carry on from
their committed offsets."""

from __future__ import annotations

import collections
import threading
from pathlib import Path

import pytest

from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from tests.interop.client import RawClient
from tests.interop.groups_support import (
    Member,
    committed_offsets,
    covers,
    describe_group,
    produce,
    wait_until,
)
from tests.interop.support import create_topic, running_broker

pytestmark = pytest.mark.interop

PARTITIONS = 3


def test_acknowledged_commits_survive_kill_minus_nine(tmp_path: Path) -> None:
    """Commits race a SIGKILL: every commit that was acknowledged is there after the restart."""
    with running_broker(tmp_path / "data") as broker:
        create_topic(broker.bootstrap, "t", PARTITIONS)
        acked: dict[int, int] = {}
        stop = threading.Event()

        def committer(partition: int) -> None:
            client = RawClient(broker.bootstrap, timeout=5)
            try:
                offset = 0
                while not stop.is_set():
                    offset += 1
                    request = OffsetCommitRequest(
                        "raw-group",
                        -1,
                        "",
                        None,
                        -1,
                        [
                            OffsetCommitRequestTopic(
                                "t", partitions=[OffsetCommitRequestPartition(partition, offset)]
                            )
                        ],
                    )
                    response = client.request(ApiKey.OFFSET_COMMIT, 8, request)
                    assert response.topics[0].partitions[0].error_code == ErrorCode.NONE
                    acked[partition] = offset
            except (OSError, ConnectionError):
                return  # the broker died mid-request: that commit was not acknowledged
            finally:
                client.close()

        threads = [threading.Thread(target=committer, args=(p,)) for p in range(PARTITIONS)]
        for t in threads:
            t.start()
        wait_until(lambda: min(acked.values(), default=0) >= 50, 30, "commits are flowing")
        broker.kill()
        stop.set()
        for t in threads:
            t.join(10)
        last_acked = dict(acked)
        broker.start()
        after = committed_offsets(broker.bootstrap, "raw-group", "t", PARTITIONS)
        for partition, offset in last_acked.items():
            # the acknowledged commit is there; one more may have landed without its answer
            assert after[partition] in (offset, offset + 1), (partition, offset, after)
        assert describe_group(broker.bootstrap, "raw-group").group_state == "Empty"


@pytest.mark.slow
def test_groups_and_consumers_carry_on_after_kill_minus_nine(tmp_path: Path) -> None:
    with running_broker(tmp_path / "data", "group.initial.rebalance.delay.ms=0") as broker:
        topic = "events"
        create_topic(broker.bootstrap, topic, PARTITIONS)
        first = [f"old-{i}" for i in range(90)]
        produce(broker.bootstrap, topic, first, PARTITIONS)
        # group "done": consumes everything, then leaves (an Empty group with offsets)
        done = Member("confluent", broker.bootstrap, "done", topic, "done-0", tmp_path)
        # group "live": a member that keeps running through the broker's crash
        live = Member("kafka-python", broker.bootstrap, "live", topic, "live-0", tmp_path, session_ms=20_000)
        members = [done, live]

        def describe() -> str:
            return "\n".join(m.describe() for m in members) + "\n" + broker.log()[-3000:]

        try:
            wait_until(
                lambda: set(done.values) == set(first) and set(live.values) == set(first),
                60,
                "both groups consume everything",
                describe=describe,
            )
            done.terminate()
            expected = dict.fromkeys(range(PARTITIONS), len(first) // PARTITIONS)
            assert committed_offsets(broker.bootstrap, "done", topic, PARTITIONS) == expected
            assert committed_offsets(broker.bootstrap, "live", topic, PARTITIONS) == expected
            stable = describe_group(broker.bootstrap, "live")
            assert stable.group_state == "Stable"

            broker.kill()
            broker.start()

            assert committed_offsets(broker.bootstrap, "done", topic, PARTITIONS) == expected
            assert committed_offsets(broker.bootstrap, "live", topic, PARTITIONS) == expected
            assert describe_group(broker.bootstrap, "done").group_state == "Empty"
            reloaded = describe_group(broker.bootstrap, "live")
            assert [m.member_id for m in reloaded.members] == [m.member_id for m in stable.members]

            second = [f"new-{i}" for i in range(30)]
            produce(broker.bootstrap, topic, second, PARTITIONS)
            wait_until(
                lambda: set(second) <= set(live.values), 60, "the live member carries on", describe=describe
            )
            again = Member("aiokafka", broker.bootstrap, "done", topic, "done-1", tmp_path)
            members.append(again)
            wait_until(
                lambda: covers([again], PARTITIONS), 60, "a new member of 'done' joins", describe=describe
            )
            wait_until(
                lambda: set(again.values) == set(second), 60, "it resumes from the commits", describe=describe
            )
            counts = collections.Counter(live.values)
            assert max(counts.values()) == 1, "the live member consumed something twice"
            assert sorted(again.values) == sorted(second)
        finally:
            for m in members:
                m.terminate()

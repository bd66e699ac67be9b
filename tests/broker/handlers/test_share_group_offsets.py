"""Describe/Alter/DeleteShareGroupOffsets (keys 90-92) against a broker built in-process (port 0): Kafka's
rules for the group (unknown, non-empty, of another type), the topics and partitions, and what a change
leaves in the share partitions and `__share_group_state` (it survives a restart)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import exactly.broker.handlers  # noqa: F401  (registers the handlers)
from exactly.broker.config import BrokerConfig
from exactly.broker.server import Broker
from exactly.errors import ErrorCode
from exactly.group.share.records import SharePartitionKey
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.alter_share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
    AlterShareGroupOffsetsResponse,
)
from exactly.protocol.messages.api_versions import ApiVersionsRequest
from exactly.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from exactly.protocol.messages.delete_share_group_offsets import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequestTopic,
    DeleteShareGroupOffsetsResponse,
)
from exactly.protocol.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsRequestTopic,
    DescribeShareGroupOffsetsResponseGroup,
)
from exactly.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from exactly.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from tests.interop.client import RawClient

SHARE_KEYS = {
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS,
}


@asynccontextmanager
async def running(tmp_path: Path, share: bool = True) -> AsyncIterator[Broker]:
    props = {
        "log.dirs": str(tmp_path / "data"),
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "offsets.topic.num.partitions": "2",
        "transaction.state.log.num.partitions": "2",
        "share.coordinator.state.topic.num.partitions": "2",
        "group.share.enable": "true" if share else "false",
    }
    broker = Broker(BrokerConfig.from_properties(props))
    await broker.start()
    try:
        yield broker
    finally:
        broker.request_stop()
        await broker.stop()


async def talk(broker: Broker, work: Callable[[RawClient], Any]) -> Any:
    def run() -> Any:
        client = RawClient(f"127.0.0.1:{broker.port}")
        try:
            return work(client)
        finally:
            client.close()

    return await asyncio.get_running_loop().run_in_executor(None, run)


def create(c: RawClient, name: str, partitions: int) -> None:
    response = c.request(
        ApiKey.CREATE_TOPICS, 5, CreateTopicsRequest([CreatableTopic(name, partitions, 1)], 10_000)
    )
    assert response.topics[0].error_code == ErrorCode.NONE


def join(c: RawClient, group: str, member: str, topic: str) -> None:
    request = ShareGroupHeartbeatRequest(group, member, 0, None, [topic])
    assert c.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, request).error_code == ErrorCode.NONE


def leave(c: RawClient, group: str, member: str) -> None:
    request = ShareGroupHeartbeatRequest(group, member, -1, None, None)
    assert c.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, request).error_code == ErrorCode.NONE


def alter(c: RawClient, group: str, topic: str, offsets: dict[int, int]) -> AlterShareGroupOffsetsResponse:
    parts = [AlterShareGroupOffsetsRequestPartition(p, o) for p, o in offsets.items()]
    request = AlterShareGroupOffsetsRequest(group, [AlterShareGroupOffsetsRequestTopic(topic, parts)])
    return c.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, request)  # type: ignore[no-any-return]


def delete(c: RawClient, group: str, *topics: str) -> DeleteShareGroupOffsetsResponse:
    request = DeleteShareGroupOffsetsRequest(group, [DeleteShareGroupOffsetsRequestTopic(t) for t in topics])
    return c.request(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, request)  # type: ignore[no-any-return]


def describe(
    c: RawClient, group: str, topics: dict[str, list[int]] | None = None
) -> DescribeShareGroupOffsetsResponseGroup:
    asked = (
        None if topics is None else [DescribeShareGroupOffsetsRequestTopic(t, ps) for t, ps in topics.items()]
    )
    request = DescribeShareGroupOffsetsRequest([DescribeShareGroupOffsetsRequestGroup(group, asked)])
    return c.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, request).groups[0]  # type: ignore[no-any-return]


def starts(group: DescribeShareGroupOffsetsResponseGroup) -> dict[tuple[str, int], tuple[int, int]]:
    return {
        (t.topic_name, p.partition_index): (p.start_offset, p.error_code)
        for t in group.topics
        for p in t.partitions
    }


def test_offsets_of_an_empty_share_group_are_altered_described_and_deleted(tmp_path: Path) -> None:
    async def run() -> None:
        async with running(tmp_path) as broker:

            def scenario(c: RawClient) -> None:
                create(c, "t", 2)
                create(c, "other", 1)
                # an unknown group: GROUP_ID_NOT_FOUND for the whole request; describe answers -1, no error
                assert alter(c, "g", "t", {0: 5}).error_code == ErrorCode.GROUP_ID_NOT_FOUND
                assert delete(c, "g", "t").error_code == ErrorCode.GROUP_ID_NOT_FOUND
                assert starts(describe(c, "g", {"t": [0]})) == {("t", 0): (-1, 0)}
                assert describe(c, "g").topics == []
                # a member: NON_EMPTY_GROUP
                join(c, "g", "m1", "t")
                assert alter(c, "g", "t", {0: 5}).error_code == ErrorCode.NON_EMPTY_GROUP
                assert delete(c, "g", "t").error_code == ErrorCode.NON_EMPTY_GROUP
                leave(c, "g", "m1")
                # empty: per-partition answers
                response = alter(c, "g", "t", {0: 5, 1: 7, 9: 1})
                assert response.error_code == ErrorCode.NONE
                assert {p.partition_index: p.error_code for p in response.responses[0].partitions} == {
                    0: ErrorCode.NONE,
                    1: ErrorCode.NONE,
                    9: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                }
                missing = alter(c, "g", "nope", {0: 1}).responses[0]
                assert missing.partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                negative = alter(c, "g", "t", {0: -3}).responses[0]
                assert negative.partitions[0].error_code == ErrorCode.INVALID_REQUEST
                assert starts(describe(c, "g")) == {("t", 0): (5, 0), ("t", 1): (7, 0)}
                assert starts(describe(c, "g", {"t": [1], "nope": [0]})) == {
                    ("t", 1): (7, 0),
                    ("nope", 0): (-1, 0),
                }
                # delete: the topic with state goes; one without state, or unknown: UNKNOWN_TOPIC_OR_PARTITION
                deleted = delete(c, "g", "t", "other", "nope")
                assert deleted.error_code == ErrorCode.NONE
                assert {t.topic_name: t.error_code for t in deleted.responses} == {
                    "t": ErrorCode.NONE,
                    "other": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    "nope": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                }
                assert describe(c, "g").topics == []

            await talk(broker, scenario)
            assert not broker.shares.group_keys("g")

    asyncio.run(run())


def test_a_classic_group_is_not_a_share_group(tmp_path: Path) -> None:
    async def run() -> None:
        async with running(tmp_path) as broker:

            def scenario(c: RawClient) -> None:
                create(c, "t", 1)
                commit = OffsetCommitRequest(
                    "classic",
                    -1,
                    "",
                    None,
                    -1,
                    [OffsetCommitRequestTopic("t", partitions=[OffsetCommitRequestPartition(0, 3)])],
                )
                assert c.request(ApiKey.OFFSET_COMMIT, 8, commit).topics[0].partitions[0].error_code == 0
                assert alter(c, "classic", "t", {0: 1}).error_code == ErrorCode.GROUP_ID_NOT_FOUND
                assert delete(c, "classic", "t").error_code == ErrorCode.GROUP_ID_NOT_FOUND

            await talk(broker, scenario)

    asyncio.run(run())


def test_altered_state_survives_a_restart_and_keeps_the_group_known(tmp_path: Path) -> None:
    async def run() -> None:
        async with running(tmp_path) as broker:

            def before(c: RawClient) -> None:
                create(c, "t", 1)
                join(c, "g", "m1", "t")
                leave(c, "g", "m1")
                assert alter(c, "g", "t", {0: 11}).error_code == ErrorCode.NONE

            await talk(broker, before)
            topic_id = broker.metadata.topics["t"].topic_id
            assert broker.shares.start_offset(SharePartitionKey("g", topic_id, 0)) == 11
        async with running(tmp_path) as broker:
            # membership is in memory only: the group is known by its stored state, empty, so alterable
            def after(c: RawClient) -> None:
                assert starts(describe(c, "g")) == {("t", 0): (11, 0)}
                assert alter(c, "g", "t", {0: 4}).error_code == ErrorCode.NONE
                assert starts(describe(c, "g")) == {("t", 0): (4, 0)}
                assert delete(c, "g", "t").error_code == ErrorCode.NONE

            await talk(broker, after)
        async with running(tmp_path) as broker:
            assert await talk(broker, lambda c: describe(c, "g").topics) == []
            assert (
                await talk(broker, lambda c: alter(c, "g", "t", {0: 1}).error_code)
                == ErrorCode.GROUP_ID_NOT_FOUND
            )

    asyncio.run(run())


def test_off_unless_share_groups_are_enabled(tmp_path: Path) -> None:
    async def run() -> None:
        async with running(tmp_path, share=False) as broker:

            def scenario(c: RawClient) -> None:
                versions = c.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("t", "1"))
                assert not SHARE_KEYS & {k.api_key for k in versions.api_keys}
                assert alter(c, "g", "t", {0: 1}).error_code == ErrorCode.UNSUPPORTED_VERSION
                assert delete(c, "g", "t").error_code == ErrorCode.UNSUPPORTED_VERSION
                assert describe(c, "g").error_code == ErrorCode.UNSUPPORTED_VERSION

            await talk(broker, scenario)
        async with running(tmp_path / "on") as broker:
            versions = await talk(
                broker, lambda c: c.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("t", "1"))
            )
            assert {
                k.api_key: (k.min_version, k.max_version)
                for k in versions.api_keys
                if k.api_key in SHARE_KEYS
            } == {int(k): (0, 0) for k in SHARE_KEYS}

    asyncio.run(run())

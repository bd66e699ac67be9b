"""`GroupService` built from its parts (no `Broker`): what it answers is in `__consumer_offsets` and
durable first, a new service over the same logs restores it, a failed append rolls the coordinator back
and answers NOT_COORDINATOR, and its deadline timer expires sessions."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from exactly.broker.groups import OFFSETS_TOPIC, GroupService
from exactly.errors import ErrorCode, KafkaError
from exactly.group import ClientInfo, GroupCoordinator
from exactly.protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol, JoinGroupResponse
from exactly.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
)
from tests.broker.parts import Parts, build_parts, until
from tests.group.helpers import consumer_protocols

GROUP = "g"


def _service(parts: Parts) -> GroupService:
    return GroupService(parts.config, parts.replicas, parts.topics, parts.clock, parts.scheduler)


def _commit_request(offset: int) -> OffsetCommitRequest:
    partitions = [OffsetCommitRequestPartition(0, offset, -1, -1, "meta")]
    return OffsetCommitRequest(
        GROUP, -1, "", None, -1, [OffsetCommitRequestTopic("t", partitions=partitions)]
    )


async def _commit(service: GroupService, offset: int) -> ErrorCode:
    response = await service.call(lambda c: c.commit_offsets(ClientInfo(), _commit_request(offset)))
    assert isinstance(response, OffsetCommitResponse)
    return ErrorCode(response.topics[0].partitions[0].error_code)


def _committed(coordinator: GroupCoordinator) -> int:
    found = coordinator.fetch_offsets(GROUP, [("t", [0])])
    return found.topics[0].partitions[0].committed_offset


def test_a_commit_is_durable_when_answered_and_restored_by_a_new_service(tmp_path: Path) -> None:
    async def run() -> None:
        parts = build_parts(tmp_path, offsets_topic_num_partitions="3")
        service = _service(parts)
        service.start()
        assert await _commit(service, 42) == ErrorCode.NONE
        partition = parts.replicas.partition(OFFSETS_TOPIC, service.coordinator.partition_for(GROUP))
        assert partition is not None
        assert partition.log_end_offset == 1
        assert partition.high_watermark == 1
        assert partition.log.recovery_point == 1  # fsynced before the answer
        assert parts.topics.partitions(OFFSETS_TOPIC) == 3
        await service.stop()
        await parts.close()

        again = build_parts(tmp_path, offsets_topic_num_partitions="3")
        restored = _service(again)
        restored.load()
        assert restored.loaded_records == 1
        assert _committed(restored.coordinator) == 42
        await again.close()

    asyncio.run(run())


def test_an_append_refused_by_the_partition_rolls_back_and_answers_not_coordinator(tmp_path: Path) -> None:
    async def run() -> None:
        parts = build_parts(tmp_path, offsets_topic_num_partitions="1")
        service = _service(parts)
        service.start()
        assert await _commit(service, 5) == ErrorCode.NONE
        partition = parts.replicas.partition(OFFSETS_TOPIC, 0)
        assert partition is not None
        partition.is_leader = False  # another broker leads __consumer_offsets-0 now
        with pytest.raises(KafkaError) as refused:
            await _commit(service, 6)
        assert refused.value.code is ErrorCode.NOT_COORDINATOR
        assert _committed(service.coordinator) == 5
        assert partition.log_end_offset == 1
        await service.stop()
        await parts.close()

    asyncio.run(run())


def test_the_deadline_timer_expires_a_silent_members_session(tmp_path: Path) -> None:
    async def run() -> None:
        parts = build_parts(tmp_path, offsets_topic_num_partitions="1", group_initial_rebalance_delay_ms="0")
        service = _service(parts)
        service.start()
        protocols = [JoinGroupRequestProtocol(n, m) for n, m in consumer_protocols("t")]
        client = ClientInfo("c", "/127.0.0.1", 5)

        def join(member_id: str) -> JoinGroupRequest:
            return JoinGroupRequest(GROUP, 10_000, 20_000, member_id, None, "consumer", protocols)

        first = await service.call(lambda c: c.join_group(client, join("")))
        assert isinstance(first, JoinGroupResponse)
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
        joined = await service.call(lambda c: c.join_group(client, join(first.member_id)))
        assert isinstance(joined, JoinGroupResponse)
        assert (joined.error_code, joined.leader, joined.generation_id) == (0, first.member_id, 1)
        assert set(service.coordinator.groups[GROUP].members) == {first.member_id}

        parts.clock.advance(10_001)  # no heartbeat for longer than the session timeout
        await until(lambda: not service.coordinator.groups[GROUP].members)
        await service.stop()
        await parts.close()

    asyncio.run(run())


def test_a_resigned_partition_forgets_its_groups_until_it_is_led_again(tmp_path: Path) -> None:
    async def run() -> None:
        parts = build_parts(tmp_path, offsets_topic_num_partitions="1")
        service = _service(parts)
        service.start()
        assert await _commit(service, 11) == ErrorCode.NONE
        service.runtime.resigned(0)  # the cluster moved __consumer_offsets-0 to another broker
        assert service.coordinator.offsets.snapshot() == {}
        with pytest.raises(KafkaError) as moved:
            await service.read(GROUP, _committed)
        assert moved.value.code is ErrorCode.NOT_COORDINATOR
        with pytest.raises(KafkaError) as refused:
            await _commit(service, 12)
        assert refused.value.code is ErrorCode.NOT_COORDINATOR
        assert service.runtime.became_leader(0) == 1  # loaded again from its log
        assert await service.read(GROUP, _committed) == 11
        await service.stop()
        await parts.close()

    asyncio.run(run())

"""`GroupService` built from its parts (no `Broker`): what it answers is in `__consumer_offsets` and
durable first, a new service over the same logs restores it, a failed append rolls the coordinator back
and answers NOT_COORDINATOR, and its deadline timer expires sessions. In a cluster (partition states
applied as ZooKeeper would): only the leader of a group's partition serves it, resigning answers parked
requests at once, a new leader loads to its log end and answers once the ISR has it, and COMMIT/ABORT
markers reach the coordinator through the replica manager, each deciding its own partition's groups."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from pathlib import Path

import pytest

from exactly.broker.coordinator_runtime import CoordinatorWriteError, append_error
from exactly.broker.groups import OFFSETS_TOPIC, GroupService, write_error_answer
from exactly.errors import ErrorCode, KafkaError
from exactly.group import ClientInfo, GroupCoordinator
from exactly.protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol, JoinGroupResponse
from exactly.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
)
from exactly.protocol.messages.sync_group import SyncGroupResponse
from exactly.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
    TxnOffsetCommitResponse,
)
from exactly.records.control import ControlRecordType, EndTxnMarker
from exactly.storage.log import Isolation
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
    response = await service.call(GROUP, lambda c: c.commit_offsets(ClientInfo(), _commit_request(offset)))
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

        first = await service.call(GROUP, lambda c: c.join_group(client, join("")))
        assert isinstance(first, JoinGroupResponse)
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
        joined = await service.call(GROUP, lambda c: c.join_group(client, join(first.member_id)))
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


# --- a cluster: the coordinator is the leader of the group's partition --------------------------------


def _lead(parts: Parts, partition: int, leader: int, epoch: int, replicas: tuple[int, ...] = (0,)) -> None:
    """Apply a partition state of `__consumer_offsets` as ZooKeeper would (this broker is 0)."""
    parts.replicas.cluster = True
    parts.replicas.become_leader_or_follower(
        OFFSETS_TOPIC,
        partition,
        leader=leader,
        leader_epoch=epoch,
        isr=list(replicas),
        replicas=list(replicas),
        partition_epoch=epoch,
    )


def _join(member_id: str) -> JoinGroupRequest:
    protocols = [JoinGroupRequestProtocol(n, m) for n, m in consumer_protocols("t")]
    return JoinGroupRequest(GROUP, 10_000, 20_000, member_id, None, "consumer", protocols)


async def _code(call: Awaitable[object]) -> ErrorCode:
    try:
        await call
    except KafkaError as e:
        return e.code
    return ErrorCode.NONE


def test_a_broker_that_does_not_lead_the_groups_partition_answers_not_coordinator(tmp_path: Path) -> None:
    async def run() -> None:
        parts = build_parts(tmp_path, offsets_topic_num_partitions="1")
        service = _service(parts)
        service.start()
        assert await _commit(service, 7) == ErrorCode.NONE
        assert [g.group_id for g in service.list_groups()] == [GROUP]
        _lead(parts, 0, leader=1, epoch=1, replicas=(0, 1))  # broker 1 leads __consumer_offsets-0 now
        client = ClientInfo("c", "/127.0.0.1", 5)
        moved = ErrorCode.NOT_COORDINATOR
        assert await _code(_commit(service, 8)) is moved
        assert await _code(service.read(GROUP, _committed)) is moved
        assert await _code(service.call(GROUP, lambda c: c.join_group(client, _join("")))) is moved
        assert await _code(service.read(GROUP, lambda c: c.describe_groups([GROUP]))) is moved
        assert service.list_groups() == []  # only the groups it coordinates
        assert service.coordinator.groups == {}
        _lead(parts, 0, leader=0, epoch=2)  # and back: loaded from the log
        assert await service.read(GROUP, _committed) == 7
        assert [g.group_id for g in service.list_groups()] == [GROUP]
        await service.stop()
        await parts.close()

    asyncio.run(run())


def test_resigning_answers_parked_joins_not_coordinator_at_once_and_drops_their_deadlines(
    tmp_path: Path,
) -> None:
    async def run() -> None:
        parts = build_parts(tmp_path, offsets_topic_num_partitions="1")  # initial rebalance delay 3 s
        service = _service(parts)
        service.start()
        client = ClientInfo("c", "/127.0.0.1", 5)
        first = await service.call(GROUP, lambda c: c.join_group(client, _join("")))
        assert isinstance(first, JoinGroupResponse)
        parked = asyncio.create_task(
            service.call(GROUP, lambda c: c.join_group(client, _join(first.member_id)))
        )
        await until(lambda: first.member_id in service.coordinator.groups[GROUP].members)
        assert not parked.done()
        assert service.coordinator.next_deadline() is not None
        _lead(parts, 0, leader=1, epoch=1, replicas=(0, 1))
        async with asyncio.timeout(1):  # not the rebalance delay: at once
            assert await _code(parked) is ErrorCode.NOT_COORDINATOR
        assert service.coordinator.next_deadline() is None
        assert GROUP not in service.coordinator.groups
        await service.stop()
        await parts.close()

    asyncio.run(run())


def test_a_new_leader_loads_to_its_log_end_and_answers_once_the_isr_has_it(tmp_path: Path) -> None:
    async def run() -> None:
        old = build_parts(tmp_path / "old", offsets_topic_num_partitions="1")
        previous = _service(old)
        previous.start()
        assert await _commit(previous, 42) == ErrorCode.NONE
        written = old.replicas.online_partition(OFFSETS_TOPIC, 0).log.read(0, 1 << 20, Isolation.LOG_END)
        await previous.stop()

        parts = build_parts(tmp_path / "new", offsets_topic_num_partitions="1")
        service = _service(parts)
        service.start()
        await service.ensure_topic()
        _lead(parts, 0, leader=1, epoch=1, replicas=(0, 1))
        partition = parts.replicas.online_partition(OFFSETS_TOPIC, 0)
        partition.append_records_as_follower(bytes(written.records), 0)  # the leader's HW not known yet
        assert (partition.log_end_offset, partition.high_watermark) == (1, 0)
        _lead(parts, 0, leader=0, epoch=2, replicas=(0, 1))  # the leader died: this broker leads
        assert _committed(service.coordinator) == 42  # loaded above the high watermark
        read = asyncio.create_task(service.read(GROUP, _committed))
        await asyncio.sleep(0.05)
        assert not read.done()  # not answered until the ISR has it
        parts.replicas.follower_fetched(partition, 1, 1)
        async with asyncio.timeout(5):
            assert await read == 42
        await service.stop()
        await parts.close()
        await old.close()

    asyncio.run(run())


def _groups_in_two_partitions(service: GroupService) -> tuple[str, str]:
    names = [f"group-{i}" for i in range(20)]
    first = names[0]
    second = next(n for n in names if service.partition_for(n) != service.partition_for(first))
    return first, second


def test_a_marker_decides_its_partitions_pending_offsets_and_a_new_leader_restores_the_rest(
    tmp_path: Path,
) -> None:
    async def run() -> None:
        parts = build_parts(tmp_path, offsets_topic_num_partitions="4")
        service = _service(parts)
        service.start()
        one, two = _groups_in_two_partitions(service)

        async def commit(group: str, offset: int) -> None:
            topics = [TxnOffsetCommitRequestTopic("t", [TxnOffsetCommitRequestPartition(0, offset)])]
            request = TxnOffsetCommitRequest("tx", group, 5, 0, topics=topics)
            response = await service.call(group, lambda c: c.commit_transactional_offsets(request))
            assert response.topics[0].partitions[0].error_code == ErrorCode.NONE

        def committed(group: str) -> int:
            return (
                service.coordinator.fetch_offsets(group, [("t", [0])])
                .topics[0]
                .partitions[0]
                .committed_offset
            )

        await commit(one, 10)
        await commit(two, 20)
        assert (committed(one), committed(two)) == (-1, -1)  # pending
        commit_marker = EndTxnMarker(ControlRecordType.COMMIT, 0)
        # however the marker arrives (the local transaction coordinator, another broker's WriteTxnMarkers),
        # the replica manager appends it and the group coordinator hears of it
        parts.replicas.append_end_txn_marker(OFFSETS_TOPIC, service.partition_for(one), 5, 0, commit_marker)
        assert (committed(one), committed(two)) == (10, -1)  # the other partition's marker decides `two`
        assert service.coordinator.offsets.has_pending(two, ("t", 0))
        p2 = service.partition_for(two)
        service.runtime.resigned(p2)  # the partition moves away and back: restored pending from its log
        assert not service.coordinator.offsets.has_pending(two, ("t", 0))
        service.runtime.became_leader(p2)
        assert service.coordinator.offsets.has_pending(two, ("t", 0))
        parts.replicas.append_end_txn_marker(OFFSETS_TOPIC, p2, 5, 0, commit_marker)
        assert (committed(one), committed(two)) == (10, 20)
        await service.stop()
        await parts.close()

    asyncio.run(run())


@pytest.mark.parametrize(
    ("cause", "response", "code"),
    [
        (ErrorCode.REQUEST_TIMED_OUT, SyncGroupResponse(), ErrorCode.REBALANCE_IN_PROGRESS),
        (ErrorCode.REQUEST_TIMED_OUT, OffsetCommitResponse(), ErrorCode.REQUEST_TIMED_OUT),
        (ErrorCode.REQUEST_TIMED_OUT, TxnOffsetCommitResponse(), ErrorCode.REQUEST_TIMED_OUT),
        (ErrorCode.REQUEST_TIMED_OUT, JoinGroupResponse(), ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (
            ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
            SyncGroupResponse(),
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ),
        (ErrorCode.NOT_ENOUGH_REPLICAS, OffsetCommitResponse(), ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.NOT_LEADER_OR_FOLLOWER, SyncGroupResponse(), ErrorCode.NOT_COORDINATOR),
        (ErrorCode.NOT_LEADER_OR_FOLLOWER, OffsetCommitResponse(), ErrorCode.NOT_COORDINATOR),
    ],
)
def test_a_failed_group_write_answers_as_kafkas_group_coordinator(
    cause: ErrorCode, response: object, code: ErrorCode
) -> None:
    assert write_error_answer(CoordinatorWriteError(append_error(cause), cause), response) is code

"""Group APIs over the wire with our own codecs (RawClient): every version the clients use, and the
errors an unknown member, a stale generation or an illegal group id get."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.delete_groups import DeleteGroupsRequest
from exactly.protocol.messages.describe_groups import DescribeGroupsRequest
from exactly.protocol.messages.find_coordinator import FindCoordinatorRequest
from exactly.protocol.messages.heartbeat import HeartbeatRequest
from exactly.protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from exactly.protocol.messages.leave_group import LeaveGroupRequest, MemberIdentity
from exactly.protocol.messages.list_groups import ListGroupsRequest
from exactly.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from exactly.protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from exactly.protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from exactly.protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from exactly.testing.processes import BrokerProcess
from tests.group.helpers import subscription
from tests.interop.client import RawClient
from tests.interop.support import create_topic, running_broker

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data: Path = tmp_path_factory.mktemp("group-errors") / "data"
    with running_broker(data, "group.initial.rebalance.delay.ms=0") as proc:
        create_topic(proc.bootstrap, "t", 2)
        yield proc


@pytest.fixture
def client(broker: BrokerProcess) -> Iterator[RawClient]:
    c = RawClient(broker.bootstrap, timeout=20)
    yield c
    c.close()


def join(client: RawClient, group: str, member_id: str = "", version: int = 5, **kw: Any) -> Any:
    request = JoinGroupRequest(
        group,
        kw.pop("session_timeout_ms", 10_000),
        kw.pop("rebalance_timeout_ms", 10_000),
        member_id,
        kw.pop("group_instance_id", None),
        "consumer",
        [JoinGroupRequestProtocol("range", subscription("t"))],
    )
    return client.request(ApiKey.JOIN_GROUP, version, request)


def one_member_group(
    client: RawClient, group: str, version: int = 5, session_timeout_ms: int = 10_000
) -> tuple[str, int]:
    """Join (with the MEMBER_ID_REQUIRED handshake from v4) and sync; returns (member id, generation)."""
    first = join(client, group, version=version, session_timeout_ms=session_timeout_ms)
    member_id = first.member_id
    if version >= 4:
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
        response = join(client, group, member_id, version=version, session_timeout_ms=session_timeout_ms)
    else:
        response = first
    assert response.error_code == ErrorCode.NONE, response
    member_id, generation = response.member_id, response.generation_id
    assert response.leader == member_id
    assert [m.member_id for m in response.members] == [member_id]
    sync = client.request(
        ApiKey.SYNC_GROUP,
        min(version, 5),
        SyncGroupRequest(
            group,
            generation,
            member_id,
            None,
            "consumer",
            "range",
            [SyncGroupRequestAssignment(member_id, b"x")],
        ),
    )
    assert (sync.error_code, sync.assignment) == (ErrorCode.NONE, b"x")
    return member_id, generation


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5, 6, 7])
def test_join_sync_heartbeat_leave_in_every_version(client: RawClient, version: int) -> None:
    group = f"versions-{version}"
    member_id, generation = one_member_group(client, group, version)
    heartbeat = client.request(
        ApiKey.HEARTBEAT, min(version, 4), HeartbeatRequest(group, generation, member_id)
    )
    assert heartbeat.error_code == ErrorCode.NONE
    leave_version = min(version, 5)
    if leave_version >= 3:
        leave = client.request(
            ApiKey.LEAVE_GROUP, leave_version, LeaveGroupRequest(group, members=[MemberIdentity(member_id)])
        )
        assert [(m.member_id, m.error_code) for m in leave.members] == [(member_id, 0)]
    else:
        leave = client.request(ApiKey.LEAVE_GROUP, leave_version, LeaveGroupRequest(group, member_id))
    assert leave.error_code == ErrorCode.NONE


def test_unknown_member_stale_generation_and_illegal_group_id(client: RawClient) -> None:
    group = "errors"
    member_id, generation = one_member_group(client, group)

    def heartbeat(member: str, gen: int, group_id: str = group) -> int:
        return int(client.request(ApiKey.HEARTBEAT, 3, HeartbeatRequest(group_id, gen, member)).error_code)

    def commit(member: str, gen: int, group_id: str = group) -> int:
        request = OffsetCommitRequest(
            group_id,
            gen,
            member,
            None,
            -1,
            [OffsetCommitRequestTopic("t", partitions=[OffsetCommitRequestPartition(0, 5)])],
        )
        return int(client.request(ApiKey.OFFSET_COMMIT, 8, request).topics[0].partitions[0].error_code)

    def sync(member: str, gen: int, group_id: str = group) -> int:
        return int(client.request(ApiKey.SYNC_GROUP, 3, SyncGroupRequest(group_id, gen, member)).error_code)

    assert heartbeat("no-such-member", generation) == ErrorCode.UNKNOWN_MEMBER_ID
    assert heartbeat(member_id, generation - 1) == ErrorCode.ILLEGAL_GENERATION
    assert heartbeat(member_id, generation, "") == ErrorCode.INVALID_GROUP_ID
    assert heartbeat(member_id, generation, "no-such-group") == ErrorCode.UNKNOWN_MEMBER_ID
    assert sync("no-such-member", generation) == ErrorCode.UNKNOWN_MEMBER_ID
    assert sync(member_id, generation + 1) == ErrorCode.ILLEGAL_GENERATION
    assert sync(member_id, generation, "") == ErrorCode.INVALID_GROUP_ID
    assert commit("no-such-member", generation) == ErrorCode.UNKNOWN_MEMBER_ID
    assert commit(member_id, generation + 7) == ErrorCode.ILLEGAL_GENERATION
    assert commit(member_id, generation, "") == ErrorCode.INVALID_GROUP_ID
    assert commit(member_id, generation) == ErrorCode.NONE
    assert join(client, "").error_code == ErrorCode.INVALID_GROUP_ID
    assert join(client, group, "no-such-member").error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert join(client, group, session_timeout_ms=100).error_code == ErrorCode.INVALID_SESSION_TIMEOUT
    # the member is still fine after all that
    assert heartbeat(member_id, generation) == ErrorCode.NONE
    leave = client.request(ApiKey.LEAVE_GROUP, 1, LeaveGroupRequest(group, "no-such-member"))
    assert leave.error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_find_coordinator_single_and_batched(client: RawClient, broker: BrokerProcess) -> None:
    port = int(broker.bootstrap.rsplit(":", 1)[1])
    for version in (0, 1, 2, 3):
        response = client.request(ApiKey.FIND_COORDINATOR, version, FindCoordinatorRequest("g", 0))
        assert (response.error_code, response.node_id, response.host, response.port) == (
            0,
            0,
            "127.0.0.1",
            port,
        )
    response = client.request(
        ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b"])
    )
    assert [(c.key, c.error_code, c.port) for c in response.coordinators] == [("a", 0, port), ("b", 0, port)]
    bad = client.request(ApiKey.FIND_COORDINATOR, 2, FindCoordinatorRequest("g", 7))
    assert bad.error_code == ErrorCode.INVALID_REQUEST


def test_offsets_list_describe_delete(client: RawClient) -> None:
    group = "admin-ops"
    commit = OffsetCommitRequest(
        group,
        -1,
        "",
        None,
        -1,
        [
            OffsetCommitRequestTopic("t", partitions=[OffsetCommitRequestPartition(0, 11, -1, -1, "meta")]),
            OffsetCommitRequestTopic("missing-topic", partitions=[OffsetCommitRequestPartition(0, 1)]),
        ],
    )
    response = client.request(ApiKey.OFFSET_COMMIT, 2, commit)
    assert [(t.name, t.partitions[0].error_code) for t in response.topics] == [
        ("t", ErrorCode.NONE),
        ("missing-topic", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    for version in (1, 2, 3, 5, 6, 7):
        fetched = client.request(
            ApiKey.OFFSET_FETCH, version, OffsetFetchRequest(group, [OffsetFetchRequestTopic("t", [0, 1])])
        )
        assert [(p.partition_index, p.committed_offset) for p in fetched.topics[0].partitions] == [
            (0, 11),
            (1, -1),
        ]
    everything = client.request(ApiKey.OFFSET_FETCH, 7, OffsetFetchRequest(group, None, require_stable=True))
    assert [(t.name, [p.committed_offset for p in t.partitions]) for t in everything.topics] == [("t", [11])]
    batched = client.request(
        ApiKey.OFFSET_FETCH,
        8,
        OffsetFetchRequest(
            groups=[
                OffsetFetchRequestGroup(group, topics=[OffsetFetchRequestTopics("t", partition_indexes=[0])]),
                OffsetFetchRequestGroup("nobody", topics=None),
            ]
        ),
    )
    assert [
        (g.group_id, [(t.name, [p.committed_offset for p in t.partitions]) for t in g.topics])
        for g in batched.groups
    ] == [
        (group, [("t", [11])]),
        ("nobody", []),
    ]
    listed = client.request(ApiKey.LIST_GROUPS, 4, ListGroupsRequest(["Empty"]))
    assert (group, "Empty") in {(g.group_id, g.group_state) for g in listed.groups}
    described = client.request(ApiKey.DESCRIBE_GROUPS, 3, DescribeGroupsRequest([group, "never-seen"]))
    assert [(g.group_id, g.group_state, g.error_code) for g in described.groups] == [
        (group, "Empty", 0),
        ("never-seen", "Dead", 0),
    ]
    deleted_offsets = client.request(
        ApiKey.OFFSET_DELETE,
        0,
        OffsetDeleteRequest(group, [OffsetDeleteRequestTopic("t", [OffsetDeleteRequestPartition(0)])]),
    )
    assert deleted_offsets.error_code == ErrorCode.NONE
    refetched = client.request(
        ApiKey.OFFSET_FETCH, 3, OffsetFetchRequest(group, [OffsetFetchRequestTopic("t", [0])])
    )
    assert refetched.topics[0].partitions[0].committed_offset == -1

    member_id, _ = one_member_group(client, "busy")
    deleted = client.request(
        ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest([group, "busy", "unknown-group", ""])
    )
    assert [(r.group_id, r.error_code) for r in deleted.results] == [
        (group, ErrorCode.NONE),
        ("busy", ErrorCode.NON_EMPTY_GROUP),
        ("unknown-group", ErrorCode.GROUP_ID_NOT_FOUND),
        ("", ErrorCode.INVALID_GROUP_ID),
    ]
    described = client.request(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(["busy"]))
    [busy] = described.groups
    assert (busy.group_state, busy.protocol_type, busy.protocol_data) == ("Stable", "consumer", "range")
    assert [(m.member_id, m.member_assignment) for m in busy.members] == [(member_id, b"x")]


def test_session_timeout_removes_a_silent_member(client: RawClient) -> None:
    group = "silent"
    member_id, generation = one_member_group(client, group, session_timeout_ms=6000)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        described = client.request(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest([group])).groups[0]
        if described.group_state == "Empty":
            break
        time.sleep(0.2)
    assert described.group_state == "Empty"
    assert client.request(ApiKey.HEARTBEAT, 3, HeartbeatRequest(group, generation, member_id)).error_code == (
        ErrorCode.UNKNOWN_MEMBER_ID
    )

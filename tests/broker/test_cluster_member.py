"""ClusterMember's topic creation while ZooKeeper is out of reach (a ZooKeeper restart, an expired session
being replaced): the writes are made again once a session is there, a create that landed before its
connection dropped counts as ours, and a deadline that passes answers REQUEST_TIMED_OUT, never an unknown
server error."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from exactly.broker.cluster_member import ClusterConfig, ClusterMember
from exactly.broker.zookeeper import ConnectionLoss, NodeExistsError, NoNodeError, SessionExpiredError
from exactly.cluster import znodes
from exactly.cluster.znodes import TopicAssignment
from exactly.errors import ErrorCode, KafkaError


class FlakyZooKeeper:
    """Fails the first `failures` requests with the given errors; a create may land before failing."""

    def __init__(self, failures: list[BaseException], land_before_failing: bool = False) -> None:
        self.failures = failures
        self.land_before_failing = land_before_failing
        self.nodes: dict[str, bytes] = {}
        self.connected = True

    def _maybe_fail(self) -> None:
        if self.failures:
            raise self.failures.pop(0)

    async def set(self, path: str, data: bytes, version: int = -1) -> None:
        self._maybe_fail()
        if path not in self.nodes:
            raise NoNodeError()
        self.nodes[path] = data

    async def create(self, path: str, data: bytes, **_: Any) -> None:
        if self.failures and self.land_before_failing and path == znodes.topic_path("t"):
            self.nodes[path] = data  # it landed; the answer was lost with the connection
        self._maybe_fail()
        if path in self.nodes:
            raise NodeExistsError()
        self.nodes[path] = data

    async def get(self, path: str) -> tuple[bytes, object] | None:
        self._maybe_fail()
        return (self.nodes[path], object()) if path in self.nodes else None


def _member(zk: FlakyZooKeeper) -> ClusterMember:
    replicas = SimpleNamespace(wakeups=SimpleNamespace(appended=lambda: None))
    member = ClusterMember(
        ClusterConfig(1, "127.0.0.1:1"),
        replicas,  # type: ignore[arg-type]
        SimpleNamespace(topics={}),  # type: ignore[arg-type]
        lambda: (),
        lambda topic: None,
    )
    member.zk = zk  # type: ignore[assignment]

    async def no_wait(topic: str, partitions: range, timeout_s: float) -> None:
        return None

    member.wait_for_leaders = no_wait  # type: ignore[method-assign]
    return member


def test_topic_creation_waits_for_zookeeper_and_goes_on() -> None:
    zk = FlakyZooKeeper([ConnectionLoss(), SessionExpiredError(), ConnectionLoss()])
    info = asyncio.run(_member(zk).create_topic("t", 1, 1, {}, {0: (1,)}, 5.0))
    assert info.name == "t"
    assert TopicAssignment.decode(zk.nodes[znodes.topic_path("t")]).partitions == {0: (1,)}
    assert zk.nodes[znodes.config_path("topics", "t")]


def test_a_create_that_landed_before_the_connection_dropped_is_ours() -> None:
    zk = FlakyZooKeeper([ConnectionLoss()], land_before_failing=True)
    zk.nodes[znodes.config_path("topics", "t")] = b"{}"  # the config write goes through at once
    info = asyncio.run(_member(zk).create_topic("t", 1, 1, {}, {0: (1,)}, 5.0))
    assert info.name == "t"


def test_someone_elses_topic_is_still_already_there() -> None:
    zk = FlakyZooKeeper([])
    zk.nodes[znodes.topic_path("t")] = TopicAssignment(uuid.uuid4(), {0: (1,)}).encode()
    with pytest.raises(KafkaError) as e:
        asyncio.run(_member(zk).create_topic("t", 1, 1, {}, {0: (1,)}, 5.0))
    assert e.value.code == ErrorCode.TOPIC_ALREADY_EXISTS


def test_zookeeper_out_of_reach_past_the_deadline_is_a_request_timeout() -> None:
    zk = FlakyZooKeeper([ConnectionLoss() for _ in range(1000)])
    zk.connected = False
    with pytest.raises(KafkaError) as e:
        asyncio.run(_member(zk).create_topic("t", 1, 1, {}, {0: (1,)}, 0.3))
    assert e.value.code == ErrorCode.REQUEST_TIMED_OUT

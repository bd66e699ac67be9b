"""ClusterMember's admin writes (topic creation, new partitions, deletion, topic configs, client quotas,
broker configs, ACLs, SCRAM credentials) while ZooKeeper is out of reach (a ZooKeeper restart, an expired
session being replaced): the writes are made again once a session is there, a write that landed before
its connection dropped counts as ours, and a deadline that passes answers REQUEST_TIMED_OUT, never an
unknown server error."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from exactly.broker.cluster_member import ClusterConfig, ClusterMember
from exactly.broker.zookeeper import (
    BadVersionError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
)
from exactly.cluster import znodes
from exactly.cluster.metadata import ScramCredential
from exactly.cluster.znodes import EntityConfig, TopicAssignment
from exactly.errors import ErrorCode, KafkaError
from exactly.security.acls import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    PermissionType,
    ResourcePattern,
    ResourceType,
)


class FlakyZooKeeper:
    """Fails the first `failures` requests with the given errors; a create may land before failing."""

    def __init__(self, failures: list[BaseException], land_before_failing: bool = False) -> None:
        self.failures = failures
        self.land_before_failing = land_before_failing
        self.nodes: dict[str, bytes] = {}
        self.versions: dict[str, int] = {}
        self.sequence = 0
        self.connected = True
        self.fail_gets = True  # False: only writes fail

    def _maybe_fail(self) -> None:
        if self.failures:
            raise self.failures.pop(0)

    async def set(self, path: str, data: bytes, version: int = -1) -> None:
        if path not in self.nodes:
            self._maybe_fail()
            raise NoNodeError()
        self.versions.setdefault(path, 0)
        if version not in (-1, self.versions[path]):
            self._maybe_fail()
            raise BadVersionError()
        if self.failures and self.land_before_failing:
            self.nodes[path] = data  # it landed; the answer was lost with the connection
            self.versions[path] += 1
        self._maybe_fail()
        self.nodes[path] = data
        self.versions[path] += 1

    async def create(self, path: str, data: bytes, sequence: bool = False, **_: Any) -> None:
        if sequence:
            path = f"{path}{self.sequence:010d}"
            self.sequence += 1
        if self.failures and self.land_before_failing and path == znodes.topic_path("t"):
            self.nodes[path] = data  # it landed; the answer was lost with the connection
            self.versions[path] = 0
        self._maybe_fail()
        if path in self.nodes:
            raise NodeExistsError()
        self.nodes[path] = data
        self.versions[path] = 0

    async def delete(self, path: str, version: int = -1) -> None:
        self._maybe_fail()
        if path not in self.nodes:
            raise NoNodeError()
        if version not in (-1, self.versions.get(path, 0)):
            raise BadVersionError()
        del self.nodes[path]
        self.versions.pop(path, None)

    async def get(self, path: str) -> tuple[bytes, object] | None:
        if self.fail_gets:
            self._maybe_fail()
        if path not in self.nodes:
            return None
        return self.nodes[path], SimpleNamespace(version=self.versions.get(path, 0))


def _member(zk: FlakyZooKeeper) -> ClusterMember:
    replicas = SimpleNamespace(wakeups=SimpleNamespace(appended=lambda: None))
    member = ClusterMember(
        ClusterConfig(1, "127.0.0.1:1"),
        replicas,  # type: ignore[arg-type]
        SimpleNamespace(  # type: ignore[arg-type]
            topics={}, client_quotas={}, broker_configs={}, acls=set(), scram_credentials={}
        ),
        lambda: (),
        lambda topic: None,
    )
    member.zk = zk  # type: ignore[assignment]
    member.dynamic_configs.zk = zk  # type: ignore[assignment]
    member.security.zk = zk  # type: ignore[assignment]

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


def test_new_partitions_wait_for_zookeeper_and_a_landed_write_is_ours() -> None:
    zk = FlakyZooKeeper([ConnectionLoss(), ConnectionLoss()], land_before_failing=True)
    topic_id = uuid.uuid4()
    zk.nodes[znodes.topic_path("t")] = TopicAssignment(topic_id, {0: (1,)}).encode()
    zk.versions[znodes.topic_path("t")] = 0
    member = _member(zk)
    member.cache.assignments["t"] = TopicAssignment(topic_id, {0: (1,)})
    member.cache.brokers[1] = SimpleNamespace(rack=None)  # type: ignore[assignment]
    member.metadata.topics["t"] = "info"  # type: ignore[assignment]
    zk.failures, zk.fail_gets = [ConnectionLoss()], False
    asyncio.run(member.add_partitions("t", 2, 5.0))
    assert zk.versions[znodes.topic_path("t")] == 1  # written once: the retry saw it had landed
    assert TopicAssignment.decode(zk.nodes[znodes.topic_path("t")]).partitions == {0: (1,), 1: (1,)}


def test_deletion_and_topic_configs_wait_for_zookeeper() -> None:
    zk = FlakyZooKeeper([ConnectionLoss(), SessionExpiredError(), ConnectionLoss()])
    member = _member(zk)
    member.metadata.topics["t"] = "info"  # type: ignore[assignment]
    asyncio.run(member.delete_topic("t", 5.0))
    assert znodes.delete_topic_path("t") in zk.nodes
    zk.failures = [ConnectionLoss(), ConnectionLoss()]
    asyncio.run(member.set_topic_configs("t", {"retention.ms": "1"}, 5.0))
    assert EntityConfig.decode(zk.nodes[znodes.config_path("topics", "t")]).configs == {"retention.ms": "1"}


def test_quotas_and_broker_configs_wait_for_zookeeper_and_are_announced() -> None:
    zk = FlakyZooKeeper([ConnectionLoss(), SessionExpiredError()])
    member = _member(zk)
    entity = (("client-id", "c"),)
    asyncio.run(member.alter_client_quotas(entity, {"producer_byte_rate": 1024.0}, 5.0))
    assert zk.nodes["/config/clients/c"] == b'{"version":1,"config":{"producer_byte_rate":"1024"}}'
    assert member.metadata.client_quotas == {entity: {"producer_byte_rate": 1024.0}}
    zk.failures = [ConnectionLoss()]
    asyncio.run(member.set_broker_configs("", {"log.cleaner.backoff.ms": "1000"}, 5.0))
    assert member.metadata.broker_configs == {"": {"log.cleaner.backoff.ms": "1000"}}
    notes = sorted(v for k, v in zk.nodes.items() if k.startswith("/config/changes/"))
    assert notes == [
        b'{"version":2,"entity_path":"brokers/<default>"}',
        b'{"version":2,"entity_path":"clients/c"}',
    ]


def test_acls_and_scram_credentials_wait_for_zookeeper_and_are_announced() -> None:
    zk = FlakyZooKeeper([ConnectionLoss(), SessionExpiredError()])
    member = _member(zk)
    pattern = ResourcePattern(ResourceType.TOPIC, "t")
    acl = AclBinding(pattern, AccessControlEntry("User:alice", "*", AclOperation.READ, PermissionType.ALLOW))
    assert asyncio.run(member.change_acls([acl], add=True, timeout_s=5.0)) == [acl]
    assert member.metadata.acls == {acl}
    credential = ScramCredential(b"salt", 4096, b"stored", b"server")
    zk.failures = [ConnectionLoss()]
    asyncio.run(member.change_scram_credential("alice", "SCRAM-SHA-256", credential, 5.0))
    assert member.metadata.scram_credentials == {("alice", "SCRAM-SHA-256"): credential}
    zk.failures = [SessionExpiredError()]
    assert asyncio.run(member.change_acls([acl], add=False, timeout_s=5.0)) == [acl]
    assert member.metadata.acls == set()
    notes = [k for k in zk.nodes if k.startswith(("/kafka-acl-changes/", "/config/changes/"))]
    assert len(notes) == 3  # two ACL changes and the user's


def test_a_quota_write_that_landed_before_the_connection_dropped_is_still_announced() -> None:
    zk = FlakyZooKeeper([])
    zk.nodes["/config/clients/c"] = b'{"version":1,"config":{}}'
    zk.versions["/config/clients/c"] = 0
    zk.land_before_failing = True
    member = _member(zk)
    zk.failures, zk.fail_gets = [ConnectionLoss()], False
    asyncio.run(member.alter_client_quotas((("client-id", "c"),), {"producer_byte_rate": 1024.0}, 5.0))
    assert [v for k, v in zk.nodes.items() if k.startswith("/config/changes/")] == [
        b'{"version":2,"entity_path":"clients/c"}'
    ]


@pytest.mark.parametrize("write", ["quotas", "broker configs", "delete", "topic configs", "acls", "scram"])
def test_admin_writes_past_the_deadline_are_request_timeouts(write: str) -> None:
    zk = FlakyZooKeeper([ConnectionLoss() for _ in range(1000)])
    zk.connected = False
    member = _member(zk)
    member.metadata.topics["t"] = "info"  # type: ignore[assignment]
    calls = {
        "quotas": lambda: member.alter_client_quotas((("user", "u"),), {"producer_byte_rate": 1.0}, 0.3),
        "broker configs": lambda: member.set_broker_configs("1", {"num.io.threads": "4"}, 0.3),
        "delete": lambda: member.delete_topic("t", 0.3),
        "topic configs": lambda: member.set_topic_configs("t", {}, 0.3),
        "acls": lambda: member.change_acls(
            [
                AclBinding(
                    ResourcePattern(ResourceType.GROUP, "g"),
                    AccessControlEntry("User:u", "*", AclOperation.READ, PermissionType.ALLOW),
                )
            ],
            add=True,
            timeout_s=0.3,
        ),
        "scram": lambda: member.change_scram_credential("u", "SCRAM-SHA-512", None, 0.3),
    }
    with pytest.raises(KafkaError) as e:
        asyncio.run(calls[write]())  # type: ignore[no-untyped-call]
    assert e.value.code == ErrorCode.REQUEST_TIMED_OUT

"""Security in a replicated cluster: three real brokers on one real ZooKeeper whose inter-broker listener
is SASL_PLAINTEXT, the brokers authenticating to each other with SCRAM-SHA-512 as `User:broker` (a super
user of the StandardAuthorizer on every broker). ACLs and SCRAM users created through one broker are in
ZooKeeper, in Kafka's layout, and take effect on every broker.

Each broker has a PLAINTEXT listener (ANONYMOUS, for the readiness check) and the SASL listener the
brokers and the clients of these tests use. The brokers' own SCRAM credentials (and the admin's) are
written to ZooKeeper before the brokers start, as `kafka-configs --zookeeper ... --add-config
SCRAM-SHA-512=[password=...]` does for a Kafka cluster.
"""

from __future__ import annotations

import functools
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kazoo.client import KazooClient

from exactly.client.connection import KafkaConnection
from exactly.client.security import ClientSecurity, SaslRefusedError
from exactly.cluster import security_znodes as sz
from exactly.cluster.znodes import EntityConfig
from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from exactly.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from exactly.security.listeners import SecurityProtocol
from exactly.security.sasl import make_scram_credential
from exactly.testing.cluster import cluster_settings
from exactly.testing.processes import BrokerProcess, free_port
from exactly.testing.zookeeper import ZooKeeperProcess
from tests.interop import cluster_support as cs

pytestmark = pytest.mark.slow

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
BROKER_USER, BROKER_PASSWORD = "broker", "broker-secret"
ADMIN_USER, ADMIN_PASSWORD = "admin", "admin-secret"
TOPIC = "secured"


class SecureCluster:
    def __init__(self, root: Path, connect: str) -> None:
        self.connect = connect
        self.sasl_ports: dict[int, int] = {}
        self.brokers: dict[int, BrokerProcess] = {}
        for broker_id in (1, 2, 3):
            plain, sasl = free_port(), free_port()
            self.sasl_ports[broker_id] = sasl
            (root / f"broker-{broker_id}").mkdir(parents=True)
            self.brokers[broker_id] = BrokerProcess(
                root / f"broker-{broker_id}" / "data",
                *cluster_settings(broker_id, connect, 3),
                f"listeners=PLAINTEXT://127.0.0.1:{plain},SASL://127.0.0.1:{sasl}",
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT",
                "inter.broker.listener.name=SASL",
                "listener.name.sasl.sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512",
                "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
                "listener.name.sasl.scram-sha-512.sasl.jaas.config="
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                f'username="{BROKER_USER}" password="{BROKER_PASSWORD}";',
                f"authorizer.class.name={AUTHORIZER}",
                f"super.users=User:{BROKER_USER};User:{ADMIN_USER}",
                port=plain,
                log_path=root / f"broker-{broker_id}.log",
            )

    def sasl(self, *broker_ids: int) -> str:
        return ",".join(f"127.0.0.1:{self.sasl_ports[b]}" for b in broker_ids or (1, 2, 3))

    def client_config(self, *broker_ids: int, user: str = ADMIN_USER, password: str = ADMIN_PASSWORD) -> dict:
        return {
            "bootstrap.servers": self.sasl(*broker_ids),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": user,
            "sasl.password": password,
        }

    def admin(self, *broker_ids: int) -> AdminClient:
        return AdminClient(self.client_config(*broker_ids))

    def connect_raw(self, broker_id: int, user: str, password: str, mechanism: str) -> KafkaConnection:
        security = ClientSecurity(SecurityProtocol.SASL_PLAINTEXT, mechanism, user, password)
        return KafkaConnection.open("127.0.0.1", self.sasl_ports[broker_id], security=security, timeout=10)

    def wait_for_brokers(self, timeout: float = 60) -> None:
        def ready() -> bool:
            metadata = self.admin(*(b for b, p in self.brokers.items() if p.running)).list_topics(timeout=5)
            return len(metadata.brokers) == 3 and metadata.controller_id > 0

        until(ready, timeout, "three brokers and a controller")


# any error while waiting counts as not yet (a broker still starting, a SASL login not yet possible)
until = functools.partial(cs.until, retry_on=(Exception,))


def seed_users(hosts: str, chroot: str, users: dict[str, tuple[str, str]]) -> None:
    """SCRAM credentials written to ZooKeeper before any broker starts (as `kafka-configs --zookeeper`)."""
    zk = KazooClient(hosts=hosts)
    zk.start(timeout=15)
    try:
        for user, (mechanism, password) in users.items():
            credential = make_scram_credential(mechanism, password, 4096)
            config = sz.with_scram({}, mechanism, credential)
            zk.create(chroot + sz.user_config_path(user), EntityConfig(config).encode(), makepath=True)
    finally:
        zk.stop()
        zk.close()


@pytest.fixture(scope="module")
def cluster(
    zookeeper_server: ZooKeeperProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SecureCluster]:
    chroot = f"/secure-{uuid.uuid4().hex[:8]}"
    seed_users(
        zookeeper_server.connect_string,
        chroot,
        {BROKER_USER: ("SCRAM-SHA-512", BROKER_PASSWORD), ADMIN_USER: ("SCRAM-SHA-256", ADMIN_PASSWORD)},
    )
    c = SecureCluster(tmp_path_factory.mktemp("secure-cluster"), zookeeper_server.connect_string + chroot)
    c.zk_hosts, c.chroot = zookeeper_server.connect_string, chroot  # type: ignore[attr-defined]
    try:
        for broker in c.brokers.values():
            broker.start()
        c.wait_for_brokers()
        yield c
    finally:
        for broker in c.brokers.values():
            if broker.running:
                try:
                    broker.stop()
                except Exception:  # noqa: BLE001 (stop the others anyway)
                    broker.kill()


def _zk_get(cluster: SecureCluster, path: str) -> bytes | None:
    zk = KazooClient(hosts=cluster.zk_hosts)  # type: ignore[attr-defined]
    zk.start(timeout=15)
    try:
        full = cluster.chroot + path  # type: ignore[attr-defined]
        return zk.get(full)[0] if zk.exists(full) else None
    finally:
        zk.stop()
        zk.close()


def _partition(cluster: SecureCluster, *broker_ids: int) -> tuple[int, list[int]]:
    metadata = cluster.admin(*broker_ids).list_topics(TOPIC, timeout=10)
    p = metadata.topics[TOPIC].partitions[0]
    return p.leader, sorted(p.isrs)


def test_replication_between_sasl_brokers_survives_the_leader(cluster: SecureCluster) -> None:
    admin = cluster.admin(1)
    for future in admin.create_topics([NewTopic(TOPIC, 1, 3)]).values():
        future.result(60)
    until(lambda: _partition(cluster)[1] == [1, 2, 3], 60, "the three replicas in sync over SASL")
    producer = Producer({**cluster.client_config(), "acks": "all", "enable.idempotence": True})
    errors: list[object] = []
    for i in range(200):
        producer.produce(TOPIC, f"m{i}".encode(), on_delivery=lambda err, _m: err and errors.append(err))
    assert producer.flush(60) == 0
    assert errors == []
    leader, _ = _partition(cluster)
    cluster.brokers[leader].kill()
    alive = [b for b in (1, 2, 3) if b != leader]
    until(lambda: _partition(cluster, *alive)[0] in alive, 60, "a follower to take over")
    consumer = Consumer(
        {
            **cluster.client_config(*alive),
            "group.id": f"check-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([TOPIC])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(values) < 200 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    assert values == [f"m{i}".encode() for i in range(200)]
    cluster.brokers[leader].start()
    cluster.wait_for_brokers()
    until(lambda: _partition(cluster)[1] == [1, 2, 3], 60, "the restarted broker back in the ISR")


def _follower_fetch(connection: KafkaConnection) -> int:
    request = FetchRequest(
        replica_id=9,
        max_wait_ms=0,
        topics=[FetchTopic(TOPIC, partitions=[FetchPartition(0, fetch_offset=0, partition_max_bytes=1024)])],
    )
    response = connection.request(ApiKey.FETCH, 12, request)
    return int(response.responses[0].partitions[0].error_code)


def _create_user(cluster: SecureCluster, broker_id: int, user: str, password: str) -> None:
    admin = cluster.admin(broker_id)
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    futures = admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(user, info, password.encode())]
    )
    for future in futures.values():
        future.result(30)


def test_a_scram_user_created_through_one_broker_logs_in_on_another(cluster: SecureCluster) -> None:
    _create_user(cluster, 1, "carol", "carol-pw")
    stored = _zk_get(cluster, "/config/users/carol")
    assert stored is not None
    config = EntityConfig.decode(stored).configs
    assert set(config) == {"SCRAM-SHA-256"}
    assert config["SCRAM-SHA-256"].startswith("salt=")
    assert config["SCRAM-SHA-256"].endswith(",iterations=4096")

    def logs_in() -> bool:
        cluster.connect_raw(3, "carol", "carol-pw", "SCRAM-SHA-256").close()
        return True

    until(logs_in, 30, "carol to log in on broker 3")
    with pytest.raises(SaslRefusedError):
        cluster.connect_raw(3, "carol", "wrong", "SCRAM-SHA-256")


def test_a_replica_fetch_needs_cluster_action(cluster: SecureCluster) -> None:
    _create_user(cluster, 1, "mallory", "mallory-pw")
    leader, _ = _partition(cluster)
    until(
        lambda: cluster.connect_raw(leader, "mallory", "mallory-pw", "SCRAM-SHA-256").close() is None,
        30,
        "mallory's credential on the leader",
    )
    with cluster.connect_raw(leader, "mallory", "mallory-pw", "SCRAM-SHA-256") as connection:
        assert _follower_fetch(connection) == ErrorCode.TOPIC_AUTHORIZATION_FAILED  # Kafka's answer
    with cluster.connect_raw(leader, BROKER_USER, BROKER_PASSWORD, "SCRAM-SHA-512") as connection:
        assert _follower_fetch(connection) == ErrorCode.NONE  # a super user


def _describe(cluster: SecureCluster, broker_id: int) -> int:
    with cluster.connect_raw(broker_id, "carol", "carol-pw", "SCRAM-SHA-256") as connection:
        request = MetadataRequest([MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=False)
        return int(connection.request(ApiKey.METADATA, 12, request).topics[0].error_code)


def test_an_acl_created_through_one_broker_applies_on_every_broker(cluster: SecureCluster) -> None:
    until(lambda: _describe(cluster, 3) is not None, 30, "carol on broker 3")
    assert {_describe(cluster, b) for b in (1, 2, 3)} == {ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    acl = AclBinding(
        ResourceType.TOPIC,
        TOPIC,
        ResourcePatternType.LITERAL,
        "User:carol",
        "*",
        AclOperation.DESCRIBE,
        AclPermissionType.ALLOW,
    )
    admin = cluster.admin(1)
    for future in admin.create_acls([acl]).values():
        future.result(30)
    stored = _zk_get(cluster, f"/kafka-acl/Topic/{TOPIC}")
    assert stored is not None
    assert json.loads(stored) == {
        "version": 1,
        "acls": [
            {"principal": "User:carol", "permissionType": "Allow", "operation": "Describe", "host": "*"}
        ],
    }
    for broker_id in (2, 3, 1):
        until(
            lambda b=broker_id: _describe(cluster, b) == ErrorCode.NONE, 30, f"the ACL on broker {broker_id}"
        )

    prefixed = AclBinding(
        ResourceType.TOPIC,
        "sec",
        ResourcePatternType.PREFIXED,
        "User:carol",
        "*",
        AclOperation.DESCRIBE,
        AclPermissionType.DENY,
    )
    for future in admin.create_acls([prefixed]).values():
        future.result(30)
    assert _zk_get(cluster, "/kafka-acl-extended/prefixed/Topic/sec") is not None
    for broker_id in (2, 3):
        until(
            lambda b=broker_id: _describe(cluster, b) == ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            30,
            f"the prefixed DENY on broker {broker_id}",
        )
    deny_filter = AclBindingFilter(
        ResourceType.TOPIC,
        "sec",
        ResourcePatternType.PREFIXED,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    for future in admin.delete_acls([deny_filter]).values():
        assert len(future.result(30)) == 1
    assert _zk_get(cluster, "/kafka-acl-extended/prefixed/Topic/sec") is None  # an emptied pattern's znode
    for broker_id in (2, 3):
        until(lambda b=broker_id: _describe(cluster, b) == ErrorCode.NONE, 30, f"DENY gone on {broker_id}")
    any_carol = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        "User:carol",
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    for future in admin.delete_acls([any_carol]).values():
        assert len(future.result(30)) == 1
    assert _zk_get(cluster, f"/kafka-acl/Topic/{TOPIC}") is None
    for broker_id in (2, 3):
        until(
            lambda b=broker_id: _describe(cluster, b) == ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            30,
            f"the ALLOW gone on broker {broker_id}",
        )

"""ACLs with real clients: confluent-kafka's and kafka-python's admin clients create, describe and delete
them; they survive kill -9; a principal without TRANSACTIONAL_ID WRITE cannot init, fence or abort another
principal's transactional id, and the owner's transaction commits untouched.

Principals are real: the broker listens on SASL_PLAINTEXT (SCRAM-SHA-256) only, its users are stored before
it starts (as `exactly users add --data-dir` does), and every client authenticates as its user.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from exactly.errors import ErrorCode
from exactly.protocol.messages import ApiKey
from exactly.protocol.messages.describe_transactions import DescribeTransactionsRequest
from exactly.protocol.messages.end_txn import EndTxnRequest
from exactly.protocol.messages.init_producer_id import InitProducerIdRequest
from exactly.protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from exactly.testing.processes import BrokerProcess, free_port
from tests.interop.client import RawClient
from tests.interop.support import running_broker, scram_settings, store_scram_users

pytestmark = pytest.mark.interop

TIMEOUT = 30.0
SETTINGS = (
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users=User:admin",
    "sasl.enabled.mechanisms=SCRAM-SHA-256",
)
PASSWORDS = {user: f"{user}-acls-pw" for user in ("admin", "alice", "mallory")}


def as_user(user: str) -> dict[str, str]:
    return scram_settings(user, PASSWORDS[user])


def kafka_python_as(user: str) -> dict[str, str]:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": user,
        "sasl_plain_password": PASSWORDS[user],
    }


def admin(bootstrap: str, user: str = "admin") -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, **as_user(user)})


def create_topic(bootstrap: str, name: str) -> None:
    client = admin(bootstrap)  # kept alive until the answer (a dropped client cancels its requests)
    client.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=TIMEOUT)


def topic_acl(
    name: str,
    principal: str,
    operation: AclOperation,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
    permission: AclPermissionType = AclPermissionType.ALLOW,
) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, name, pattern, principal, "*", operation, permission)


EVERYTHING = AclBindingFilter(
    ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
)


def describe(client: AdminClient, acl_filter: AclBindingFilter = EVERYTHING) -> set[str]:
    found = client.describe_acls(acl_filter).result(timeout=TIMEOUT)
    return {str(b) for b in found}


def create(client: AdminClient, *bindings: AclBinding) -> None:
    for future in client.create_acls(list(bindings)).values():
        future.result(timeout=TIMEOUT)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    store_scram_users(tmp_path / "data", PASSWORDS)
    port = free_port()
    with running_broker(
        tmp_path / "data", f"listeners=SASL_PLAINTEXT://127.0.0.1:{port}", *SETTINGS, port=port
    ) as proc:
        yield proc


def test_confluent_admin_acls_survive_kill_9(broker: BrokerProcess) -> None:
    client = admin(broker.bootstrap)
    read = topic_acl("orders", "User:alice", AclOperation.READ)
    write = topic_acl("logs-", "User:bob", AclOperation.WRITE, ResourcePatternType.PREFIXED)
    deny = topic_acl("orders", "User:*", AclOperation.WRITE, permission=AclPermissionType.DENY)
    group = AclBinding(
        ResourceType.GROUP,
        "g",
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    create(client, read, write, deny, group)
    assert describe(client) == {str(read), str(write), str(deny), str(group)}
    # MATCH: every binding that applies to topic "logs-1"
    match = AclBindingFilter(
        ResourceType.TOPIC,
        "logs-1",
        ResourcePatternType.MATCH,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert describe(client, match) == {str(write)}

    broker.kill()
    broker.restart()
    client = admin(broker.bootstrap)
    assert describe(client) == {str(read), str(write), str(deny), str(group)}

    by_alice = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        "User:alice",
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    deleted = client.delete_acls([by_alice])[by_alice].result(timeout=TIMEOUT)
    assert {str(b) for b in deleted} == {str(read), str(group)}
    broker.kill()
    broker.restart()
    assert describe(admin(broker.bootstrap)) == {str(write), str(deny)}


def test_only_cluster_alter_may_create_acls(broker: BrokerProcess) -> None:
    outsider = admin(broker.bootstrap, "mallory")
    futures = outsider.create_acls([topic_acl("orders", "User:mallory", AclOperation.ALL)])
    for future in futures.values():
        with pytest.raises(KafkaException) as raised:
            future.result(timeout=TIMEOUT)
        assert raised.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert describe(admin(broker.bootstrap)) == set()
    assert (
        "DENIED User:mallory from 127.0.0.1: ALTER on CLUSTER 'kafka-cluster' (CREATE_ACLS"
        in broker.full_log()
    )


def test_invalid_acl_is_refused_with_invalid_request(broker: BrokerProcess) -> None:
    client = admin(broker.bootstrap)
    bad = AclBinding(
        ResourceType.BROKER,  # confluent-kafka's name of Kafka's CLUSTER (4)
        "not-the-cluster",
        ResourcePatternType.LITERAL,
        "User:a",
        "*",
        AclOperation.ALTER,
        AclPermissionType.ALLOW,
    )
    with pytest.raises(KafkaException) as raised:
        client.create_acls([bad])[bad].result(timeout=TIMEOUT)
    assert raised.value.args[0].code() == KafkaError.INVALID_REQUEST
    assert "kafka-cluster" in raised.value.args[0].str()


def test_kafka_python_admin_acls(broker: BrokerProcess) -> None:
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import ACLResourcePatternType as PatternType
    from kafka.admin import ResourceType as KpResourceType

    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, **kafka_python_as("admin"))
    try:
        acl = ACL(
            "User:carol",
            "*",
            ACLOperation.WRITE,
            ACLPermissionType.ALLOW,
            ResourcePattern(KpResourceType.TRANSACTIONAL_ID, "tx-", PatternType.PREFIXED),
        )
        result = client.create_acls([acl])
        assert result["failed"] == []
        assert len(result["succeeded"]) == 1
        acl_filter = ACLFilter(
            "User:carol",
            None,
            ACLOperation.ANY,
            ACLPermissionType.ANY,
            ResourcePatternFilter(KpResourceType.ANY, None, PatternType.ANY),
        )
        found, error = client.describe_acls(acl_filter)
        assert error.errno == 0
        assert [(a.principal, a.operation, a.resource_pattern.resource_name) for a in found] == [
            ("User:carol", ACLOperation.WRITE, "tx-")
        ]
        deleted = client.delete_acls([acl_filter])
        assert len(deleted[0][1]) == 1
        found, _ = client.describe_acls(acl_filter)
        assert found == []
    finally:
        client.close()


def _kafka_python_describe(bootstrap: str, user: str | None) -> object:
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        KafkaAdminClient,
        ResourcePatternFilter,
    )
    from kafka.admin import ACLResourcePatternType as PatternType
    from kafka.admin import ResourceType as KpResourceType

    client = KafkaAdminClient(bootstrap_servers=bootstrap, **(kafka_python_as(user) if user else {}))
    try:
        pattern = ResourcePatternFilter(KpResourceType.ANY, None, PatternType.ANY)
        return client.describe_acls(ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY, pattern))
    finally:
        client.close()


def test_describe_denied_and_no_authorizer(broker: BrokerProcess, tmp_path: Path) -> None:
    """(kafka-python: librdkafka's describe_acls drops DescribeAcls' top-level error and returns [])"""
    from kafka.errors import ClusterAuthorizationFailedError, SecurityDisabledError

    with pytest.raises(ClusterAuthorizationFailedError):
        _kafka_python_describe(broker.bootstrap, "mallory")
    with running_broker(tmp_path / "plain") as proc, pytest.raises(SecurityDisabledError):
        _kafka_python_describe(proc.bootstrap, None)  # PLAINTEXT, no authorizer


def _raw(bootstrap: str, user: str, api: ApiKey, version: int, body: object) -> object:
    client = RawClient(bootstrap, client_id=user)
    try:
        client.login(user, PASSWORDS[user])
        return client.request(api, version, body)
    finally:
        client.close()


def test_a_stranger_cannot_init_fence_or_abort_anothers_transaction(broker: BrokerProcess) -> None:
    topic = "owned"
    create_topic(broker.bootstrap, topic)
    client = admin(broker.bootstrap)
    txn = "tx-alice"
    create(
        client,
        AclBinding(
            ResourceType.TRANSACTIONAL_ID,
            txn,
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.WRITE,
            AclPermissionType.ALLOW,
        ),
        topic_acl(topic, "User:alice", AclOperation.WRITE),
        topic_acl(topic, "User:mallory", AclOperation.WRITE),  # mallory may write the topic, not the id
    )
    owner = Producer({"bootstrap.servers": broker.bootstrap, **as_user("alice"), "transactional.id": txn})
    owner.init_transactions(TIMEOUT)
    owner.begin_transaction()
    for i in range(3):
        owner.produce(topic, f"a{i}".encode())
    assert owner.flush(TIMEOUT) == 0

    stranger = Producer(
        {"bootstrap.servers": broker.bootstrap, **as_user("mallory"), "transactional.id": txn}
    )
    with pytest.raises(KafkaException) as raised:
        stranger.init_transactions(TIMEOUT)
    assert raised.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    described = _raw(
        broker.bootstrap, "admin", ApiKey.DESCRIBE_TRANSACTIONS, 0, DescribeTransactionsRequest([txn])
    )
    state = described.transaction_states[0]  # type: ignore[attr-defined]
    assert state.transaction_state == "Ongoing"
    pid, epoch = state.producer_id, state.producer_epoch

    init = _raw(
        broker.bootstrap, "mallory", ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(txn, 60_000, -1, -1)
    )
    assert init.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED  # type: ignore[attr-defined]
    abort = _raw(broker.bootstrap, "mallory", ApiKey.END_TXN, 3, EndTxnRequest(txn, pid, epoch, False))
    assert abort.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED  # type: ignore[attr-defined]
    marker = WritableTxnMarker(pid, epoch, False, [WritableTxnMarkerTopic(topic, [0])], 0)
    markers = _raw(broker.bootstrap, "mallory", ApiKey.WRITE_TXN_MARKERS, 1, WriteTxnMarkersRequest([marker]))
    code = markers.markers[0].topics[0].partitions[0].error_code  # type: ignore[attr-defined]
    assert code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED

    # the owner's transaction is untouched: same producer, still ongoing, and it commits
    after = _raw(
        broker.bootstrap, "admin", ApiKey.DESCRIBE_TRANSACTIONS, 0, DescribeTransactionsRequest([txn])
    )
    state = after.transaction_states[0]  # type: ignore[attr-defined]
    assert (state.transaction_state, state.producer_id, state.producer_epoch) == ("Ongoing", pid, epoch)
    owner.produce(topic, b"a3")
    owner.commit_transaction(TIMEOUT)

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            **as_user("admin"),
            "group.id": "acl-check",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT
        while len(values) < 4 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
        assert values == [b"a0", b"a1", b"a2", b"a3"]
    finally:
        consumer.close()
    log = broker.full_log()
    assert "DENIED User:mallory from 127.0.0.1: WRITE on TRANSACTIONAL_ID 'tx-alice' (INIT_PRODUCER_ID" in log
    assert "DENIED User:mallory from 127.0.0.1: CLUSTER_ACTION on CLUSTER 'kafka-cluster'" in log


def test_authorized_operations_come_from_the_acls(broker: BrokerProcess) -> None:
    from confluent_kafka import TopicCollection

    create_topic(broker.bootstrap, "ops")
    create(
        admin(broker.bootstrap),
        topic_acl("ops", "User:alice", AclOperation.READ),
        topic_acl("ops", "User:alice", AclOperation.ALTER_CONFIGS),
        topic_acl("ops", "User:alice", AclOperation.DELETE, permission=AclPermissionType.DENY),
    )
    alice = admin(broker.bootstrap, "alice")
    futures = alice.describe_topics(TopicCollection(["ops"]), include_authorized_operations=True)
    described = futures["ops"].result(timeout=TIMEOUT)
    # READ implies DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS
    assert {op.name for op in described.authorized_operations} == {
        "READ",
        "DESCRIBE",
        "ALTER_CONFIGS",
        "DESCRIBE_CONFIGS",
    }
